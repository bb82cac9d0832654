"""The Observers page: each transition observer's cursor, lag, lease and dead-lettered deliveries.

A row appears once a worker has claimed for the observer (``docs/observers.md``). Lag is what the
monitor reads (:func:`backwave_django.monitor.observer_lag` for the subscription the observer last
claimed with): how many numbered log entries after its cursor match and are not settled yet, and
how old the oldest of them is. Dead-lettered deliveries have their own list, filterable by
observer, linked to the job when the job still exists. Nothing here changes a row.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html, format_html_join

from .. import clock
from ..core.observing import ObserverLag
from ..core.states import JobState
from ..models import Observer, ObserverDeadLetter
from ..monitor import (
    job_sequences,
    observer_dead_letter_count,
    observer_lag,
    recent_dead_letters,
    with_job_sequence,
)
from ..observers import definitions
from .console import DETAIL_ROWS, ReadOnlyAdmin
from .display import (
    CLAIMING_TONE,
    STALE_TONE,
    STATE_TONES,
    job_link,
    job_state_badge,
    short_duration,
    short_job_id,
    timestamp,
    tone_badge,
)


def _lag(row: Observer) -> ObserverLag:
    """The row's lag, read once per row and page (the list shows it in three columns)."""
    cached: ObserverLag | None = getattr(row, "_bw_lag", None)
    if cached is None:
        cached = observer_lag(
            row.observer_id,
            states=[JobState(s) for s in row.states],
            wire_name=row.wire_name,
            queue=row.queue,
        )
        row._bw_lag = cached  # type: ignore[attr-defined]
    return cached


def _dead_letters_url(observer_id: str) -> str:
    url = reverse("admin:backwave_django_observerdeadletter_changelist")
    return f"{url}?observer_id={observer_id}"


class ObserverAdmin(ReadOnlyAdmin):
    """Every observer with a durable cursor: subscription, cursor, lag, lease, dead letters."""

    empty_text = (
        "No observers yet. An observer appears here once code registers one (docs/observers.md) "
        "and a worker starts delivering the transition log to it."
    )

    list_display = (
        "observer_id",
        "subscription",
        "declared",
        "cursor",
        "pending",
        "oldest_pending",
        "lease",
        "dead_letters",
    )
    search_fields = ("observer_id",)
    ordering = ("observer_id",)
    fields = (*list_display, "recent_dead_letters")

    @admin.display(description="subscription")
    def subscription(self, row: Observer) -> str:
        states = ", ".join(str(JobState(s).label) for s in row.states) or "nothing"
        narrowing = [f"wire name {row.wire_name}"] if row.wire_name else []
        narrowing += [f"queue {row.queue}"] if row.queue else []
        return f"{states} ({'; '.join(narrowing)})" if narrowing else states

    @admin.display(description="declared here", boolean=True)
    def declared(self, row: Observer) -> bool:
        """Whether this process knows the observer's code (a removed observer keeps its row)."""
        return row.observer_id in definitions()

    @admin.display(description="pending")
    def pending(self, row: Observer) -> int:
        return _lag(row).pending

    @admin.display(description="oldest pending")
    def oldest_pending(self, row: Observer) -> str:
        oldest = _lag(row).oldest_pending_at
        if oldest is None:
            return "—"
        return format_html(
            "{} old <small>({})</small>",
            short_duration(clock.now() - oldest),
            timestamp(oldest, relative=False),
        )

    @admin.display(description="lease")
    def lease(self, row: Observer) -> str:
        if row.lease_owner is None or row.lease_expiry is None:
            return "—"
        live = row.lease_expiry > clock.now()
        return format_html(
            "{} {} <small>until {}</small>",
            tone_badge("held" if live else "expired", CLAIMING_TONE if live else STALE_TONE),
            row.lease_owner,
            timestamp(row.lease_expiry),
        )

    @admin.display(description="dead letters")
    def dead_letters(self, row: Observer) -> str:
        count = observer_dead_letter_count(row.observer_id)
        if not count:
            return "0"
        return format_html(
            '<a href="{}" data-testid="bw-observer-dead-letters" style="color:{}">{}</a>',
            _dead_letters_url(row.observer_id),
            STATE_TONES[JobState.DEAD_LETTERED],
            count,
        )

    @admin.display(description="newest dead letters")
    def recent_dead_letters(self, row: Observer) -> str:
        letters = recent_dead_letters(row.observer_id, limit=DETAIL_ROWS)
        if not letters:
            return "None."
        links = _job_links(letter.job_id for letter in letters)
        rows = format_html_join(
            "",
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            (
                (
                    letter.position,
                    links.get(letter.job_id) or _purged(letter.job_id),
                    job_state_badge(letter.state),
                    letter.attempt,
                    letter.delivery_attempts,
                    timestamp(letter.dead_lettered_at),
                )
                for letter in letters
            ),
        )
        return format_html(
            '<table data-testid="bw-observer-dead-letter-table"><thead><tr><th>position</th><th>job</th>'
            "<th>state</th><th>job attempt</th><th>delivery attempts</th><th>dead-lettered</th></tr></thead>"
            '<tbody>{}</tbody></table><p><a href="{}">All of them →</a></p>',
            rows,
            _dead_letters_url(row.observer_id),
        )


class ObserverDeadLetterAdmin(ReadOnlyAdmin):
    """Deliveries observers gave up on, newest first, filterable by observer and state."""

    empty_text = (
        "No observer dead letters. A delivery lands here when an observer's handler keeps failing "
        "on it past its retries; the observer's cursor moves on without it."
    )

    list_display = ("observer_id", "position", "job", "state_badge", "attempt", "delivery_attempts", "when")
    # A dead letter's page shows the same cells: its time with its zone, never Django's date format.
    fields = readonly_fields = list_display
    list_filter = ("observer_id", "state")
    search_fields = ("=observer_id", "=job_id")
    ordering = ("-dead_lettered_at", "-position")

    def get_queryset(self, request: HttpRequest) -> QuerySet[ObserverDeadLetter]:
        letters: QuerySet[ObserverDeadLetter] = with_job_sequence(super().get_queryset(request))
        return letters

    @admin.display(description="job")
    def job(self, row: ObserverDeadLetter) -> str:
        pk = getattr(row, "job_pk", None)
        if pk is None:
            return _purged(row.job_id)
        return _job_link(row.job_id, pk)

    @admin.display(description="state", ordering="state")
    def state_badge(self, row: ObserverDeadLetter) -> str:
        return job_state_badge(row.state)

    @admin.display(description="dead-lettered", ordering="dead_lettered_at")
    def when(self, row: ObserverDeadLetter) -> str:
        return timestamp(row.dead_lettered_at)


def _job_links(job_ids: Iterable[uuid.UUID]) -> dict[uuid.UUID, str]:
    """A link to each job's page, for the jobs that still exist."""
    return {job_id: _job_link(job_id, pk) for job_id, pk in job_sequences(job_ids).items()}


def _job_link(job_id: uuid.UUID, pk: int) -> str:
    return job_link(reverse("admin:backwave_django_jobrecord_change", args=[pk]), job_id)


def _purged(job_id: uuid.UUID) -> str:
    return format_html('<code title="{}">{}</code> (purged)', job_id, short_job_id(job_id))
