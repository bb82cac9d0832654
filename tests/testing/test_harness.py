"""The virtual-time harness running users' jobs: clock, pump, retries, dependencies, cancel, async."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest
from django.db import transaction
from django.utils import timezone

from backwave_django import (
    CancelResult,
    JobState,
    NewJob,
    OutcomeResult,
    Success,
    clock,
    operator,
    store,
)
from backwave_django.models import QueueSettings
from backwave_django.testing import (
    DEFAULT_START,
    WORKER_ID,
    BackWaveHarness,
    HarnessLimitExceeded,
    RunSummary,
)
from tests.jobsapp import harness_jobs as jobs
from tests.jobsapp.jobs import big_output

T0 = DEFAULT_START


def _actors(snapshot):
    return [(t.state, t.attempt, t.actor) for t in snapshot.transitions]


# --- The clock ----------------------------------------------------------------------------------


def test_enqueue_in_application_code_is_stamped_with_virtual_time(backwave):
    receipt = jobs.square.enqueue(3)
    job = backwave.job(receipt.job_id)
    assert (job.state, job.due_time, job.enqueued_at) == (JobState.SCHEDULED, T0, T0)
    backwave.advance(timedelta(hours=5))
    later = jobs.square.using(run_after=timedelta(minutes=1)).enqueue(4)
    assert backwave.job(later.job_id).due_time == T0 + timedelta(hours=5, minutes=1)


def test_the_real_clock_comes_back_when_the_harness_stops(db):
    with BackWaveHarness(start=datetime(2001, 1, 1, tzinfo=UTC)) as harness:
        assert clock.now() == harness.now
    assert clock.now is timezone.now
    assert abs(clock.now() - timezone.now()) < timedelta(seconds=5)


def test_operator_actions_run_on_virtual_time(backwave):
    backwave.advance(timedelta(minutes=3))
    delayed = jobs.square.using(run_after=timedelta(hours=1)).enqueue(2).job_id
    assert operator.cancel(delayed, actor="alice") is CancelResult.CANCELLED_IMMEDIATELY
    assert backwave.job(delayed).terminal_at == T0 + timedelta(minutes=3)


def test_only_one_harness_can_own_the_clock(backwave):
    with pytest.raises(RuntimeError, match="Another BackWaveHarness is active"):
        BackWaveHarness().start()
    assert clock.now() == backwave.now


def test_time_only_moves_forward(backwave):
    with pytest.raises(ValueError, match="only moves forward"):
        backwave.advance(timedelta(seconds=-1))
    with pytest.raises(ValueError, match="only moves forward"):
        backwave.advance_to(T0 - timedelta(days=1))
    with pytest.raises(ValueError, match="aware"):
        backwave.advance_to(datetime(2026, 2, 1))
    with pytest.raises(TypeError, match="timedelta"):
        backwave.advance(60)


def test_a_naive_start_is_refused():
    with pytest.raises(ValueError, match="aware"):
        BackWaveHarness(start=datetime(2026, 1, 1))


# --- Running jobs -------------------------------------------------------------------------------


def test_run_until_idle_runs_due_jobs_and_stores_their_outputs(backwave):
    first = jobs.square.enqueue(3).job_id
    second = jobs.square.enqueue(4).job_id
    summary = backwave.run_until_idle()
    assert summary == RunSummary(succeeded=2)
    assert [backwave.job(j).output for j in (first, second)] == [9, 16]
    assert _actors(backwave.job(first)) == [
        (JobState.SCHEDULED, 0, "enqueue"),
        (JobState.LEASED, 1, WORKER_ID),
        (JobState.SUCCEEDED, 1, WORKER_ID),
    ]
    assert backwave.now == T0  # running never moves time


def test_a_delayed_job_waits_for_the_clock(backwave):
    job_id = jobs.square.using(run_after=timedelta(hours=1)).enqueue(5).job_id
    assert backwave.run_until_idle().ran == 0
    assert backwave.advance(timedelta(minutes=59)).ran == 0
    assert backwave.job(job_id).state is JobState.SCHEDULED
    assert backwave.advance(timedelta(minutes=1)) == RunSummary(succeeded=1)
    assert backwave.job(job_id).transitions[-1].recorded_at == T0 + timedelta(hours=1)


def test_advance_stops_at_each_due_instant_on_the_way(backwave):
    ids = [jobs.square.using(run_after=timedelta(hours=h)).enqueue(h).job_id for h in (1, 2, 3)]
    summary = backwave.advance(timedelta(days=1))
    assert summary.succeeded == 3
    assert [backwave.job(j).terminal_at for j in ids] == [T0 + timedelta(hours=h) for h in (1, 2, 3)]
    assert backwave.now == T0 + timedelta(days=1)


def test_run_next_runs_one_job_in_due_order(backwave):
    later = jobs.square.using(run_after=timedelta(seconds=0)).enqueue(2).job_id
    earlier = jobs.square.using(run_after=T0 - timedelta(minutes=1)).enqueue(1).job_id
    first = backwave.run_next()
    assert first is not None
    assert (first.job_id, first.state, first.output) == (earlier, JobState.SUCCEEDED, 1)
    assert backwave.job(later).state is JobState.SCHEDULED
    assert backwave.run_next().job_id == later
    assert backwave.run_next() is None


def test_jobs_enqueued_by_a_running_job_run_at_their_own_time(backwave):
    jobs.remind.enqueue("ada")
    assert backwave.run_until_idle() == RunSummary(succeeded=1)
    [follow_up] = backwave.jobs(jobs.follow_up)
    assert (follow_up.state, follow_up.due_time) == (JobState.SCHEDULED, T0 + timedelta(days=1))
    backwave.advance(timedelta(days=1))
    assert backwave.job(follow_up.job_id).output == "followed up ada"


# --- Retries ------------------------------------------------------------------------------------


def test_retries_run_at_their_backoff_instants(backwave):
    job_id = jobs.charge_card.enqueue("o-1", fail_attempts=2).job_id
    assert backwave.run_until_idle() == RunSummary(retried=1)
    assert backwave.job(job_id).due_time == T0 + timedelta(seconds=10)
    assert backwave.advance(timedelta(seconds=9)).ran == 0
    assert backwave.advance(timedelta(seconds=1)) == RunSummary(retried=1)
    assert backwave.job(job_id).due_time == T0 + timedelta(seconds=70)
    assert backwave.advance(timedelta(minutes=1)) == RunSummary(succeeded=1)
    job = backwave.job(job_id)
    assert (job.state, job.attempt, job.output) == (
        JobState.SUCCEEDED,
        3,
        {"order": "o-1", "charged_on_attempt": 3},
    )
    assert len(job.failure_details) == 2
    assert job.last_failure.startswith("builtins.TimeoutError: gateway timed out charging o-1\nTraceback")
    leased_at = [t.recorded_at for t in job.transitions if t.state is JobState.LEASED]
    assert leased_at == [T0, T0 + timedelta(seconds=10), T0 + timedelta(seconds=70)]


def test_drain_jumps_through_backoff_until_the_last_attempt_dead_letters(backwave):
    job_id = jobs.charge_card.enqueue("o-2", fail_attempts=99).job_id
    summary = backwave.drain()
    assert summary == RunSummary(retried=3, dead_lettered=1)
    job = backwave.job(job_id)
    assert (job.state, job.attempt, job.terminal_cause) == (
        JobState.DEAD_LETTERED,
        4,
        "gateway timed out charging o-2",
    )
    # backoff [10, 60]: the last entry repeats.
    assert backwave.now == T0 + timedelta(seconds=10 + 60 + 60)


def test_drain_gives_up_when_nothing_will_happen_by_itself(backwave):
    operator.pause_queue("default", actor="test")
    jobs.square.enqueue(7)
    with pytest.raises(HarnessLimitExceeded, match="nothing will happen by itself") as raised:
        backwave.drain()
    assert "harness.square(args=[7], kwargs={}): Scheduled, attempt 0, queue 'default'" in str(raised.value)


def test_drain_gives_up_at_its_horizon(backwave):
    jobs.square.using(run_after=timedelta(days=3)).enqueue(7)
    with pytest.raises(HarnessLimitExceeded, match=r"past 2026-01-02T00:00:00\+00:00"):
        backwave.drain(within=timedelta(days=1))


def test_a_runaway_job_hits_the_budget_instead_of_hanging(backwave):
    jobs.loop_forever.enqueue()
    with pytest.raises(HarnessLimitExceeded, match="re-enqueuing itself"):
        backwave.run_until_idle(max_jobs=25)
    assert len(backwave.jobs(jobs.loop_forever, state=JobState.SUCCEEDED)) == 25


def test_an_output_over_the_limit_is_a_failure_that_says_so(backwave):
    job_id = big_output.enqueue().job_id
    assert backwave.run_until_idle() == RunSummary(retried=1)
    job = backwave.job(job_id)
    assert job.output is None
    assert "MAX_OUTPUT_BYTES" in job.last_failure
    assert job.due_time == T0 + timedelta(seconds=2)  # the settings' default backoff, on virtual time


def test_a_crashed_workers_lease_expires_on_virtual_time(backwave):
    job_id = jobs.square.enqueue(6).job_id
    [claimed] = store.claim(
        worker_id="crashed-worker",
        queues=["default"],
        max_jobs=1,
        lease_duration=timedelta(minutes=1),
        now=T0,
    )
    assert backwave.advance(timedelta(seconds=59)).ran == 0
    backwave.advance(timedelta(minutes=2))
    job = backwave.job(job_id)
    assert (job.state, job.attempt, job.output) == (JobState.SUCCEEDED, 2, 36)
    assert [actor for _, _, actor in _actors(job)] == [
        "enqueue",
        "crashed-worker",
        "lease-expiry",
        WORKER_ID,
        WORKER_ID,
    ]
    late = store.report_outcome(_report(claimed.job_id, "crashed-worker", claimed.attempt), now=backwave.now)
    assert late is OutcomeResult.STALE_LEASE


def _report(job_id, worker, attempt):
    from backwave_django import OutcomeReport

    return OutcomeReport(job_id=job_id, worker_id=worker, attempt=attempt, outcome=Success())


# --- Dependencies -------------------------------------------------------------------------------


def test_fan_out_then_fan_in_reads_the_parents_outputs(backwave):
    root = jobs.fan_out.enqueue([1, 2, 3]).job_id
    assert backwave.run_until_idle() == RunSummary(succeeded=5)
    total_id = uuid.UUID(backwave.job(root).output["total"])
    total = backwave.job(total_id)
    assert total.output == 1 + 4 + 9
    assert [state for state, _, _ in _actors(total)] == [
        JobState.AWAITING_PARENT,
        JobState.SCHEDULED,
        JobState.LEASED,
        JobState.SUCCEEDED,
    ]
    assert backwave.assert_enqueued(jobs.square, count=3, state=JobState.SUCCEEDED)


def test_a_child_is_cancelled_when_its_parent_dead_letters(backwave):
    parent = jobs.charge_card.enqueue("o-3", fail_attempts=99).job_id
    child = jobs.square.using(parents=[parent]).enqueue(2).job_id
    backwave.drain()
    job = backwave.job(child)
    assert (job.state, job.terminal_cause, job.attempt) == (
        JobState.CANCELLED,
        "parent-failure:DeadLettered",
        0,
    )


# --- Cancellation -------------------------------------------------------------------------------


def test_a_running_job_sees_a_cancel_request_and_ends_cancelled(backwave, monkeypatch):
    job_id = jobs.export.enqueue(pages=5).job_id

    def cancel_on_second_page(page):
        if page == 1:
            assert operator.cancel(job_id, actor="alice") is CancelResult.CANCELLATION_REQUESTED
        return [page]

    monkeypatch.setattr(jobs, "fetch_page", cancel_on_second_page)
    assert backwave.run_until_idle() == RunSummary(cancelled=1)
    job = backwave.job(job_id)
    assert (job.state, job.terminal_cause, job.output) == (JobState.CANCELLED, "operator-cancel", None)
    # Pages 0 and 1 were fetched; the check before page 2 stopped it.
    assert ("progress", "2") in job.tags
    assert ("progress", "3") not in job.tags


def test_a_job_cancelled_before_it_runs_never_runs(backwave):
    job_id = jobs.export.enqueue(pages=1).job_id
    assert operator.cancel(job_id, actor="alice") is CancelResult.CANCELLED_IMMEDIATELY
    assert backwave.run_until_idle().ran == 0
    assert backwave.job(job_id).terminal_cause == "alice"


# --- Async handlers, routing --------------------------------------------------------------------


def test_async_handlers_run_to_completion(backwave):
    job_id = jobs.async_greet.enqueue("ada").job_id
    assert backwave.run_until_idle() == RunSummary(succeeded=1)
    job = backwave.job(job_id)
    assert (job.output, job.tags) == ("hello ada (attempt 1)", ("async",))


def test_async_handler_failures_retry_on_virtual_time(backwave):
    job_id = jobs.async_flaky.enqueue().job_id
    assert backwave.drain() == RunSummary(retried=1, dead_lettered=1)
    job = backwave.job(job_id)
    assert job.last_failure.startswith("builtins.ConnectionError: upstream refused the connection")
    assert job.terminal_at == T0 + timedelta(seconds=5)


def test_unroutable_jobs_are_quarantined_with_the_exact_cause(backwave):
    gone, renamed = uuid.uuid4(), uuid.uuid4()
    for job_id, wire_name, payload in (
        (gone, "harness.gone", {"args": [], "kwargs": {}}),
        (renamed, "harness.square", {"args": [], "kwargs": {"m": 1}}),
    ):
        new_job = NewJob(job_id=job_id, wire_name=wire_name, payload=payload, due_time=T0)
        store.enqueue(new_job, now=T0)
    assert backwave.run_until_idle() == RunSummary(quarantined=2)
    assert backwave.job(gone).terminal_cause == "no handler registered for wire name 'harness.gone'"
    assert backwave.job(renamed).terminal_cause == (
        "payload for wire name 'harness.square' no longer decodes: missing a required argument: 'n'"
    )


# --- Transactions and the test database ------------------------------------------------------


def test_a_rolled_back_enqueue_leaves_no_trace(backwave):
    with pytest.raises(RuntimeError), transaction.atomic():
        jobs.square.enqueue(1)
        raise RuntimeError("the view failed")
    backwave.assert_no_jobs()
    assert backwave.run_until_idle().ran == 0


def test_a_database_error_in_a_handler_fails_the_attempt_and_the_test_carries_on(backwave, monkeypatch):
    def duplicate_row(page):
        QueueSettings.objects.create(queue="dup")
        QueueSettings.objects.create(queue="dup")  # IntegrityError: unique queue
        return [page]

    monkeypatch.setattr(jobs, "fetch_page", duplicate_row)
    job_id = jobs.export.enqueue(pages=1).job_id
    assert backwave.run_until_idle() == RunSummary(retried=1)
    assert "IntegrityError" in backwave.job(job_id).last_failure
    monkeypatch.undo()
    assert backwave.advance(timedelta(minutes=5)) == RunSummary(succeeded=1)


@pytest.mark.django_db(transaction=True)
def test_the_harness_works_with_a_transactional_test_database(backwave):
    root = jobs.fan_out.enqueue([2, 3]).job_id
    assert backwave.run_until_idle() == RunSummary(succeeded=4)
    assert backwave.job(uuid.UUID(backwave.job(root).output["total"])).output == 13


def test_moving_time_from_inside_a_handler_is_refused(backwave, monkeypatch):
    monkeypatch.setattr(jobs, "fetch_page", lambda page: backwave.advance(timedelta(days=1)))
    job_id = jobs.export.enqueue(pages=1).job_id
    assert backwave.run_until_idle() == RunSummary(retried=1)
    assert "advance_to() was called from inside a running job" in backwave.job(job_id).last_failure
    assert backwave.now == T0


# --- Options --------------------------------------------------------------------------------------


def test_queues_limits_what_the_harness_serves(db):
    with BackWaveHarness(queues=["digests"]) as harness:
        ignored = jobs.square.enqueue(2).job_id
        served = jobs.digest.enqueue("eu").job_id
        assert harness.run_until_idle() == RunSummary(succeeded=1)
        assert harness.job(served).state is JobState.SUCCEEDED
        assert harness.job(ignored).state is JobState.SCHEDULED
        harness.drain()  # the unserved queue is not waited for


def test_retention_is_off_by_default_and_purges_when_enabled(db):
    with BackWaveHarness() as harness:
        kept = jobs.square.enqueue(1).job_id
        harness.advance(timedelta(days=30))
        assert harness.job(kept).state is JobState.SUCCEEDED
    with BackWaveHarness(start=T0 + timedelta(days=60), retention=True) as harness:
        purged = jobs.square.enqueue(1).job_id
        harness.advance(timedelta(hours=23, minutes=59))
        assert harness.job(purged).state is JobState.SUCCEEDED
        harness.advance(timedelta(minutes=1))
        with pytest.raises(LookupError, match="purged"):
            harness.job(purged)


def test_bad_options_are_refused_with_clear_errors(db):
    with pytest.raises(TypeError, match="list of queue names"):
        BackWaveHarness(queues="default")
    with pytest.raises(ValueError, match="max_jobs must be a positive int"):
        BackWaveHarness(max_jobs=0)
