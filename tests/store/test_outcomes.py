from datetime import timedelta

import pytest

from backwave_django import (
    Cancelled,
    Failure,
    HistoryPolicy,
    JobState,
    OutcomeReport,
    OutcomeResult,
    OutputTooLarge,
    Success,
    Unroutable,
    store,
)
from backwave_django.models import JobTag, JobTransition

from ..conftest import LEASE, T0, WORKER, enqueue, history, lease, report, row

pytestmark = pytest.mark.django_db

APPLIED, STALE = OutcomeResult.APPLIED, OutcomeResult.STALE_LEASE
LATER = T0 + timedelta(seconds=10)


@pytest.fixture
def leased():
    job_id = enqueue()
    lease()
    return job_id


def _tags(job_id):
    return set(JobTag.objects.filter(job__job_id=job_id).values_list("key", "value"))


def test_success_stamps_terminal_at_and_keeps_the_output(leased):
    assert report(leased, Success(), now=LATER, output={"sent": True}) is APPLIED
    record = row(leased)
    assert (record.state, record.terminal_at, record.terminal_cause) == (JobState.SUCCEEDED, LATER, None)
    assert (record.lease_owner, record.lease_expiry, record.attempt) == (None, None, 1)
    assert record.output == {"sent": True}
    assert history(leased)[-1] == (2, "SUCCEEDED", 1, WORKER)


def test_failure_with_a_retry_reschedules_at_the_same_attempt(leased):
    retry_at = LATER + timedelta(seconds=2)
    outcome = Failure(next_due_time=retry_at, error="gateway timeout")
    assert (
        report(leased, outcome, now=LATER, failure_detail="builtins.TimeoutError: gateway timeout\n...")
        is APPLIED
    )
    record = row(leased)
    assert (record.state, record.due_time, record.attempt) == (JobState.SCHEDULED, retry_at, 1)
    assert (record.lease_owner, record.terminal_at, record.terminal_cause) == (None, None, None)
    entry = JobTransition.objects.get(job__job_id=leased, ordinal=2)
    assert (entry.state, entry.attempt, entry.recorded_at) == (JobState.SCHEDULED, 1, LATER)
    assert entry.failure_detail == "builtins.TimeoutError: gateway timeout\n..."
    [again] = lease(now=retry_at)
    assert again.attempt == 2


def test_failure_without_a_retry_dead_letters_with_the_message(leased):
    outcome = Failure(next_due_time=None, error="gateway timeout (attempt 3)")
    assert report(leased, outcome, now=LATER, failure_detail="detail") is APPLIED
    record = row(leased)
    assert (record.state, record.terminal_at) == (JobState.DEAD_LETTERED, LATER)
    assert record.terminal_cause == "gateway timeout (attempt 3)"
    assert JobTransition.objects.get(job__job_id=leased, ordinal=2).failure_detail == "detail"


def test_cancelled_outcome_records_the_cause_and_clears_the_flag(leased):
    store.cancel_job(leased, actor="alice", now=T0)
    assert row(leased).cancel_requested
    assert report(leased, Cancelled(cause="operator-cancel"), now=LATER) is APPLIED
    record = row(leased)
    assert (record.state, record.terminal_cause, record.cancel_requested) == (
        JobState.CANCELLED,
        "operator-cancel",
        False,
    )


def test_unroutable_outcome_quarantines(leased):
    reason = "no handler registered for wire name 'send-invoice'"
    assert report(leased, Unroutable(reason=reason), now=LATER) is APPLIED
    record = row(leased)
    assert (record.state, record.terminal_cause, record.attempt) == (JobState.QUARANTINED, reason, 1)


def test_failure_detail_is_kept_only_on_failure_entries(leased):
    report(leased, Success(), failure_detail="ignored")
    assert not JobTransition.objects.filter(failure_detail__isnull=False).exists()


def test_output_is_kept_only_on_success(leased):
    report(leased, Failure(next_due_time=None, error="x"), output={"partial": 1})
    assert row(leased).output is None


@pytest.mark.parametrize(
    ("change", "now"),
    [
        ({"worker": "someone-else"}, T0),
        ({"attempt": 2}, T0),
        ({}, T0 + LEASE),  # a lease is dead at its expiry instant
        ({}, T0 + LEASE + timedelta(seconds=1)),
    ],
    ids=["wrong-owner", "wrong-attempt", "at-expiry", "after-expiry"],
)
def test_the_fence_refuses_stale_reports_and_changes_nothing(leased, change, now):
    before = (row(leased).__dict__.copy(), history(leased))
    result = report(leased, Success(), now=now, output={"x": 1}, added_tags=["late"], **change)
    assert result is STALE
    after = row(leased).__dict__.copy()
    for volatile in ("_state",):
        after.pop(volatile)
        before[0].pop(volatile)
    assert (after, history(leased)) == before
    assert _tags(leased) == set()


def test_a_report_just_before_expiry_applies(leased):
    assert report(leased, Success(), now=T0 + LEASE - timedelta(microseconds=1)) is APPLIED


def test_a_report_for_a_terminal_or_unknown_job_is_stale(leased):
    import uuid

    assert report(leased) is APPLIED
    assert report(leased) is STALE
    assert report(uuid.uuid4()) is STALE


def test_output_exactly_at_the_limit_is_accepted(leased):
    output = "x" * (65_536 - 2)
    assert report(leased, Success(), output=output) is APPLIED
    assert row(leased).output == output


def test_oversized_output_raises_before_any_write_of_the_batch():
    first, second = enqueue(), enqueue()
    lease()
    reports = [
        OutcomeReport(job_id=first, worker_id=WORKER, attempt=1, outcome=Success()),
        OutcomeReport(job_id=second, worker_id=WORKER, attempt=1, outcome=Success(), output="x" * 65_535),
    ]
    with pytest.raises(OutputTooLarge, match=r"65,537 bytes; MAX_OUTPUT_BYTES is 65,536") as raised:
        store.report_outcomes(reports, now=T0)
    assert raised.value.job_id == second
    assert isinstance(raised.value, ValueError)
    assert {row(first).state, row(second).state} == {JobState.LEASED}


def test_failure_detail_is_truncated_on_a_utf8_boundary(leased, backwave_settings):
    backwave_settings(MAX_FAILURE_DETAIL_BYTES=5)
    report(leased, Failure(next_due_time=None, error="x"), failure_detail="ééé")
    assert JobTransition.objects.get(job__job_id=leased, ordinal=2).failure_detail == "éé"


def test_failure_detail_at_the_default_limit(leased):
    detail = "a" * 8_191 + "é"  # 8,193 bytes: the é does not fit
    report(leased, Failure(next_due_time=None, error="x"), failure_detail=detail)
    assert JobTransition.objects.get(job__job_id=leased, ordinal=2).failure_detail == "a" * 8_191


def test_added_tags_are_unioned_on_any_applied_outcome():
    job_id = enqueue(tags=["vip"])
    lease()
    report(job_id, Failure(next_due_time=T0, error="x"), added_tags=["vip", ("tenant", "acme")])
    lease()
    report(job_id, Success(), attempt=2, added_tags=[("tenant", "acme"), "done"])
    assert _tags(job_id) == {("", "vip"), ("tenant", "acme"), ("", "done")}
    assert lease() == []


def test_claimed_tags_include_tags_added_by_earlier_attempts():
    job_id = enqueue()
    lease()
    report(job_id, Failure(next_due_time=T0, error="x"), added_tags=["retried"])
    [again] = lease()
    assert again.tags == ("retried",)


def test_report_outcomes_fences_each_row_and_answers_in_input_order():
    a, b, c = enqueue(), enqueue(), enqueue()
    lease()
    reports = [
        OutcomeReport(job_id=c, worker_id=WORKER, attempt=1, outcome=Success()),
        OutcomeReport(job_id=a, worker_id="intruder", attempt=1, outcome=Success()),
        OutcomeReport(job_id=b, worker_id=WORKER, attempt=1, outcome=Failure(next_due_time=None, error="e")),
        OutcomeReport(job_id=c, worker_id=WORKER, attempt=1, outcome=Success()),
    ]
    assert store.report_outcomes(reports, now=T0) == [APPLIED, STALE, APPLIED, STALE]
    assert [row(j).state for j in (a, b, c)] == [JobState.LEASED, JobState.DEAD_LETTERED, JobState.SUCCEEDED]
    assert store.report_outcomes([], now=T0) == []


def test_distinct_outputs_in_one_batch_stay_distinct():
    jobs = [enqueue() for _ in range(4)]
    lease()
    outputs = [1, 1.0, True, {"n": 1}]
    reports = [
        OutcomeReport(job_id=j, worker_id=WORKER, attempt=1, outcome=Success(), output=o)
        for j, o in zip(jobs, outputs, strict=True)
    ]
    store.report_outcomes(reports, now=T0)
    stored = [row(j).output for j in jobs]
    assert stored == outputs
    assert [type(v) for v in stored] == [int, float, bool, dict]


def test_history_off_writes_no_transitions_but_keeps_the_output(backwave_settings):
    backwave_settings(HISTORY=HistoryPolicy.OFF)
    job_id = enqueue()
    lease()
    report(job_id, Success(), output="kept")
    assert history(job_id) == []
    assert row(job_id).output == "kept"


def test_history_transitions_drops_failure_detail(backwave_settings):
    backwave_settings(HISTORY="TRANSITIONS")
    job_id = enqueue()
    lease()
    report(job_id, Failure(next_due_time=None, error="x"), failure_detail="secret")
    assert [h[1] for h in history(job_id)] == ["SCHEDULED", "LEASED", "DEAD_LETTERED"]
    assert not JobTransition.objects.filter(failure_detail__isnull=False).exists()


def test_environment_switch_drops_failure_detail(monkeypatch):
    monkeypatch.setenv("BACKWAVE_DISABLE_FAILURE_DETAIL", "on")
    job_id = enqueue()
    lease()
    report(job_id, Failure(next_due_time=None, error="x"), failure_detail="secret")
    assert JobTransition.objects.get(job__job_id=job_id, ordinal=2).failure_detail is None


def test_the_transition_log_keeps_the_newest_entries_and_ordinals_keep_climbing(backwave_settings):
    backwave_settings(RETRY={"MAX_ATTEMPTS": 1000})
    job_id = enqueue()
    for attempt in range(1, 65):  # 1 + 64 * 2 = 129 entries appended
        lease()
        report(job_id, Failure(next_due_time=T0, error="again"), attempt=attempt)
    ordinals = [h[0] for h in history(job_id)]
    assert ordinals == list(range(65, 129))
    assert row(job_id).next_ordinal == 129


def test_a_smaller_transition_cap_applies(backwave_settings):
    backwave_settings(MAX_TRANSITIONS_PER_JOB=2)
    job_id = enqueue()
    lease()
    report(job_id)
    assert [h[:2] for h in history(job_id)] == [(1, "LEASED"), (2, "SUCCEEDED")]


def test_report_outcomes_refuses_malformed_input():
    from datetime import datetime

    with pytest.raises(TypeError, match=r"reports\[0\] must be an OutcomeReport"):
        store.report_outcomes([{"job_id": 1}], now=T0)  # type: ignore[list-item]
    with pytest.raises(ValueError, match="now must be timezone-aware"):
        store.report_outcomes([], now=datetime(2026, 1, 1))
