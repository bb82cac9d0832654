"""The CLI's actions on jobs (``cancel``, ``requeue``, ``retry-now``) and ``purge``.

Every action goes through :mod:`backwave_django.operator` with the actor ``cli:{os user}``, so each
one that acts writes one ``OperatorAudit`` row, as the console's buttons do. A job id that is not
found is reported without calling the operator (there is nothing to act on, nothing is audited).
"""

from __future__ import annotations

import enum
import getpass
import uuid
from collections.abc import Callable
from typing import Any

from .. import monitor, operator
from ..core import actors
from ..core.states import CancelResult, RequeueResult, RetryNowResult, TerminalStateClass
from . import values
from .output import Output, instant, seconds, span, when
from .values import EXIT_DONE, EXIT_REFUSED, state_name


def actor() -> str:
    """Who the audit log says acted: ``cli:`` and the operating-system user running the command."""
    return actors.cli_user(getpass.getuser())


#: What each action's result means for the exit status (True: done) and how it reads.
_RESULTS: dict[enum.Enum, tuple[bool, str]] = {
    CancelResult.CANCELLED_IMMEDIATELY: (True, "cancelled"),
    CancelResult.CANCELLATION_REQUESTED: (
        True,
        "cancellation requested (running: its handler is told to stop)",
    ),
    CancelResult.NOT_CANCELLABLE: (False, "not cancellable (already ended)"),
    RequeueResult.REQUEUED: (True, "requeued (Scheduled, due now, attempt 0)"),
    RequeueResult.NOT_REQUEUEABLE: (False, "not requeueable (only Dead-Lettered or Quarantined jobs are)"),
    RetryNowResult.RETRIED_NOW: (True, "due now"),
    RetryNowResult.NOT_RETRYING: (False, "not waiting for a retry (only Scheduled jobs that ran before are)"),
}

_ACTIONS: dict[str, Callable[..., enum.Enum]] = {
    "cancel": operator.cancel,
    "requeue": operator.requeue,
    "retry-now": operator.retry_now,
}


def _result_name(result: enum.Enum | None) -> str:
    return "not_found" if result is None else result.name.lower()


def job_action_command(options: dict[str, Any], out: Output) -> int:
    """Act on each job in turn; exit 1 when any was refused or not found, else 0."""
    job_ids = values.job_ids(options["job_ids"])
    act = _ACTIONS[options["command"]]
    who = actor()
    done_all = True
    reports = []
    for job_id in job_ids:
        result = None if monitor.get_job(job_id) is None else act(job_id, actor=who)
        done, text = _RESULTS[result] if result is not None else (False, "not found")
        done_all &= done
        reports.append((job_id, result, done, text))
    if options["json"]:
        out.json([_report_json(job_id, result, done) for job_id, result, done, _ in reports])
    else:
        for job_id, result, _, text in reports:
            job = monitor.get_job(job_id) if result is not None else None
            state = f" [{job.state.label}]" if job is not None else ""
            out.line(f"{job_id}  {text}{state}")
    return EXIT_DONE if done_all else EXIT_REFUSED


def _report_json(job_id: uuid.UUID, result: enum.Enum | None, done: bool) -> dict[str, Any]:
    job = monitor.get_job(job_id) if result is not None else None
    return {
        "job_id": str(job_id),
        "wire_name": None if job is None else job.wire_name,
        "queue": None if job is None else job.queue,
        "state": None if job is None else state_name(job.state),
        "result": _result_name(result),
        "done": done,
    }


# --- purge ---------------------------------------------------------------------------------------


def purge_command(options: dict[str, Any], out: Output) -> int:
    dry_run = options["dry_run"]

    def progress(state_class: TerminalStateClass, purged: int) -> None:
        out.error(f"  {state_class.label}: {purged:,} purged so far")

    report = operator.purge(actor=actor(), dry_run=dry_run, on_batch=progress)
    if options["json"]:
        out.json(
            {
                "dry_run": report.dry_run,
                "now": instant(report.now),
                "jobs": report.jobs,
                "classes": [
                    {
                        "state_class": entry.state_class.name.lower(),
                        "retention_seconds": seconds(entry.retention),
                        "terminal_before": instant(entry.terminal_before),
                        "jobs": entry.jobs,
                    }
                    for entry in report.classes
                ],
            }
        )
        return EXIT_DONE
    verb = "would purge" if dry_run else "purged"
    for entry in report.classes:
        if entry.retention is None:
            out.line(f"{entry.state_class.label}: kept forever (RETENTION is None), nothing purged")
        else:
            out.line(
                f"{entry.state_class.label}: {verb} {entry.jobs:,} jobs that ended at or before "
                f"{when(entry.terminal_before)} (RETENTION {span(entry.retention)})"
            )
    if dry_run:
        out.line(f"Dry run: {report.jobs:,} jobs would be purged; nothing was deleted.")
    else:
        out.line(f"Purged {report.jobs:,} jobs (audited as {actor()}).")
    return EXIT_DONE


def add_arguments(subparsers: Any) -> None:
    helps = {
        "cancel": "Cancel jobs: pending ones at once (with their dependants); running ones are told to stop.",
        "requeue": "Requeue Dead-Lettered or Quarantined jobs (Scheduled, due now, attempt 0).",
        "retry-now": "Make jobs waiting for their next retry due now.",
    }
    for name, text in helps.items():
        parser = subparsers.add_parser(name, help=text, description=f"{text} Audited as cli:{{user}}.")
        parser.add_argument("job_ids", nargs="+", metavar="JOB_ID")
        parser.add_argument("--json", action="store_true", help="Print a JSON list of results.")
        parser.set_defaults(run=job_action_command)
    purge = subparsers.add_parser(
        "purge",
        help="Purge terminal jobs past RETENTION now, as the workers' maintenance does.",
        description="Purge terminal jobs past BACKWAVE['RETENTION'] now, in batches of MAX_PURGE_BATCH, "
        "until done. Audited as cli:{user}.",
    )
    purge.add_argument("--dry-run", action="store_true", help="Count what would be purged; delete nothing.")
    purge.add_argument("--json", action="store_true", help="Print the summary as a JSON object.")
    purge.set_defaults(run=purge_command)
