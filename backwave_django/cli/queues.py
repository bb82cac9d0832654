"""``backwave queues`` (counts, pause, resume, limit, remove) and ``backwave schedules`` (list, trigger).

Reads come from :mod:`backwave_django.monitor`; changes go through :mod:`backwave_django.operator`
with the actor ``cli:{os user}`` (each audited, as in the console).
"""

from __future__ import annotations

from typing import Any

from .. import monitor, operator
from ..core.states import RemoveQueueResult, TriggerScheduleResult
from . import values
from .actions import actor
from .output import Output, instant, when
from .values import EXIT_DONE, EXIT_REFUSED, UsageError, state_name

#: Short column headings for the states, in lifecycle order.
_HEADINGS = {
    "SCHEDULED": "SCHEDULED",
    "AWAITING_PARENT": "AWAITING",
    "LEASED": "LEASED",
    "SUCCEEDED": "SUCCEEDED",
    "CANCELLED": "CANCELLED",
    "DEAD_LETTERED": "DEAD-LETTERED",
    "QUARANTINED": "QUARANTINED",
}


def state_headings() -> list[str]:
    return [_HEADINGS[state.name] for state in monitor.STATE_ORDER]


def queue_rows() -> list[dict[str, Any]]:
    """Every queue with jobs or stored settings: its counts by state, pause flag and limit."""
    depths = {depth.queue: depth for depth in monitor.queue_depths()}
    rows = []
    for status in monitor.queue_statuses(list(depths.values())):
        depth = depths.get(status.queue)
        counts = depth.counts if depth is not None else (0,) * len(monitor.STATE_ORDER)
        rows.append(
            {
                "queue": status.queue,
                "paused": status.paused,
                "concurrency_limit": status.concurrency_limit,
                "counts": {
                    state_name(state): n for state, n in zip(monitor.STATE_ORDER, counts, strict=True)
                },
                "total": sum(counts),
            }
        )
    return rows


def list_command(options: dict[str, Any], out: Output) -> int:
    rows = queue_rows()
    if options["json"]:
        out.json(rows)
        return EXIT_DONE
    if not rows:
        out.line("No queues yet (no jobs, no queue settings).")
        return EXIT_DONE
    out.table(
        ("QUEUE", "PAUSED", "LIMIT", *state_headings(), "TOTAL"),
        (
            (
                row["queue"],
                "paused" if row["paused"] else "-",
                "-" if row["concurrency_limit"] is None else row["concurrency_limit"],
                *row["counts"].values(),
                row["total"],
            )
            for row in rows
        ),
    )
    return EXIT_DONE


def _change_queue(options: dict[str, Any], out: Output) -> int:
    queue = options["queue"]
    command = options["queue_command"]
    if command == "remove":
        return _remove(queue, out)
    who = actor()
    create = bool(options.get("create"))
    try:
        if command == "pause":
            operator.pause_queue(queue, actor=who, create=create)
            done = f"Paused queue {queue!r}: workers claim nothing from it until it is resumed."
        elif command == "resume":
            operator.resume_queue(queue, actor=who, create=create)
            done = f"Resumed queue {queue!r}."
        else:
            limit = values.concurrency_limit(options["limit"])
            operator.set_concurrency_limit(queue, limit, actor=who, create=create)
            done = (
                f"Queue {queue!r}: no concurrency limit."
                if limit is None
                else f"Queue {queue!r}: at most {limit} Leased jobs at a time."
            )
    except operator.UnknownQueueError as error:
        raise UsageError(
            f"{error} Nothing was changed; pass --create to {command} it anyway "
            "(its settings then wait for jobs to arrive)."
        ) from None
    except ValueError as error:  # the queue-name rule, or the limit
        raise UsageError(str(error)) from None
    out.line(f"{done} (audited as {who})")
    return EXIT_DONE


def _remove(queue: str, out: Output) -> int:
    who = actor()
    try:
        result = operator.remove_queue(queue, actor=who)
    except ValueError as error:  # the queue-name rule
        raise UsageError(str(error)) from None
    if result is RemoveQueueResult.HOLDS_JOBS:
        out.error(
            f"Queue {queue!r} holds jobs, so its settings stay: a queue's settings can be removed only "
            f"once it holds none (see `backwave jobs --queue {queue}`)."
        )
        return EXIT_REFUSED
    if result is RemoveQueueResult.NO_SETTINGS:
        out.error(f"Queue {queue!r} has no stored settings; nothing to remove (see `backwave queues`).")
        return EXIT_REFUSED
    out.line(f"Removed the settings of queue {queue!r}: no pause flag, no limit. (audited as {who})")
    return EXIT_DONE


def queues_command(options: dict[str, Any], out: Output) -> int:
    if options.get("queue_command") is None:
        return list_command(options, out)
    return _change_queue(options, out)


# --- schedules -----------------------------------------------------------------------------------


def schedules_command(options: dict[str, Any], out: Output) -> int:
    if options.get("schedule_command") == "trigger":
        return _trigger(options, out)
    rows = monitor.list_schedules()
    if options["json"]:
        out.json(
            [
                {
                    "schedule_id": row.schedule_id,
                    "cron": row.cron,
                    "time_zone": row.time_zone,
                    "wire_name": row.wire_name,
                    "queue": row.queue,
                    "catch_up": row.catch_up.name.lower(),
                    "no_overlap": row.no_overlap,
                    "cursor": instant(row.cursor),
                    "next_due": instant(row.next_due),
                    "error": row.error,
                    "skipped_ticks": [instant(tick) for tick in row.skipped_ticks],
                    "declared_in_settings": row.declared_in_settings,
                }
                for row in rows
            ]
        )
        return EXIT_DONE
    if not rows:
        out.line("No schedules.")
        return EXIT_DONE
    out.table(
        ("SCHEDULE", "CRON", "TIME ZONE", "WIRE NAME", "QUEUE", "NEXT DUE", "ERROR"),
        (
            (
                row.schedule_id,
                row.cron,
                row.time_zone or "UTC",
                row.wire_name,
                row.queue,
                when(row.next_due),
                row.error or "-",
            )
            for row in rows
        ),
    )
    return EXIT_DONE


def _trigger(options: dict[str, Any], out: Output) -> int:
    schedule_id = options["schedule_id"]
    who = actor()
    result = operator.trigger_schedule(schedule_id, actor=who)
    if result is TriggerScheduleResult.SCHEDULE_NOT_FOUND:
        out.error(f"No schedule {schedule_id!r} (see `backwave schedules` for the ids).")
        return EXIT_REFUSED
    out.line(f"Triggered schedule {schedule_id!r}: one instance minted, due now (audited as {who}).")
    return EXIT_DONE


def add_arguments(subparsers: Any) -> None:
    queues = subparsers.add_parser(
        "queues",
        help="List queues (counts by state, paused, limit), or pause, resume or limit one.",
        description="Without an action: every queue with its job counts by state, paused flag and "
        "concurrency limit. Actions are audited as cli:{user}.",
    )
    queues.add_argument("--json", action="store_true", help="Print a JSON list of queues.")
    queues.set_defaults(run=queues_command)
    actions = queues.add_subparsers(dest="queue_command", metavar="{pause,resume,limit,remove}")
    create_help = (
        "Act even though no declared job, schedule or stored job uses QUEUE (without it, such a "
        "queue is refused with exit status 2: a typo creates nothing)."
    )
    for name, text in (
        ("pause", "Stop workers claiming from QUEUE."),
        ("resume", "Let workers claim from QUEUE again."),
    ):
        parser = actions.add_parser(name, help=text, description=text)
        parser.add_argument("queue", metavar="QUEUE")
        parser.add_argument("--create", action="store_true", help=create_help)
    limit = actions.add_parser(
        "limit",
        help="Cap QUEUE at N Leased jobs across all workers (0 blocks it), or none to clear.",
        description="Cap QUEUE at N Leased jobs across all workers (0 blocks it), or none to clear the cap.",
    )
    limit.add_argument("queue", metavar="QUEUE")
    limit.add_argument("limit", metavar="N|none")
    limit.add_argument("--create", action="store_true", help=create_help)
    remove = actions.add_parser(
        "remove",
        help="Remove the stored settings (pause flag, limit) of QUEUE, which must hold no jobs.",
        description="Remove the stored settings (pause flag and concurrency limit) of QUEUE. Refused "
        "(exit status 1) while the queue holds jobs in any state. Audited as remove_queue.",
    )
    remove.add_argument("queue", metavar="QUEUE")

    schedules = subparsers.add_parser(
        "schedules",
        help="List recurring schedules (next due, error), or trigger one now.",
        description="Without an action: every schedule with its next due tick and error.",
    )
    schedules.add_argument("--json", action="store_true", help="Print a JSON list of schedules.")
    schedules.set_defaults(run=schedules_command)
    schedule_actions = schedules.add_subparsers(dest="schedule_command", metavar="{trigger}")
    trigger = schedule_actions.add_parser(
        "trigger",
        help="Mint one instance of a schedule now (audited as cli:{user}).",
        description="Mint one instance of schedule ID, due now; its cursor is untouched. Audited.",
    )
    trigger.add_argument("schedule_id", metavar="ID")
