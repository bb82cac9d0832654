"""The job detail page leads with the answer: state, cause and last failure, then the attempts, then
the fields (admin/job_page.py, monitor/attempts.py)."""

from __future__ import annotations

import re
import uuid
from datetime import timedelta

import pytest
from django.contrib.admin.utils import quote
from django.urls import reverse
from django.utils import timezone

from backwave_django import Failure, JobState, Success, monitor, store
from backwave_django.core.actors import LEASE_EXPIRY as LEASE_EXPIRY_ACTOR
from backwave_django.core.outcomes import NewJob, OutcomeReport, Snoozed
from backwave_django.core.states import EnqueueResult
from backwave_django.models import JobRecord
from backwave_django.monitor import AttemptOutcome

from ..conftest import T0
from ..factories import JobRecordFactory, JobTransitionFactory, WorkerNodeFactory

pytestmark = pytest.mark.django_db

WORKER = "shop-worker-3:1618:9f2c"


def detail(attempt: int) -> str:
    return (
        f"CardDeclined: card declined on attempt {attempt}\n"
        "Traceback (most recent call last):\n"
        '  File "shop/jobs.py", line 12, in charge\n'
        "    raise CardDeclined(...)\n"
    )


def job_with_attempts(
    attempts: int = 10, *, max_attempts: int = 10, last: str = "fail", worker: str = WORKER
) -> uuid.UUID:
    """A job a worker ran ``attempts`` times: each attempt failed (``last`` says how the final one
    ended: ``fail``, ``succeed`` or ``run``), through the store as a worker would."""
    start = timezone.now() - timedelta(hours=1)
    job_id = uuid.uuid4()
    queue = f"q-{job_id.hex[:8]}"
    new = NewJob(
        job_id=job_id,
        wire_name="shop.charge-card",
        payload={"args": [], "kwargs": {}},
        queue=queue,
        due_time=start,
        max_attempts=max_attempts,
        backoff=(1.0,),
    )
    assert store.enqueue(new, now=start) is EnqueueResult.OK
    for attempt in range(1, attempts + 1):
        now = start + timedelta(minutes=attempt * 2)
        [claimed] = store.claim(
            worker_id=worker, queues=[queue], max_jobs=1, lease_duration=timedelta(minutes=5), now=now
        )
        assert claimed.attempt == attempt
        final = attempt == attempts
        if final and last == "run":
            break
        if final and last == "succeed":
            outcome: object = Success()
        else:
            retry = None if attempt >= max_attempts else now + timedelta(seconds=30)
            outcome = Failure(next_due_time=retry, error=f"card declined on attempt {attempt}")
        store.report_outcome(
            OutcomeReport(
                job_id=job_id,
                worker_id=worker,
                attempt=attempt,
                outcome=outcome,  # type: ignore[arg-type]
                failure_detail=None if isinstance(outcome, Success) else detail(attempt),
            ),
            now=now + timedelta(seconds=3, milliseconds=250),
        )
    return job_id


def page(client, job_id: uuid.UUID) -> str:
    pk = JobRecord.objects.get(job_id=job_id).pk
    return client.get(reverse("admin:backwave_django_jobrecord_change", args=[pk])).content.decode()


# --- The attempts, read off the transition log ---------------------------------------------------


def test_each_attempt_is_a_row_with_its_worker_times_and_outcome():
    job_id = job_with_attempts(3, max_attempts=3)
    attempts = monitor.job_attempts(job_id)
    assert [a.number for a in attempts] == [1, 2, 3]
    assert [a.outcome for a in attempts] == [
        AttemptOutcome.FAILED_WILL_RETRY,
        AttemptOutcome.FAILED_WILL_RETRY,
        AttemptOutcome.FAILED,
    ]
    assert all(a.worker == WORKER and a.failed for a in attempts)
    assert attempts[0].duration == timedelta(seconds=3, milliseconds=250)
    assert attempts[2].failure_detail == detail(3)


def test_a_running_attempt_a_success_and_a_snooze_are_not_failures():
    running = monitor.job_attempts(job_with_attempts(2, last="run"))
    assert [a.outcome for a in running] == [AttemptOutcome.FAILED_WILL_RETRY, AttemptOutcome.RUNNING]
    assert running[-1].ended_at is None
    assert running[-1].duration is None
    succeeded = monitor.job_attempts(job_with_attempts(2, last="succeed"))
    assert succeeded[-1].outcome is AttemptOutcome.SUCCEEDED
    assert not succeeded[-1].failed
    job_id = job_with_attempts(1, last="run")
    expiry = JobRecord.objects.get(job_id=job_id).lease_expiry
    assert expiry is not None
    now = expiry - timedelta(seconds=1)
    store.report_outcome(
        OutcomeReport(job_id=job_id, worker_id=WORKER, attempt=1, outcome=Snoozed(next_due_time=now)), now=now
    )
    assert [a.outcome for a in monitor.job_attempts(job_id)] == [AttemptOutcome.RESCHEDULED]


def test_an_expired_lease_is_a_failed_attempt_ended_by_the_sweep():
    job = JobRecordFactory(state=JobState.DEAD_LETTERED, terminal=True, attempt=1)
    t0 = T0
    JobTransitionFactory(job=job, ordinal=0, state=JobState.SCHEDULED, attempt=0, recorded_at=t0)
    JobTransitionFactory(job=job, ordinal=1, state=JobState.LEASED, attempt=1, actor="w-1", recorded_at=t0)
    JobTransitionFactory(
        job=job,
        ordinal=2,
        state=JobState.DEAD_LETTERED,
        attempt=1,
        actor=LEASE_EXPIRY_ACTOR,
        recorded_at=t0 + timedelta(minutes=5),
    )
    [attempt] = monitor.job_attempts(job.job_id)
    assert attempt.outcome is AttemptOutcome.LEASE_EXPIRED
    assert attempt.failed
    assert attempt.worker == "w-1"
    assert attempt.duration == timedelta(minutes=5)


def test_without_the_detail_the_failures_are_still_known_and_no_detail_is_read():
    attempts = monitor.job_attempts(job_with_attempts(2, max_attempts=2), failure_detail=False)
    assert [a.failed for a in attempts] == [True, True]
    assert [a.failure_detail for a in attempts] == [None, None]


# --- The page ------------------------------------------------------------------------------------


def test_the_page_leads_with_state_cause_and_last_failure_before_attempts_and_fields(client, login):
    login("view_sensitive_jobrecord")
    html = page(client, job_with_attempts(10))
    summary = html.index('data-testid="bw-summary"')
    assert summary < html.index('data-testid="bw-attempts"') < html.index('data-testid="bw-fields"')
    assert html.index('data-testid="bw-fields"') < html.index('data-testid="bw-transition-log"')
    lead = html[summary : html.index('data-testid="bw-attempts"')]
    assert 'data-state="DeadLettered"' in lead
    assert 'data-testid="bw-summary-cause">card declined on attempt 10<' in lead
    assert "attempt 10, failed, dead-lettered" in lead
    assert "(10 failed attempts in all)" in lead
    message = re.search(r'data-testid="bw-last-failure-message">([^<]*)<', lead)
    assert message
    assert message.group(1) == "CardDeclined: card declined on attempt 10"
    # The traceback is folded: a <details> that is not open.
    folded = re.search(r'<details class="bw-traceback" data-testid="bw-last-failure-traceback">', lead)
    assert folded
    assert "raise CardDeclined" in lead


def test_the_attempts_are_one_row_each_newest_first_failures_marked_and_folded(client, login):
    login("view_sensitive_jobrecord")
    html = page(client, job_with_attempts(3, max_attempts=3, last="succeed"))
    section = html[html.index('data-testid="bw-attempts"') : html.index('data-testid="bw-fields"')]
    rows = re.findall(r'<tr class="bw-attempt[^"]*"[^>]*data-outcome="([\w-]+)" data-failed="(\w+)"', section)
    assert rows == [("succeeded", "false"), ("failed-will-retry", "true"), ("failed-will-retry", "true")]
    assert section.count('class="bw-attempt bw-attempt--failed"') == 2
    assert section.count('<details class="bw-traceback" data-testid="bw-attempt-traceback">') == 2
    assert "<details open" not in section
    assert "3 recorded, 2 failed; newest first" in section
    assert "3.25 s" in section  # each attempt ran for 3.25 s


def test_without_the_sensitive_permission_failures_show_but_their_detail_does_not(client, login):
    login()
    html = page(client, job_with_attempts(2, max_attempts=2))
    assert "CardDeclined" not in html
    assert "raise CardDeclined" not in html
    assert "attempt 2, failed, dead-lettered" in html
    assert html.count("Failure detail — Hidden: needs the") >= 3  # the lead and each attempt
    assert html.count('class="bw-attempt bw-attempt--failed"') == 2


def test_each_attempt_links_the_worker_that_ran_it_for_those_who_may_see_workers(client, login):
    WorkerNodeFactory(worker_id=WORKER)
    job_id = job_with_attempts(1, max_attempts=1)
    login()
    url = reverse("admin:backwave_django_workernode_change", args=[quote(WORKER)])
    assert f'href="{url}" data-testid="bw-worker-link">{WORKER}</a>' in page(client, job_id)
    assert client.get(url).status_code == 200
    login("view_jobrecord")  # login() also grants view_workernode: a viewer of jobs only
    client.force_login(_jobs_only_viewer())
    html = page(client, job_id)
    assert 'data-testid="bw-worker-link"' not in html
    assert WORKER in html


def _jobs_only_viewer():
    from django.contrib.auth.models import Permission, User

    user = User.objects.create_user("jobs-only", is_staff=True)
    user.user_permissions.set(Permission.objects.filter(codename="view_jobrecord"))
    return user


def test_a_job_not_run_yet_says_what_it_waits_for_and_that_no_attempt_ran(client, login):
    login()
    job = JobRecordFactory(state=JobState.SCHEDULED, due_time=timezone.now() + timedelta(hours=1))
    html = client.get(reverse("admin:backwave_django_jobrecord_change", args=[job.pk])).content.decode()
    assert "Waiting for its first attempt, due" in html
    assert "No attempt recorded yet" in html
    assert 'data-testid="bw-last-failure-summary"' not in html


def test_the_fields_are_grouped_several_to_a_line_not_one_row_each(client, login):
    login()
    html = page(client, job_with_attempts(1, max_attempts=1))
    fields = html[html.index('data-testid="bw-fields"') : html.index('data-testid="bw-dependencies"')]
    groups = re.findall(r'<section class="module bw-field-group">\s*<h2>([^<]+)</h2>', fields)
    assert groups == ["Job", "Times and lease", "Relations", "Policy", "Progress", "Payload and output"]
    assert 'class="form-row' not in fields
    assert len(re.findall(r'<div class="bw-field field-', fields)) >= 20
