"""The PostgreSQL bulk enqueue: a batch without parents is one statement, and it stores exactly
what the portable ORM path stores (job rows, first transitions, tags, results)."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from backwave_django import DependencyMode, EnqueueResult, store
from backwave_django.core.outcomes import NewJob
from backwave_django.models import JobRecord, JobTag, JobTransition

from ..conftest import T0, force_portable

pytestmark = [pytest.mark.postgres, pytest.mark.django_db]

#: Columns compared between the two paths (ids and sequences differ by construction).
COLUMNS = (
    "wire_name",
    "queue",
    "payload",
    "state",
    "attempt",
    "due_time",
    "mode",
    "cancel_requested",
    "parents_remaining",
    "enqueued_at",
    "next_ordinal",
    "max_attempts",
    "backoff",
    "timeout",
    "priority",
    "terminal_at",
    "terminal_cause",
    "unique_key",
    "trace_context",
)


def _batch(ids: list[uuid.UUID]) -> list[NewJob]:
    """Jobs that exercise every column the statement writes, and a repeated id."""
    return [
        NewJob(job_id=ids[0], wire_name="send-invoice", payload={"args": [1], "kwargs": {}}, due_time=T0),
        NewJob(
            job_id=ids[1],
            wire_name="résumé \"quoted\" \\ name",
            payload={"args": ["ünïcode ✓", None, 1.5, {"nested": [True, False]}], "kwargs": {"k": "\"}{"}},
            queue="billing",
            due_time=T0 + timedelta(hours=1, microseconds=7),
            tags=("urgent", ("tenant", "acme"), ("tenant", "acme")),
            max_attempts=3,
            backoff=(1, 2.5),
            timeout=0.25,
            priority=-100,
            trace_context="00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
        ),
        NewJob(job_id=ids[0], wire_name="send-invoice", payload={"args": [2], "kwargs": {}}, due_time=T0),
        NewJob(job_id=ids[2], wire_name="x" * 200, payload={}, due_time=T0),  # WIRE_NAME_TOO_LONG
        NewJob(job_id=ids[3], wire_name="plain", payload=[], due_time=T0 - timedelta(days=1), priority=100),
    ]


def _stored(ids: list[uuid.UUID]) -> list[tuple[Any, ...] | None]:
    stored: list[tuple[Any, ...] | None] = []
    for job_id in ids:
        record = JobRecord.objects.filter(job_id=job_id).values(*COLUMNS, "sequence").first()
        if record is None:
            stored.append(None)
            continue
        sequence = record.pop("sequence")
        transitions = list(
            JobTransition.objects.filter(job_id=sequence)
            .order_by("ordinal")
            .values_list("ordinal", "recorded_at", "state", "attempt", "failure_detail", "actor")
        )
        tags = sorted(JobTag.objects.filter(job_id=sequence).values_list("key", "value"))
        stored.append((record, transitions, tags))
    return stored


def test_the_statement_path_stores_what_the_orm_path_stores(monkeypatch: pytest.MonkeyPatch) -> None:
    fast_ids = [uuid.uuid4() for _ in range(4)]
    fast = store.enqueue_many(_batch(fast_ids), now=T0)
    force_portable(monkeypatch)
    orm_ids = [uuid.uuid4() for _ in range(4)]
    portable = store.enqueue_many(_batch(orm_ids), now=T0)
    assert fast == portable == [
        EnqueueResult.OK,
        EnqueueResult.OK,
        EnqueueResult.DUPLICATE,
        EnqueueResult.WIRE_NAME_TOO_LONG,
        EnqueueResult.OK,
    ]
    assert _stored(fast_ids) == _stored(orm_ids)
    assert _stored(fast_ids)[2] is None


@pytest.mark.fast_path
def test_a_batch_without_parents_is_one_statement() -> None:
    jobs = [
        NewJob(job_id=uuid.uuid4(), wire_name="w", payload={"n": n}, due_time=T0, tags=("t",))
        for n in range(500)
    ]
    with CaptureQueriesContext(connection) as queries:
        results = store.enqueue_many(jobs, now=T0)
    assert results == [EnqueueResult.OK] * 500
    assert len(queries.captured_queries) == 1
    assert JobRecord.objects.count() == 500
    assert JobTransition.objects.count() == 500
    assert JobTag.objects.count() == 500


@pytest.mark.fast_path
@pytest.mark.parametrize("size", [1, 3])
def test_jobs_without_tags_go_without_the_tags_insert_and_jobs_with_them_keep_it(size: int) -> None:
    def batch(tagged: bool) -> list[NewJob]:
        return [
            NewJob(
                job_id=uuid.uuid4(),
                wire_name="w",
                payload={"n": n},
                due_time=T0,
                tags=("t", ("k", str(n))) if tagged and n == size - 1 else (),
            )
            for n in range(size)
        ]

    untagged, tagged = batch(tagged=False), batch(tagged=True)
    with CaptureQueriesContext(connection) as queries:
        assert store.enqueue_many(untagged, now=T0) == [EnqueueResult.OK] * size
        assert store.enqueue_many(tagged, now=T0) == [EnqueueResult.OK] * size
        # Sent again: duplicates, through the statement's form with ON CONFLICT.
        assert store.enqueue_many(untagged, now=T0) == [EnqueueResult.DUPLICATE] * size
    inserts_tags = ["INSERT INTO backwave_django_jobtag" in q["sql"] for q in queries.captured_queries]
    assert inserts_tags == [False, True, False]
    assert JobRecord.objects.count() == JobTransition.objects.count() == 2 * size
    assert sorted(JobTag.objects.values_list("job__job_id", "key", "value")) == sorted(
        [(tagged[-1].job_id, "", "t"), (tagged[-1].job_id, "k", str(size - 1))]
    )


def _one_column_apart(ids: list[uuid.UUID]) -> list[NewJob]:
    """Jobs that share every column but one with the first (the statement sends each distinct set
    of the shared columns once and points the jobs at it), and one that shares them all."""
    base: dict[str, Any] = {"wire_name": "w", "payload": {"n": 1}, "queue": "q", "due_time": T0}
    changes: list[dict[str, Any]] = [
        {},
        {"wire_name": "w2"},
        {"queue": "q2"},
        {"due_time": T0 + timedelta(microseconds=1)},
        {"mode": DependencyMode.ON_ANY_TERMINAL},
        {"max_attempts": 2},
        {"backoff": (1,)},
        {"timeout": 1.5},
        {"priority": 1},
        {"trace_context": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"},
        {"payload": {"n": 2}},
        {},
    ]
    return [NewJob(job_id=job_id, **{**base, **change}) for job_id, change in zip(ids, changes, strict=True)]


def test_jobs_sharing_all_columns_but_one_each_keep_their_own(monkeypatch: pytest.MonkeyPatch) -> None:
    fast_ids = [uuid.uuid4() for _ in range(12)]
    assert store.enqueue_many(_one_column_apart(fast_ids), now=T0) == [EnqueueResult.OK] * 12
    stored = _stored(fast_ids)
    first = stored[0]
    assert first is not None
    for row, differs in zip(stored[1:-1], COLUMNS_APART, strict=True):
        assert row is not None
        assert {c for c in COLUMNS if row[0][c] != first[0][c]} == {differs}
    assert stored[-1] == first
    force_portable(monkeypatch)
    orm_ids = [uuid.uuid4() for _ in range(12)]
    store.enqueue_many(_one_column_apart(orm_ids), now=T0)
    assert _stored(orm_ids) == stored


#: The column each job of :func:`_one_column_apart` after the first changes.
COLUMNS_APART = (
    "wire_name",
    "queue",
    "due_time",
    "mode",
    "max_attempts",
    "backoff",
    "timeout",
    "priority",
    "trace_context",
    "payload",
)
