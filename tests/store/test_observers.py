"""The observer store protocol: numbering the log, claims, reports, cursor, lag and dead letters.

On PostgreSQL the sequencer numbers by transaction id; elsewhere by insertion order. The two-
connection test pins the guarantee that a cursor never skips a transaction that commits later.
"""

from __future__ import annotations

import threading
import time
import uuid
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection, transaction

from backwave_django import JobState, ObserverDisposition, store
from backwave_django.core.observing import ObserverDisposition as Disposition
from backwave_django.models import JobTransition, ObserverDeadLetter, ObserverDelivery

from ..conftest import LEASE, T0, WORKER, enqueue, lease, number_log, report

# Every store call a transaction of its own: on PostgreSQL the sequencer numbers only entries of
# ended transactions, so a test inside one transaction would never see them numbered.
pytestmark = pytest.mark.django_db(transaction=True)

ALL = list(JobState)
LATER = T0 + timedelta(seconds=10)


def claim(observer="o", *, states=ALL, wire_name=None, queue=None, worker="ow", max_rows=32, now=T0):
    return store.claim_observer_deliveries(
        observer,
        states=states,
        wire_name=wire_name,
        queue=queue,
        worker_id=worker,
        max_rows=max_rows,
        lease_duration=LEASE,
        now=now,
    )


def settle(observer="o", *, outcomes, worker="ow", now=T0):
    return store.report_observer_deliveries(observer, worker_id=worker, outcomes=outcomes, now=now)


def _numbered() -> list[tuple[Any, int, int | None]]:
    return list(
        JobTransition.objects.filter(position__isnull=False)
        .order_by("position")
        .values_list("job__job_id", "ordinal", "position")
    )


# --- Numbering -------------------------------------------------------------------------------------


def _round(max_rows: int = 5_000) -> int:
    """One sequencer round that numbers something: on PostgreSQL a round waits for every older
    transaction of the server to end, and another session (another test run) may hold one."""
    deadline = time.monotonic() + 30
    while (numbered := store.sequence_log(max_rows=max_rows)) == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    return numbered


def test_the_sequencer_numbers_committed_entries_once_in_order():
    first, second = enqueue(), enqueue()
    assert _round() == 2
    assert store.sequence_log() == 0
    third = enqueue()
    assert _round() == 1
    numbered = _numbered()
    assert [(job, ordinal) for job, ordinal, _ in numbered] == [(first, 0), (second, 0), (third, 0)]
    positions = [position for _, _, position in numbered if position is not None]
    assert positions == sorted(positions)
    assert len(set(positions)) == 3


def test_entries_are_numbered_in_batches():
    for _ in range(5):
        enqueue()
    assert _round(max_rows=2) == 2
    assert _round(max_rows=2) == 2
    assert _round(max_rows=2) == 1
    assert store.sequence_log(max_rows=2) == 0


# --- Claims ----------------------------------------------------------------------------------------


def test_a_claim_delivers_matching_entries_in_log_order_and_starts_an_attempt():
    job = enqueue(queue="q", wire_name="w")
    other = enqueue(queue="elsewhere")
    lease(queue="q")
    report(job)
    number_log()
    got = claim(states=[JobState.LEASED, JobState.SUCCEEDED], queue="q")
    assert got.acquired
    assert [(d.job_id, d.state, d.attempt, d.delivery_attempt) for d in got.deliveries] == [
        (job, JobState.LEASED, 1, 1),
        (job, JobState.SUCCEEDED, 1, 1),
    ]
    first = got.deliveries[0]
    assert (first.wire_name, first.queue, first.ordinal, first.actor) == ("w", "q", 1, WORKER)
    assert other not in {d.job_id for d in got.deliveries}
    again = claim(states=[JobState.LEASED, JobState.SUCCEEDED], queue="q")
    assert [d.delivery_attempt for d in again.deliveries] == [2, 2]


def test_a_wire_name_filter_and_max_rows():
    for _ in range(3):
        enqueue(wire_name="a")
    enqueue(wire_name="b")
    number_log()
    got = claim(wire_name="a", max_rows=2)
    assert [d.wire_name for d in got.deliveries] == ["a", "a"]


def test_another_workers_live_lease_keeps_a_claimer_out_until_it_expires():
    enqueue()
    number_log()
    assert claim(worker="first").acquired
    blocked = claim(worker="second")
    assert (blocked.acquired, blocked.deliveries) == (False, ())
    assert claim(worker="first").acquired  # the holder may claim again
    assert claim(worker="second", now=T0 + LEASE).acquired  # a dead lease at its expiry instant


def test_an_empty_subscription_matches_nothing_and_takes_no_lease():
    enqueue()
    number_log()
    assert claim(states=[]) == claim(states=[])
    assert not claim(states=[]).acquired
    assert claim(worker="other").acquired


def test_a_bad_subscription_is_refused():
    with pytest.raises(ValueError, match="unknown state"):
        claim(states=[99])


# --- Reports, the cursor and dead letters -----------------------------------------------------------


def test_delivered_entries_advance_the_cursor_over_non_matching_ones():
    a, b = enqueue(), enqueue()
    number_log()
    assert store.observer_cursor("o") == -1
    got = claim(states=[JobState.SCHEDULED])
    assert settle(outcomes=[(d.position, Disposition.DELIVERED, None) for d in got.deliveries])
    assert store.observer_cursor("o") == _numbered()[-1][2]
    assert not ObserverDelivery.objects.exists()
    assert claim(states=[JobState.SCHEDULED]).deliveries == ()
    assert {a, b} == {d.job_id for d in got.deliveries}


def test_a_retry_blocks_the_line_until_it_is_due():
    first, second = enqueue(), enqueue()
    number_log()
    got = claim()
    retry_at = T0 + timedelta(minutes=1)
    settle(
        outcomes=[
            (got.deliveries[0].position, Disposition.RETRY, retry_at),
            (got.deliveries[1].position, Disposition.RETRY, None),  # not attempted: given back
        ]
    )
    assert claim(now=retry_at - timedelta(microseconds=1)).deliveries == ()
    again = claim(now=retry_at)
    assert [(d.job_id, d.delivery_attempt) for d in again.deliveries] == [(first, 2), (second, 1)]


def test_a_dead_lettered_delivery_is_recorded_and_passed():
    job = enqueue()
    number_log()
    [delivery] = claim().deliveries
    settle(outcomes=[(delivery.position, Disposition.DEAD_LETTERED, None)], now=LATER)
    [dead] = store.observer_dead_letters("o")
    assert (dead.position, dead.job_id, dead.ordinal, dead.state, dead.attempt, dead.delivery_attempts) == (
        delivery.position,
        job,
        0,
        JobState.SCHEDULED,
        0,
        1,
    )
    assert dead.dead_lettered_at == LATER
    assert store.observer_cursor("o") == delivery.position
    # Metadata only: it outlives the job.
    lease()
    store.cancel_job(job, actor="ops", now=T0)
    assert ObserverDeadLetter.objects.count() == 1


def test_deliveries_settled_behind_a_pending_one_wait_for_it_and_are_not_delivered_again():
    first, second, third = enqueue(), enqueue(), enqueue()
    number_log()
    a, b, c = claim().deliveries
    # Only the later two are reported: the cursor stays before the first, they are kept settled.
    assert settle(
        outcomes=[(b.position, Disposition.DELIVERED, None), (c.position, Disposition.DEAD_LETTERED, None)]
    )
    assert store.observer_cursor("o") == a.position - 1
    assert store.observer_dead_letters("o") == []
    again = claim(now=LATER)
    assert [(d.job_id, d.delivery_attempt) for d in again.deliveries] == [(first, 2)]
    assert settle(outcomes=[(a.position, Disposition.DELIVERED, None)], now=LATER)
    assert store.observer_cursor("o") == c.position
    [dead] = store.observer_dead_letters("o")
    assert (dead.job_id, dead.delivery_attempts, dead.dead_lettered_at) == (third, 1, LATER)
    assert {second, third} == {b.job_id, c.job_id}
    assert not ObserverDelivery.objects.exists()


def test_a_report_from_a_worker_without_the_live_lease_changes_nothing():
    enqueue()
    number_log()
    [delivery] = claim(worker="holder").deliveries
    outcome = [(delivery.position, Disposition.DELIVERED, None)]
    assert not settle(outcomes=outcome, worker="intruder")
    assert not settle(outcomes=outcome, worker="holder", now=T0 + LEASE)
    assert not store.report_observer_deliveries("unknown", worker_id="holder", outcomes=outcome, now=T0)
    assert store.observer_cursor("o") == -1


def test_lag_counts_the_matching_entries_after_the_cursor():
    enqueue(now=T0)
    enqueue(now=LATER, wire_name="x")
    number_log()
    lag = store.observer_lag("o", states=ALL)
    assert (lag.cursor, lag.pending, lag.oldest_pending_at) == (-1, 2, T0)
    lag = store.observer_lag("o", states=ALL, wire_name="x")
    assert (lag.pending, lag.oldest_pending_at) == (1, LATER)
    [first, _] = claim().deliveries
    settle(outcomes=[(first.position, Disposition.DELIVERED, None)])
    lag = store.observer_lag("o", states=ALL)
    assert (lag.cursor, lag.pending, lag.oldest_pending_at) == (first.position, 1, LATER)


def test_dispositions_must_be_observer_dispositions():
    with pytest.raises(TypeError, match="ObserverDisposition"):
        settle(outcomes=[(0, "DELIVERED", None)])
    assert ObserverDisposition.DELIVERED is Disposition.DELIVERED


# --- Never skipping a later commit (PostgreSQL, two connections) ------------------------------------


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_cursor_never_skips_a_transaction_that_commits_later():
    """An enqueue that is still open when a later one commits holds back the numbering of both:
    the observer first sees neither, then both, the earlier transaction first. A cursor that had
    passed everything numbered never misses the slow transaction's entry."""
    before = enqueue()
    number_log()
    passed = claim()
    settle(outcomes=[(d.position, Disposition.DELIVERED, None) for d in passed.deliveries])
    assert [d.job_id for d in passed.deliveries] == [before]

    written, go = threading.Event(), threading.Event()
    slow_job = uuid.uuid4()
    errors: list[BaseException] = []

    def slow() -> None:
        try:
            with transaction.atomic():
                enqueue(job_id=slow_job)
                written.set()
                go.wait(30)
        except BaseException as exc:  # pragma: no cover (reported below)
            errors.append(exc)
        finally:
            connection.close()

    thread = threading.Thread(target=slow)
    thread.start()
    assert written.wait(30)
    fast = enqueue()  # commits now, while the slow transaction is still open
    store.sequence_log()
    assert claim().deliveries == ()  # held back behind the open transaction
    go.set()
    thread.join(30)
    assert not errors, errors
    number_log()
    after = claim()
    assert [d.job_id for d in after.deliveries] == [slow_job, fast]
    assert all(d.position > passed.deliveries[-1].position for d in after.deliveries)
