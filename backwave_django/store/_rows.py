"""Locked job rows, the unit of work that writes them back, and the dependency cascade.

An operation loads the rows it touches with their locks (:class:`Row`), decides every change in
Python, and a :class:`UnitOfWork` writes them back as one ``UPDATE`` per distinct set of new
values, one bulk ``INSERT`` of transition-log entries and one of tags.

Locking. Job rows are always locked in ``sequence`` order. A job's parents must exist when it
is enqueued, so every parent has a smaller sequence than its children: that order is
topological, and enqueue (which locks parents), outcomes and cascades (which lock parents, then
children) all take locks in the same direction. The one interleaving this cannot order (a
cascade reaching, at a deeper level, a row smaller than one it already holds, while another
transaction takes the two the other way) is resolved by the database's deadlock detector; the
victim's transaction is rolled back whole and retried (``_tx.atomic_retrying``).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import reduce
from operator import or_
from typing import Any

from django.db.models import F, Q

from ..conf import BackWaveSettings
from ..core import actors
from ..core.encoding import truncate_utf8
from ..core.states import DependencyMode, HistoryPolicy, JobState
from ..core.tags import TagPair
from ..models import JobDependency, JobRecord, JobTag, JobTransition
from ._tx import notify

ROW_FIELDS = (
    "sequence",
    "job_id",
    "queue",
    "state",
    "attempt",
    "due_time",
    "lease_owner",
    "lease_expiry",
    "cancel_requested",
    "parents_remaining",
    "mode",
    "next_ordinal",
    "max_attempts",
)


@dataclass(slots=True)
class Row:
    """The mutable in-transaction view of a locked job row."""

    sequence: int
    job_id: uuid.UUID
    queue: str
    state: int
    attempt: int
    due_time: datetime
    lease_owner: str | None
    lease_expiry: datetime | None
    cancel_requested: bool
    parents_remaining: int
    mode: int
    next_ordinal: int
    max_attempts: int | None


def lock_rows(
    queryset: Any, *, skip_locked: bool = False, extra: Sequence[str] = ()
) -> list[tuple[Row, tuple[Any, ...]]]:
    """Lock and load rows; returns each as a :class:`Row` plus the values of ``extra`` fields."""
    width = len(ROW_FIELDS)
    values = queryset.select_for_update(skip_locked=skip_locked).values_list(*ROW_FIELDS, *extra)
    return [(Row(*v[:width]), tuple(v[width:])) for v in values]


def _hashable(value: Any) -> Any:
    """A grouping key that keeps ``True``, ``1`` and ``1.0`` apart (they are equal in Python)."""
    if isinstance(value, dict | list):
        return (dict, json.dumps(value, sort_keys=True))
    return (type(value), value)


class UnitOfWork:
    """Collects one operation's row changes and writes them back in a few batched statements."""

    def __init__(self, settings: BackWaveSettings, now: datetime) -> None:
        self.settings = settings
        self.now = now
        self.rows: dict[int, Row] = {}
        self.updates: dict[int, dict[str, Any]] = {}
        self.appended: dict[int, int] = {}
        self.transitions: list[JobTransition] = []
        self.tags: list[JobTag] = []
        #: Queues of rows this operation made claimable at once (Scheduled, due now), each with the
        #: earliest of their due times: their idle workers are hinted when it flushes (delivered on
        #: commit), and lower their claim floors to that time (core/claim_floors.py).
        self.hinted: dict[str, datetime] = {}

    def set(self, row: Row, **fields: Any) -> None:
        """Record new field values for ``row`` (mirrored onto the in-memory row)."""
        for name, value in fields.items():
            if hasattr(row, name):
                setattr(row, name, value)
        self.rows[row.sequence] = row
        self.updates.setdefault(row.sequence, {}).update(fields)

    def transition(
        self,
        row: Row,
        state: JobState,
        *,
        actor: str,
        failure_detail: str | None = None,
        **fields: Any,
    ) -> None:
        """Move ``row`` to ``state``, write ``fields`` with it and append one transition-log entry.
        A row made Scheduled and due now hints its queue at the flush (a worker that finished the
        job's parent, or its previous attempt, claims again on that hint, not by guesswork)."""
        self.set(row, state=state, **fields)
        if state == JobState.SCHEDULED and row.due_time <= self.now:
            self.hinted[row.queue] = min(row.due_time, self.hinted.get(row.queue, row.due_time))
        self.appended[row.sequence] = self.appended.get(row.sequence, 0) + 1
        ordinal = row.next_ordinal
        row.next_ordinal += 1
        policy = self.settings.history
        if policy is HistoryPolicy.OFF:
            return
        if failure_detail is not None:
            if policy is HistoryPolicy.TRANSITIONS_AND_FAILURE_DETAIL:
                failure_detail = truncate_utf8(failure_detail, self.settings.max_failure_detail_bytes)
            else:
                failure_detail = None
        self.transitions.append(
            JobTransition(
                job_id=row.sequence,
                ordinal=ordinal,
                recorded_at=self.now,
                state=state,
                attempt=row.attempt,
                failure_detail=failure_detail,
                actor=actor,
            )
        )

    def add_tags(self, sequence: int, pairs: Iterable[TagPair]) -> None:
        self.tags.extend(JobTag(job_id=sequence, key=k, value=v) for k, v in pairs)

    def flush(self, using: str) -> None:
        groups: dict[tuple[Any, ...], tuple[dict[str, Any], list[int]]] = {}
        for sequence, fields in self.updates.items():
            bump = self.appended.get(sequence, 0)
            key = (tuple(sorted((k, _hashable(v)) for k, v in fields.items())), bump)
            groups.setdefault(key, (fields, []))[1].append(sequence)
        for (_, bump), (fields, sequences) in groups.items():
            values = dict(fields)
            if bump:
                values["next_ordinal"] = F("next_ordinal") + bump
            JobRecord.objects.using(using).filter(sequence__in=sequences).update(**values)
        if self.transitions:
            JobTransition.objects.using(using).bulk_create(self.transitions)
            trim_transitions(using, self.transitions, self.settings.max_transitions_per_job)
        if self.tags:
            JobTag.objects.using(using).bulk_create(self.tags, ignore_conflicts=True)
        for queue, due in sorted(self.hinted.items()):
            notify(using, queue, due=due)
        self.hinted.clear()
        self.updates.clear()
        self.appended.clear()
        self.transitions = []
        self.tags = []


def trim_transitions(using: str, appended: list[JobTransition], cap: int) -> None:
    """Drop the oldest entries of jobs whose log grew past ``cap``; ordinals keep climbing."""
    newest: dict[int, int] = {}
    for entry in appended:
        newest[entry.job_id] = max(newest.get(entry.job_id, -1), entry.ordinal)
    over = [Q(job_id=job, ordinal__lte=last - cap) for job, last in newest.items() if last >= cap]
    if over:
        JobTransition.objects.using(using).filter(reduce(or_, over)).delete()


def cascade(uow: UnitOfWork, using: str, resolved: list[tuple[Row, JobState]]) -> None:
    """Resolve the dependency latches of every child of the jobs that just became terminal.

    Runs level by level (so a cancelled child's own children are resolved next), deleting each
    parent's edges and locking the waiting children in ``sequence`` order.
    """
    now = uow.now
    frontier = resolved
    while frontier:
        parents = {row.sequence: (row, state) for row, state in frontier}
        edges = list(
            JobDependency.objects.using(using)
            .filter(parent_id__in=parents)
            .values_list("parent_id", "child_id")
        )
        if not edges:
            return
        JobDependency.objects.using(using).filter(parent_id__in=parents).delete()
        # A child already changed earlier in this operation is taken from memory: its row in
        # the database does not show that change until the flush.
        children = {
            row.sequence: uow.rows.get(row.sequence, row)
            for row, _ in lock_rows(
                JobRecord.objects.using(using)
                .filter(sequence__in={child for _, child in edges}, state=JobState.AWAITING_PARENT)
                .order_by("sequence")
            )
        }
        parent_order = {sequence: index for index, sequence in enumerate(parents)}
        edges.sort(key=lambda e: (parent_order[e[0]], e[1]))
        frontier = []
        for parent_sequence, child_sequence in edges:
            child = children.get(child_sequence)
            if child is None or child.state != JobState.AWAITING_PARENT:
                continue  # purged, or already resolved through another parent
            parent_row, parent_state = parents[parent_sequence]
            actor = actors.cascade(parent_row.job_id)
            if child.mode == DependencyMode.ON_SUCCESS and parent_state != JobState.SUCCEEDED:
                uow.transition(
                    child,
                    JobState.CANCELLED,
                    actor=actor,
                    parents_remaining=0,
                    terminal_at=now,
                    terminal_cause=actors.parent_failure(parent_state),
                )
                frontier.append((child, JobState.CANCELLED))
            elif child.parents_remaining > 1:
                uow.set(child, parents_remaining=child.parents_remaining - 1)
            else:
                uow.transition(
                    child,
                    JobState.SCHEDULED,
                    actor=actor,
                    parents_remaining=0,
                    due_time=max(child.due_time, now),
                )
