"""``backwave jobs`` (a filtered page of jobs) and ``backwave show JOB_ID`` (one job in full).

Both read through :mod:`backwave_django.monitor` only. The payload, the output and failure detail
are sensitive (docs/admin.md): ``show`` prints them only with ``--sensitive``, and never while
``BACKWAVE_DISABLE_SENSITIVE_DATA`` is set.
"""

from __future__ import annotations

import json
from typing import Any

from .. import monitor
from ..conf import DISABLE_SENSITIVE_ENV, env_flag
from ..monitor import HistoryEntry, JobQuery, JobSnapshot
from . import values
from .output import Output, instant, when
from .values import EXIT_DONE, EXIT_REFUSED, state_name, tag_text


def job_json(job: JobSnapshot) -> dict[str, Any]:
    """A job as every ``--json`` of the CLI writes it (docs/cli.md, "JSON")."""
    return {
        "job_id": str(job.job_id),
        "sequence": job.sequence,
        "wire_name": job.wire_name,
        "queue": job.queue,
        "state": state_name(job.state),
        "attempt": job.attempt,
        "max_attempts": job.max_attempts,
        "priority": job.priority,
        "due_time": instant(job.due_time),
        "enqueued_at": instant(job.enqueued_at),
        "terminal_at": instant(job.terminal_at),
        "terminal_cause": job.terminal_cause,
        "lease_owner": job.lease_owner,
        "lease_expiry": instant(job.lease_expiry),
        "cancel_requested": job.cancel_requested,
        "schedule_id": job.schedule_id,
        "workflow_id": None if job.workflow_id is None else str(job.workflow_id),
        "unique_key": job.unique_key,
        "trace_context": job.trace_context,
        "progress": job.progress,
        "tags": [[key, value] for key, value in job.tags],
    }


def _tags(job: JobSnapshot) -> str:
    return ", ".join(tag_text(key, value) for key, value in job.tags) or "-"


def _state(job: JobSnapshot) -> str:
    if job.cancel_requested and not job.is_terminal:
        return f"{job.state.label} (cancel requested)"
    return job.state.label


def list_command(options: dict[str, Any], out: Output) -> int:
    predicates = [values.tag_predicate(text) for text in options["tag"] or ()]
    predicates += [values.label(text) for text in options["label"] or ()]
    sensitive = _sensitive_allowed(options, out)
    if sensitive is None:
        return EXIT_REFUSED
    query = JobQuery(
        queue=values.name("--queue", options["queue"]),
        state=None if options["state"] is None else values.job_state(options["state"]),
        wire_name=values.name("--wire-name", options["wire_name"]),
        tags=tuple(predicates),
        after_sequence=None if options["after"] is None else values.cursor(options["after"]),
        newest_first=options["newest_first"],
        max_results=values.page_size(options["limit"]),
        search=values.search_term(options["search"]),
        search_failure_detail=sensitive,
    )
    page = monitor.list_jobs(query)
    if query.search is not None:
        for note in monitor.search_notes(query.search, failure_detail=sensitive):
            out.error(note)
    if options["json"]:
        out.json([job_json(job) for job in page])
        return EXIT_DONE
    if not page:
        out.line("No jobs match." if query.after_sequence is None else "No more jobs.")
        return EXIT_DONE
    out.table(
        ("SEQUENCE", "JOB ID", "WIRE NAME", "QUEUE", "STATE", "ATTEMPT", "DUE / ENDED", "TAGS"),
        (
            (
                job.sequence,
                job.job_id,
                job.wire_name,
                job.queue,
                _state(job),
                job.attempt,
                when(job.terminal_at if job.is_terminal else job.due_time),
                _tags(job),
            )
            for job in page
        ),
    )
    if len(page) == query.max_results:
        out.line()
        out.line(f"{len(page)} jobs shown; the next page: the same command with --after {page[-1].sequence}")
    return EXIT_DONE


# --- show --------------------------------------------------------------------------------------


def _progress(progress: Any) -> str:
    if not isinstance(progress, dict):
        return "-"
    done, total, note = progress.get("done"), progress.get("total"), progress.get("note")
    text = f"{done}/{total}" if total is not None else f"{done}"
    if note:
        text += f" {note}"
    return f"{text} (at {progress.get('at', '?')})"


def _history_json(entry: HistoryEntry, sensitive: bool) -> dict[str, Any]:
    found: dict[str, Any] = {
        "ordinal": entry.ordinal,
        "state": state_name(entry.state),
        "attempt": entry.attempt,
        "actor": entry.actor,
        "recorded_at": instant(entry.recorded_at),
    }
    if sensitive:
        found["failure_detail"] = entry.failure_detail
    return found


def _sensitive_allowed(options: dict[str, Any], out: Output) -> bool | None:
    """Whether ``--sensitive`` was asked for; None (refused, said on stderr) while the host forbids it."""
    sensitive = bool(options["sensitive"])
    if sensitive and env_flag(DISABLE_SENSITIVE_ENV):
        out.error(
            f"--sensitive refused: {DISABLE_SENSITIVE_ENV} is set, so payloads, outputs and "
            "failure detail are not shown on this host"
        )
        return None
    return sensitive


def _resolved_job_id(reference: str) -> Any:
    """The job ``show`` names: a full id, a short id as the console shows it (with or without
    the ellipsis) or a sequence number; an ambiguous short id is a usage error naming the candidates."""
    resolved = monitor.resolve_job(reference)
    if resolved is None:
        raise values.UsageError(
            f"{reference!r} is not a job: expected a job id (a UUID), a short id as the console shows it "
            "(…b2c92a1a or b2c92a1a) or a sequence number"
        )
    if resolved.candidates:
        shown = "; ".join(
            f"{job_id} (sequence {sequence}, {wire})" for job_id, sequence, wire in resolved.candidates
        )
        more = " and more" if len(resolved.candidates) > monitor.search.CANDIDATES else ""
        raise values.UsageError(f"{reference!r} names several jobs: {shown}{more}; give the full id")
    return resolved.job_id


def show_command(options: dict[str, Any], out: Output) -> int:
    sensitive = _sensitive_allowed(options, out)
    if sensitive is None:
        return EXIT_REFUSED
    job_id = _resolved_job_id(options["job_id"])
    job = None if job_id is None else monitor.get_job(job_id)
    if job_id is None or job is None:
        out.error(f"No job {options['job_id']} (never enqueued, not committed yet, or purged).")
        return EXIT_REFUSED
    history = monitor.job_history(job_id)
    parents, children = monitor.dependency_edges(job_id)
    content = monitor.job_content(job_id) if sensitive else None
    if options["json"]:
        found = job_json(job)
        found["parents"] = [str(parent) for parent in parents]
        found["children"] = [str(child) for child in children]
        found["history"] = [_history_json(entry, sensitive) for entry in history]
        if content is not None:
            found["payload"], found["output"] = content.payload, content.output
        out.json([found])
        return EXIT_DONE
    _show_text(job, history, parents, children, content, out)
    return EXIT_DONE


def _show_text(
    job: JobSnapshot,
    history: list[HistoryEntry],
    parents: list[Any],
    children: list[Any],
    content: monitor.JobContent | None,
    out: Output,
) -> None:
    attempts = f" of {job.max_attempts}" if job.max_attempts is not None else ""
    fields: list[tuple[str, object]] = [
        ("job id", job.job_id),
        ("wire name", job.wire_name),
        ("queue", job.queue),
        ("state", _state(job)),
        ("attempt", f"{job.attempt}{attempts}"),
        ("priority", job.priority),
        ("sequence", job.sequence),
        ("enqueued at", when(job.enqueued_at)),
        ("due", when(job.due_time)),
    ]
    if job.lease_owner:
        fields.append(("lease", f"{job.lease_owner} until {when(job.lease_expiry)}"))
    if job.is_terminal:
        fields += [("ended at", when(job.terminal_at)), ("terminal cause", job.terminal_cause or "-")]
    optional = (
        ("schedule", job.schedule_id),
        ("workflow", job.workflow_id),
        ("unique key", job.unique_key),
        ("trace context", job.trace_context),
    )
    fields += [(name, value) for name, value in optional if value is not None]
    fields += [
        ("progress", _progress(job.progress)),
        ("tags", _tags(job)),
        ("parents", ", ".join(map(str, parents)) or "-"),
        ("children", ", ".join(map(str, children)) or "-"),
    ]
    width = max(len(name) for name, _ in fields)
    for name, value in fields:
        out.line(f"{name.ljust(width)}  {value}")
    out.line()
    if history:
        out.line("History")
        out.table(
            ("#", "STATE", "ATTEMPT", "ACTOR", "RECORDED AT"),
            ((e.ordinal, e.state.label, e.attempt, e.actor, when(e.recorded_at)) for e in history),
            indent="  ",
        )
    else:
        out.line("History: none recorded (HISTORY is OFF, or the log was trimmed).")
    failures = [entry for entry in history if entry.failure_detail]
    if content is None:
        if failures:
            out.line()
            out.line(
                f"{len(failures)} failure detail(s), the payload and the output: shown with --sensitive."
            )
        return
    for entry in failures:
        out.line()
        out.line(f"Failure detail (#{entry.ordinal}, attempt {entry.attempt})")
        for text in (entry.failure_detail or "").splitlines():
            out.line(f"  {text}")
    out.line()
    out.line("Payload")
    out.line(_indented_json(content.payload))
    out.line("Output")
    out.line(_indented_json(content.output))


def _indented_json(value: Any) -> str:
    return "\n".join(f"  {line}" for line in json.dumps(value, indent=2, ensure_ascii=False).splitlines())


def add_arguments(subparsers: Any) -> None:
    jobs = subparsers.add_parser(
        "jobs",
        help="List jobs, filtered, one page at a time.",
        description="List jobs oldest first (or --newest-first), one page of --limit at a time.",
    )
    jobs.add_argument("--queue", help="Only this queue.")
    jobs.add_argument(
        "--state",
        help="Only this state: scheduled, awaiting_parent, leased, succeeded, "
        "cancelled, dead_lettered or quarantined (any case, - or _).",
    )
    jobs.add_argument("--wire-name", help="Only jobs of this wire name.")
    jobs.add_argument(
        "--tag",
        action="append",
        metavar="TAG",
        help="Only jobs with this tag: a label (vip), key: (any value under key) or key=value. "
        "Repeatable (ANDed).",
    )
    jobs.add_argument(
        "--label",
        action="append",
        metavar="LABEL",
        help="Only jobs with this label, taken literally (for labels containing = or ending in :). "
        "Repeatable.",
    )
    jobs.add_argument(
        "--limit", default="50", help=f"Jobs per page, at most {monitor.MAX_PAGE} (default 50)."
    )
    jobs.add_argument("--after", metavar="SEQUENCE", help="The next page: jobs after this sequence number.")
    jobs.add_argument(
        "--newest-first", action="store_true", help="Newest first (--after then pages backwards)."
    )
    jobs.add_argument(
        "--search",
        metavar="TEXT",
        help="Only jobs the console's search box finds with TEXT: a job id, short id (…b2c92a1a), "
        "sequence number, key=value (an argument), or part of an error, a wire name or a tag.",
    )
    jobs.add_argument(
        "--sensitive",
        action="store_true",
        help=f"--search also searches failure detail (refused while {DISABLE_SENSITIVE_ENV} is set).",
    )
    jobs.add_argument("--json", action="store_true", help="Print a JSON list of jobs.")
    jobs.set_defaults(run=list_command)

    show = subparsers.add_parser(
        "show",
        help="Show one job: its record, tags, dependencies, progress and transition history.",
        description="Show one job, named as the console shows it. Payload, output and failure detail "
        "only with --sensitive.",
    )
    show.add_argument(
        "job_id",
        metavar="JOB",
        help="A job id, a short id as the console shows it (…b2c92a1a or b2c92a1a), or a sequence number.",
    )
    show.add_argument(
        "--sensitive",
        action="store_true",
        help="Also show the payload, the output and failure detail (refused while "
        f"{DISABLE_SENSITIVE_ENV} is set).",
    )
    show.add_argument("--json", action="store_true", help="Print a JSON list holding the job.")
    show.set_defaults(run=show_command)
