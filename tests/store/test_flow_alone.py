"""The flow claim as a transaction of its own on PostgreSQL (store/postgres/flow_claim.py): the
worker's case. Its first claim of a queue under flow control finds it through the pipelined claim;
later claims start with the flow claim, one pipeline whose Sync ends its transaction: the queue's
lock, the buckets' locks and use and the plain jobs (with the lanes the last claim admitted, read
ahead) in one round trip, their results flushed back, then the lease and the Sync in a second. These tests run outside any transaction (``transaction=True``),
so the store takes that path; ``test_flow_claim.py`` covers the same rules inside a caller's
transaction (the exact path).
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest
from django.db import connection

from backwave_django import JobState, store
from backwave_django.core.limits import LimitValues
from backwave_django.models import LimitLease, LimitStart
from backwave_django.store.postgres import flow_claim

from ..conftest import LEASE, T0, WORKER, report, row
from .flow_jobs import declare, enqueue_flow

pytestmark = [pytest.mark.postgres, pytest.mark.fast_path, pytest.mark.django_db(transaction=True)]


@pytest.fixture(autouse=True)
def paths_forgotten() -> Iterator[None]:
    """Each test starts, and leaves, with no queue remembered as under flow control."""
    flow_claim.forget_paths()
    yield
    flow_claim.forget_paths()


def _claim(queues: list[str], max_jobs: int = 32, now: Any = T0) -> list[uuid.UUID]:
    claimed = store.claim(worker_id=WORKER, queues=queues, max_jobs=max_jobs, lease_duration=LEASE, now=now)
    return [c.job_id for c in claimed]


def _statements(call: Callable[[], Any]) -> tuple[Any, list[str]]:
    """What ``call`` returned, and the first words of each statement it sent."""
    seen: list[str] = []

    def capture(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        seen.append(" ".join(sql.split())[:60])
        return execute(sql, params, many, context)

    with connection.execute_wrapper(capture):
        result = call()
    return result, seen


@contextlib.contextmanager
def _syncs() -> Iterator[list[int]]:
    """How many pipelines the connection opened in the block (each ends with one Sync)."""
    raw = type(connection.connection)
    opened = [0]
    original = raw.pipeline

    def counted(self: Any, *args: Any, **kwargs: Any) -> Any:
        opened[0] += 1
        return original(self, *args, **kwargs)

    raw.pipeline = counted
    try:
        yield opened
    finally:
        raw.pipeline = original


def _idle() -> bool:
    return bool(connection.connection.pgconn.transaction_status == psycopg.pq.TransactionStatus.IDLE)


def _count(statements: list[str], start: str) -> int:
    return sum(s.startswith(start) for s in statements)


def test_after_the_first_claim_a_flow_queue_is_claimed_in_two_round_trips() -> None:
    declare(api=LimitValues(100, None, 1.0))
    jobs = [enqueue_flow(queue="f", keys=(("api", "a"),)) for _ in range(4)]
    first, statements = _statements(lambda: _claim(["f"], max_jobs=2))
    assert first == jobs[:2]
    assert _count(statements, "WITH RECURSIVE gate") == 1  # the pipelined claim found the queue
    assert _count(statements, "WITH lanes AS MATERIALIZED") == 2  # ... and the flow claim served it
    with _syncs() as syncs:
        second, statements = _statements(lambda: _claim(["f"], max_jobs=2))
    assert second == jobs[2:]
    assert _count(statements, "WITH RECURSIVE gate") == 0  # straight to the flow claim
    # The admitted lane was read ahead with the plain jobs, in the use statement: no fetch of its own.
    assert _count(statements, "SELECT w.lane") == 0
    # One transaction, ended by the pipeline's one Sync: no BEGIN, no COMMIT; the settings, the
    # locks, then the use with the jobs, then the lease.
    assert len(statements) == 4
    assert statements[0].startswith("SELECT set_config(")
    assert statements[-1].startswith("WITH leased AS")
    assert syncs == [1]
    assert _idle()
    assert LimitLease.objects.count() == 4


def test_a_bucket_never_exceeds_its_concurrency_and_a_freed_slot_is_used_again() -> None:
    declare(api=LimitValues(2, None, 1.0))
    jobs = [enqueue_flow(queue="f", keys=(("api", "a"),)) for _ in range(5)]
    assert _claim(["f"]) == jobs[:2]
    assert _claim(["f"]) == []
    assert report(jobs[0], now=T0).name == "APPLIED"
    assert _claim(["f"]) == [jobs[2]]
    assert _claim(["f"]) == []
    assert [row(j).state for j in jobs] == [JobState.SUCCEEDED] + [JobState.LEASED] * 2 + [
        JobState.SCHEDULED
    ] * 2


def test_a_lane_read_ahead_and_found_held_is_not_taken_or_touched() -> None:
    declare(api=LimitValues(1, None, 1.0))
    first, *held = [enqueue_flow(queue="f", keys=(("api", "a"),)) for _ in range(3)]
    assert _claim(["f"]) == [first]  # admitted: the next claim reads the lane ahead
    plain = enqueue_flow(queue="f")
    assert _claim(["f"]) == [plain]  # the lane is full now: read ahead, left alone
    for job in held:
        assert (row(job).state, row(job).attempt) == (JobState.SCHEDULED, 0)
    assert _idle()  # its rows were only locked until the claim committed


def test_a_rate_is_counted_on_this_path_too() -> None:
    declare(api=LimitValues(None, 3, 10.0))
    jobs = [enqueue_flow(queue="f", keys=(("api", "a"),)) for _ in range(5)]
    assert _claim(["f"], max_jobs=2) == jobs[:2]
    assert _claim(["f"], max_jobs=2) == jobs[2:3]
    assert _claim(["f"]) == []
    assert LimitStart.objects.count() == 3


def test_a_paused_flow_queue_yields_nothing_and_the_next_queue_is_served() -> None:
    declare(api=LimitValues(5, None, 1.0))
    flow = enqueue_flow(queue="f", keys=(("api", "a"),))
    enqueue_flow(queue="f", keys=(("api", "a"),))
    plain = enqueue_flow(queue="p")
    assert _claim(["f"], max_jobs=1) == [flow]  # the queue is remembered as a flow queue
    store.pause_queue("f", actor="op", now=T0)
    assert _claim(["f", "p"]) == [plain]
    assert _idle()


def test_a_queue_concurrency_limit_still_bounds_a_flow_queue() -> None:
    declare(api=LimitValues(5, None, 1.0))
    jobs = [enqueue_flow(queue="f", keys=(("api", "a"),)) for _ in range(3)]
    assert _claim(["f"], max_jobs=1) == jobs[:1]
    store.set_concurrency_limit("f", 2, actor="op", now=T0)
    assert _claim(["f"]) == jobs[1:2]
    assert _claim(["f"]) == []


def test_queues_keep_their_order_around_a_flow_queue() -> None:
    declare(api=LimitValues(5, None, 1.0))
    before, flow, after = (
        enqueue_flow(queue="a"),
        enqueue_flow(queue="f", keys=(("api", "a"),)),
        enqueue_flow(queue="z"),
    )
    assert _claim(["a", "f", "z"]) == [before, flow, after]
    again = [enqueue_flow(queue=q, keys=k) for q, k in (("a", ()), ("f", (("api", "a"),)), ("z", ()))]
    assert _claim(["a", "f", "z"]) == again


def test_a_queue_whose_flow_jobs_are_gone_goes_back_to_the_pipelined_claim() -> None:
    declare(api=LimitValues(5, None, 1.0))
    flow = enqueue_flow(queue="f", keys=(("api", "a"),))
    assert _claim(["f"]) == [flow]
    plain = enqueue_flow(queue="f")
    assert _claim(["f"]) == [plain]  # the flow claim, which finds no lane above 0 left
    later = enqueue_flow(queue="f")
    claimed, statements = _statements(lambda: _claim(["f"]))
    assert claimed == [later]
    assert statements[0].startswith("SELECT set_config")
    assert _count(statements, "WITH RECURSIVE gate") == 1


def test_the_flow_claim_runs_on_generic_plans_and_leaves_the_settings_behind() -> None:
    """As the plain claim's (tests/store/test_pipelined.py): its settings come first, in a statement
    of their own, so the bucket locks, their use and the lease are all planned once, not at each
    claim."""
    declare(api=LimitValues(100, None, 1.0))
    connection.ensure_connection()
    connection.connection.prepare_threshold = 0  # prepare every statement at its first run
    try:
        for _ in range(8):
            job = enqueue_flow(queue="f", keys=(("api", "a"),))
            assert _claim(["f"], max_jobs=1) == [job]
            assert report(job, now=T0).name == "APPLIED"
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT left(statement, 30), generic_plans, custom_plans FROM pg_prepared_statements"
                " WHERE statement LIKE %s OR statement LIKE %s",
                ["%pg_advisory_xact_lock(%", "WITH leased AS%"],
            )
            plans = {text.split()[1]: (generic, custom) for text, generic, custom in cursor.fetchall()}
            cursor.execute("SHOW plan_cache_mode")
            mode = cursor.fetchone()[0]
        assert plans == {"lanes": (8, 0), "leased": (8, 0)}, plans
        assert mode == "auto"
    finally:
        connection.close()  # the next test starts without these prepared statements
