"""The job detail page's content: what it leads with, its attempts, its fields and its log.

The page answers the question an operator opens it with, in this order (``docs/admin.md``,
"Job detail"):

1. **The answer**: the state, why the job is there (its terminal cause, or what it waits for)
   and its last failure: the message, with the traceback folded under it.
2. **The attempts**: one row per time a worker ran the job (started, ended, outcome, duration,
   worker), failing ones marked, each failure's traceback folded (``monitor.job_attempts``).
3. **The fields**, several to a line, grouped; then the dependencies and the transition log.

Failure detail (message and traceback), progress notes, payload and output are sensitive: read
and shown only for a viewer who may see them (``console.can_view_sensitive``); others see that
an attempt failed and when, and that the detail is hidden. Every read goes through
:mod:`backwave_django.monitor` or is the one read of the job Django made for the page.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString

from .. import clock, monitor
from ..core.states import JobState
from ..models import JobRecord
from .console import DETAIL_ROWS, HIDDEN_TEXT, attempt_ceiling, discarded_marker, worker_url
from .display import job_state_badge, short_duration, timestamp

#: Who may open the worker page an attempt links to.
WORKER_VIEW_PERMISSION = "backwave_django.view_workernode"
#: The job page shows at most this many attempts (newest first); the log has the rest.
ATTEMPT_ROWS = 100


@dataclass(frozen=True)
class FailureText:
    """A failure's detail split for showing: the first line (``Type: message``) and the rest."""

    message: str
    traceback: str


def split_failure(detail: str) -> FailureText:
    """``{type}: {message}\\n{traceback}`` as its message line and its traceback."""
    message, _, rest = detail.strip("\n").partition("\n")
    return FailureText(message.strip(), rest.strip("\n"))


def worker_cell(worker_id: str, *, linked: bool) -> str:
    """A worker id, linked to its page for a viewer who may open it."""
    if not linked:
        return format_html('<span class="bw-mono bw-breakable">{}</span>', worker_id)
    return format_html(
        '<a class="bw-mono bw-breakable" href="{}" data-testid="bw-worker-link">{}</a>',
        worker_url(worker_id),
        worker_id,
    )


def _waiting_for(job: JobRecord) -> str:
    """Why a job that has not ended is where it is, in a sentence."""
    state = JobState(job.state)
    if state is JobState.LEASED:
        return format_html(
            "Running attempt {} of {}; its lease ends {}.",
            job.attempt,
            attempt_ceiling(job),
            timestamp(job.lease_expiry),
        )
    if state is JobState.AWAITING_PARENT:
        return format_html(
            "Waiting for {} parent{} to end.",
            job.parents_remaining,
            "" if job.parents_remaining == 1 else "s",
        )
    if job.attempt >= 1:
        return format_html(
            "Waiting for attempt {} of {}, due {}.",
            job.attempt + 1,
            attempt_ceiling(job),
            timestamp(job.due_time),
        )
    return format_html("Waiting for its first attempt, due {}.", timestamp(job.due_time))


def _sentence(text: str) -> str:
    """``text`` with a capital first: "Held by limit stripe, bucket acme (5 / 5 leased)"."""
    return text[:1].upper() + text[1:]


def summary(job: JobRecord, attempts: list[monitor.Attempt], *, sensitive: bool) -> dict[str, Any]:
    """The page's lead: the state, the cause (or what it waits for) and the last failure."""
    state = JobState(job.state)
    marker = discarded_marker(job)
    failed = [attempt for attempt in attempts if attempt.failed]
    last = failed[-1] if failed else None
    failure = None
    if last is not None:
        text = split_failure(last.failure_detail) if sensitive and last.failure_detail else None
        failure = {
            "attempt": last.number,
            "outcome": last.outcome.value,
            "when": SafeString(timestamp(last.ended_at)),
            "text": text,
            "failed_count": len(failed),
        }
    return {
        "badge": SafeString(
            format_html("{} {}", job_state_badge(job.state), marker) if marker else job_state_badge(job.state)
        ),
        "state": state,
        "ended": SafeString(timestamp(job.terminal_at, label="ended")) if job.terminal_at else None,
        "cause": job.terminal_cause if state.is_terminal else None,
        "waiting": None if state.is_terminal else SafeString(_waiting_for(job)),
        "attempt_text": f"attempt {job.attempt} of {attempt_ceiling(job)}",
        "failure": failure,
        "hidden_text": HIDDEN_TEXT,
    }


def attempt_rows(
    attempts: list[monitor.Attempt], *, sensitive: bool, link_workers: bool
) -> list[dict[str, Any]]:
    """The attempts, newest first, as the timeline's rows."""
    rows = []
    for attempt in reversed(attempts[-ATTEMPT_ROWS:]):
        duration = attempt.duration
        text = split_failure(attempt.failure_detail) if sensitive and attempt.failure_detail else None
        rows.append(
            {
                "number": attempt.number,
                "started": SafeString(timestamp(attempt.started_at)),
                "ended": SafeString(timestamp(attempt.ended_at)) if attempt.ended_at else None,
                "duration": short_duration(duration) if duration is not None else None,
                "outcome": attempt.outcome.value,
                "outcome_key": attempt.outcome.name.lower().replace("_", "-"),
                "failed": attempt.failed,
                "worker": SafeString(worker_cell(attempt.worker, linked=link_workers)),
                "failure": text,
            }
        )
    return rows


def transition_rows(entries: list[monitor.HistoryEntry]) -> list[dict[str, Any]]:
    """The transition log, newest first."""
    return [
        {
            "ordinal": entry.ordinal,
            "badge": SafeString(job_state_badge(entry.state)),
            "attempt": entry.attempt,
            "actor": entry.actor,
            "when": SafeString(timestamp(entry.recorded_at)),
            "failed": entry.failed,
            "detail": entry.failure_detail,
        }
        for entry in reversed(entries)
    ]


def linked_jobs(job_id: uuid.UUID) -> dict[str, list[dict[str, Any]]]:
    """The job's parents and children still gated (``monitor.linked_jobs``), as link rows:
    ``bw_parents`` and ``bw_children``."""
    parents, children = monitor.linked_jobs(job_id, limit=DETAIL_ROWS)
    return {"bw_parents": _link_rows(parents), "bw_children": _link_rows(children)}


def _link_rows(jobs: list[monitor.LinkedJob]) -> list[dict[str, Any]]:
    return [
        {
            "url": reverse("admin:backwave_django_jobrecord_change", args=[job.sequence]),
            "job_id": job.job_id,
            "wire_name": job.wire_name,
            "badge": SafeString(job_state_badge(job.state)),
        }
        for job in jobs
    ]


def page_context(request: HttpRequest, job: JobRecord, *, sensitive: bool) -> dict[str, Any]:
    """The lead, the attempts and the log of ``job``, from one read of its transition log."""
    entries = monitor.transition_log(job.job_id, failure_detail=sensitive)
    attempts = monitor.attempts_from_log(entries)
    link_workers = request.user.has_perm(WORKER_VIEW_PERMISSION)
    hold = monitor.held_reason(job, now=clock.now())
    return {
        "bw_summary": summary(job, attempts, sensitive=sensitive)
        | {"held": _sentence(hold.text) if hold is not None else None},
        "bw_attempts": attempt_rows(attempts, sensitive=sensitive, link_workers=link_workers),
        "bw_attempts_failed": sum(1 for attempt in attempts if attempt.failed),
        "bw_attempts_total": len(attempts),
        "bw_timeline": transition_rows(entries),
    }
