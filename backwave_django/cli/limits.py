"""``backwave limits`` (each flow-control limit: declared, in force, leased, started, held), and
``limits set`` / ``limits clear`` (an operator's override; docs/flow-control.md, "Overrides").

Reads come from :mod:`backwave_django.monitor`; changes go through :mod:`backwave_django.operator`
with the actor ``cli:{os user}`` (each audited, as in the console).
"""

from __future__ import annotations

from typing import Any

from .. import clock, monitor, operator
from ..core.limits import LimitValues
from ..core.states import ClearLimitResult
from .actions import actor
from .output import Output, instant
from .values import EXIT_DONE, EXIT_REFUSED, UsageError


def _values(values: LimitValues | None) -> dict[str, Any] | None:
    if values is None:
        return None
    return {"concurrency": values.concurrency, "rate": values.rate, "period": values.period}


def _text(values: LimitValues | None) -> str:
    return "-" if values is None else values.describe()


def limit_rows(top: int) -> list[dict[str, Any]]:
    """Every limit with its bounds, use and ``top`` busiest buckets, as JSON-ready rows."""
    rows = []
    for limit in monitor.limits_overview(now=clock.now(), top=top).limits:
        rows.append(
            {
                "limit": limit.name,
                "declared": _values(limit.declared),
                "override": _values(limit.override),
                "overridden_by": limit.overridden_by,
                "overridden_at": instant(limit.overridden_at),
                "in_force": _values(limit.in_force),
                "leased": limit.leased,
                "started_in_window": limit.started,
                "due": limit.due,
                "held": limit.held,
                "buckets_in_use": limit.buckets_in_use,
                "buckets": [
                    {
                        "bucket": use.bucket,
                        "leased": use.leased,
                        "started_in_window": use.started,
                        "due": use.due,
                        "held": use.held,
                        "full": use.full,
                    }
                    for use in limit.buckets
                ],
                "_declared_text": _text(limit.declared),
                "_in_force_text": _text(limit.in_force) + (" (override)" if limit.override else ""),
            }
        )
    return rows


def list_command(options: dict[str, Any], out: Output) -> int:
    rows = limit_rows(options["buckets"])
    if options["json"]:
        out.json([{key: value for key, value in row.items() if not key.startswith("_")} for row in rows])
        return EXIT_DONE
    if not rows:
        out.line("No limits yet (none declared by a worker, overridden, or named by a job).")
        return EXIT_DONE
    out.table(
        ("LIMIT", "DECLARED", "IN FORCE", "LEASED", "STARTED", "HELD"),
        (
            (
                row["limit"],
                row["_declared_text"],
                row["_in_force_text"] if row["in_force"] else "- (not declared: jobs held)",
                row["leased"],
                row["started_in_window"],
                row["held"],
            )
            for row in rows
        ),
    )
    return EXIT_DONE


def bound(option: str, text: str | None) -> int | operator.Keep | None:
    """``--concurrency`` / ``--rate``: a whole number ≥ 1, ``none`` (no bound), or absent (keep)."""
    if text is None:
        return operator.KEEP
    if text.strip().lower() == "none":
        return None
    try:
        number = int(text.strip())
    except ValueError:
        number = 0
    if number < 1:
        raise UsageError(f"{option} must be a whole number of 1 or more, or none, got {text!r}")
    return number


def period(text: str | None) -> float | operator.Keep:
    """``--period``: a number of seconds greater than 0, or absent (keep)."""
    if text is None:
        return operator.KEEP
    try:
        seconds = float(text.strip())
    except ValueError:
        seconds = 0.0
    if not 0 < seconds < float("inf"):
        raise UsageError(f"--period must be a number of seconds greater than 0, got {text!r}")
    return seconds


def _set(options: dict[str, Any], out: Output) -> int:
    name = options["name"]
    given = [options[key] for key in ("concurrency", "rate", "period")]
    if all(value is None for value in given):
        raise UsageError("give at least one of --concurrency, --rate and --period")
    concurrency, rate = bound("--concurrency", given[0]), bound("--rate", given[1])
    seconds = period(given[2])
    who = actor()
    try:
        values = operator.set_limit(
            name, concurrency=concurrency, rate=rate, period=seconds, actor=who, create=options["create"]
        )
    except operator.UnknownLimitError as error:  # nothing uses the name (monitor.known_limit)
        raise UsageError(
            f"{error}. Nothing was changed; pass --create to override it anyway "
            "(it creates the limit, in force for its jobs at once)."
        ) from None
    except ValueError as error:  # the name rule, or no bound left
        raise UsageError(str(error)) from None
    out.line(f"Limit {name!r} is now overridden: {values.describe()} (audited as {who})")
    return EXIT_DONE


def _clear(options: dict[str, Any], out: Output) -> int:
    name = options["name"]
    who = actor()
    try:
        result = operator.clear_limit(name, actor=who)
    except ValueError as error:
        raise UsageError(str(error)) from None
    if result is ClearLimitResult.UNKNOWN_LIMIT:
        out.error(
            f"No limit {name!r}: no worker declares it and no override names it (see `backwave limits`)."
        )
        return EXIT_REFUSED
    if result is ClearLimitResult.NOT_OVERRIDDEN:
        out.error(f"Limit {name!r} has no override to clear; nothing was changed.")
        return EXIT_REFUSED
    out.line(f"Cleared the override of limit {name!r}: its declared bounds apply (audited as {who}).")
    return EXIT_DONE


def limits_command(options: dict[str, Any], out: Output) -> int:
    command = options.get("limit_command")
    if command == "set":
        return _set(options, out)
    if command == "clear":
        return _clear(options, out)
    return list_command(options, out)


def add_arguments(subparsers: Any) -> None:
    limits = subparsers.add_parser(
        "limits",
        help="List flow-control limits (declared, in force, leased, started, held), or override one.",
        description="Without an action: every limit with its declared bounds, the bounds in force, "
        "its leased slots, its starts in the current rate window and the due jobs it holds back. "
        "Actions are audited as cli:{user}.",
    )
    limits.add_argument("--json", action="store_true", help="Print a JSON list of limits.")
    limits.add_argument(
        "--buckets", type=int, default=monitor.TOP_BUCKETS, help="Busiest buckets per limit in --json."
    )
    limits.set_defaults(run=limits_command)
    actions = limits.add_subparsers(dest="limit_command", metavar="{set,clear}")
    change = actions.add_parser(
        "set",
        help="Override limit NAME cluster-wide; options not given keep the values in force.",
        description="Override limit NAME cluster-wide (the next claim obeys it). An option not given "
        "keeps the value in force; none removes that bound; at least one of concurrency and rate "
        "must remain.",
    )
    change.add_argument("name", metavar="NAME")
    change.add_argument("--concurrency", metavar="N|none", help="At most N Leased at once per bucket.")
    change.add_argument("--rate", metavar="N|none", help="At most N claims per bucket in any window.")
    change.add_argument("--period", metavar="SECONDS", help="The rate's window, in seconds (> 0).")
    change.add_argument(
        "--create",
        action="store_true",
        help="Override a limit nothing uses yet: no worker declares it and no job names it (without "
        "it, such a name is refused: exit 2).",
    )
    clear = actions.add_parser(
        "clear",
        help="Remove the override of limit NAME: its declared bounds apply again.",
        description="Remove the override of limit NAME. Refused (exit status 1) when it has none.",
    )
    clear.add_argument("name", metavar="NAME")
