"""Assertion helpers and snapshots: they pass on a match and fail listing what was enqueued."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest

from backwave_django import JobState
from tests.jobsapp import harness_jobs as jobs


def test_assert_enqueued_matches_by_job_arguments_state_and_tags(backwave):
    jobs.charge_card.enqueue("o-1")
    jobs.charge_card.using(tags=[("tenant", "acme")]).enqueue("o-2", fail_attempts=1)
    [match] = backwave.assert_enqueued(jobs.charge_card, args=["o-1"], kwargs={})
    assert match.args == ["o-1"]
    backwave.assert_enqueued("harness.charge-card", count=2, state=JobState.SCHEDULED)
    backwave.assert_enqueued(jobs.charge_card, kwargs={"fail_attempts": 1}, tags=[("tenant", "acme")])
    backwave.assert_enqueued(jobs.charge_card, args=("o-2",), count=1)  # a tuple compares as the list
    backwave.assert_enqueued(jobs.square, count=0)


def test_assert_enqueued_failure_lists_what_was_enqueued(backwave):
    jobs.charge_card.enqueue("o-1")
    jobs.square.using(run_after=timedelta(hours=1)).enqueue(4)
    with pytest.raises(AssertionError) as raised:
        backwave.assert_enqueued(jobs.charge_card, args=["o-9"])
    message = str(raised.value)
    assert message.startswith(
        "expected at least 1 job(s) matching 'harness.charge-card', args=['o-9']; found 0.\nJobs in the store (2):"
    )
    assert (
        "  - harness.charge-card(args=['o-1'], kwargs={}): Scheduled, attempt 0, queue 'default', due 2026-01-01T00:00:00+00:00"
        in message
    )
    assert (
        "  - harness.square(args=[4], kwargs={}): Scheduled, attempt 0, queue 'default', due 2026-01-01T01:00:00+00:00"
        in message
    )


def test_assert_enqueued_with_a_count_fails_on_any_other_number(backwave):
    jobs.square.enqueue(1)
    jobs.square.enqueue(2)
    with pytest.raises(
        AssertionError, match=r"expected exactly 1 job\(s\) matching 'harness.square'; found 2"
    ):
        backwave.assert_enqueued(jobs.square, count=1)
    backwave.run_until_idle()
    with pytest.raises(AssertionError, match="state=Scheduled; found 0") as raised:
        backwave.assert_enqueued(jobs.square, state=JobState.SCHEDULED)
    assert "Succeeded, attempt 1, queue 'default', ended 2026-01-01T00:00:00+00:00" in str(raised.value)


def test_assert_enqueued_on_an_empty_store_says_so(backwave):
    with pytest.raises(AssertionError, match="The store holds no jobs at all"):
        backwave.assert_enqueued(jobs.square)


def test_assert_no_jobs_lists_the_jobs_it_found(backwave):
    backwave.assert_no_jobs()
    jobs.square.enqueue(3)
    backwave.assert_no_jobs(jobs.charge_card)
    backwave.assert_no_jobs(jobs.square, state=JobState.SUCCEEDED)
    with pytest.raises(
        AssertionError,
        match=r"expected no 'harness.square' jobs; found 1\.\nJobs in the store \(1\):\n  - harness.square\(args=\[3\]",
    ):
        backwave.assert_no_jobs(jobs.square)


def test_bad_assertion_arguments_are_type_errors_not_failures(backwave):
    with pytest.raises(TypeError, match="expected a job"):
        backwave.assert_enqueued(42)
    with pytest.raises(ValueError, match="count must be an int >= 0"):
        backwave.assert_enqueued(jobs.square, count=-1)
    with pytest.raises(TypeError, match=r"uuid\.UUID"):
        backwave.job(str(uuid.uuid4()))
    with pytest.raises(LookupError, match="no job"):
        backwave.job(uuid.uuid4())


def test_a_snapshot_is_a_value_taken_when_it_was_read(backwave):
    job_id = jobs.export.using(tags=["nightly"]).enqueue(pages=2).job_id
    before = backwave.job(job_id)
    backwave.run_until_idle()
    after = backwave.job(job_id)
    assert (before.state, before.output) == (JobState.SCHEDULED, None)
    assert (after.state, after.output, after.kwargs) == (JobState.SUCCEEDED, 2, {"pages": 2})
    assert after.tags == ("exports", "nightly", ("progress", "1"), ("progress", "2"))
    assert repr(after) == f"<JobSnapshot harness.export {job_id} Succeeded attempt 1>"
    assert after.failure_details == ()
    assert after.last_failure is None


def test_jobs_filters_by_type_state_and_queue(backwave):
    jobs.square.enqueue(1)
    jobs.digest.enqueue("eu")
    backwave.run_next()
    assert [j.wire_name for j in backwave.jobs()] == ["harness.square", "harness.digest"]
    assert [j.wire_name for j in backwave.jobs(queue="digests")] == ["harness.digest"]
    assert [j.wire_name for j in backwave.jobs(state=JobState.SUCCEEDED)] == ["harness.square"]
    assert backwave.jobs(jobs.digest, state=JobState.SUCCEEDED) == []
