"""The Retrying view (``?retrying=1``) and Retry now: the bulk action and the job page's button."""

from __future__ import annotations

import re
import uuid
from datetime import datetime, timedelta

import pytest
from django.contrib.admin.models import LogEntry
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from backwave_django import Failure, JobState, store
from backwave_django.models import JobRecord, OperatorAudit

from ..conftest import LEASE, enqueue, report
from ..factories import JobRecordFactory, JobTransitionFactory
from .conftest import flashed, named

pytestmark = pytest.mark.django_db

JOBS = "admin:backwave_django_jobrecord_changelist"
RETRYING = {"retrying": "1"}
DETAIL = "ValueError: card declined for order 42\nTraceback (most recent call last):\n  secret frame"


def _page(job_id: uuid.UUID) -> str:
    return reverse("admin:backwave_django_jobrecord_change", args=[JobRecord.objects.get(job_id=job_id).pk])


def _retry_now_url(job_id: uuid.UUID) -> str:
    return reverse(
        "admin:backwave_django_jobrecord_retry_now", args=[JobRecord.objects.get(job_id=job_id).pk]
    )


def _shown(response) -> list[uuid.UUID]:
    return [job.job_id for job in response.context["cl"].result_list]


def _fail(
    job_id: uuid.UUID, queue: str, *, now: datetime, retry_in: timedelta | None, attempt: int = 1
) -> None:
    """Claim ``job_id`` (alone in its queue) and report a failure: retried in ``retry_in``, or final."""
    store.claim(worker_id="w", queues=[queue], max_jobs=1, lease_duration=LEASE, now=now)
    report(
        job_id,
        Failure(next_due_time=None if retry_in is None else now + retry_in, error="card declined"),
        now=now,
        worker="w",
        attempt=attempt,
        failure_detail=DETAIL,
    )


def waiting_job(queue: str, *, retry_in: timedelta, failures: int = 1, **policy) -> uuid.UUID:
    """A job that failed ``failures`` times and now waits ``retry_in`` for its next try."""
    now = timezone.now() - timedelta(minutes=10)
    job = enqueue(now=now, due_time=now, queue=queue, **policy)
    for attempt in range(1, failures + 1):
        last = attempt == failures
        _fail(job, queue, now=now, retry_in=retry_in if last else timedelta(0), attempt=attempt)
    record = JobRecord.objects.get(job_id=job)
    assert (record.state, record.attempt) == (JobState.SCHEDULED, failures)
    return job


@pytest.fixture
def jobs():
    """Two jobs waiting for a retry and one of every other kind that must not be listed."""
    now = timezone.now()
    later = waiting_job("r1", retry_in=timedelta(hours=2), max_attempts=3)
    sooner = waiting_job("r2", retry_in=timedelta(minutes=30), failures=2, max_attempts=5)
    fresh = enqueue(now=now, due_time=now + timedelta(hours=1), queue="fresh")
    running = enqueue(now=now, queue="run")
    store.claim(worker_id="w", queues=["run"], max_jobs=1, lease_duration=LEASE, now=now)
    dead = enqueue(now=now, queue="dl", max_attempts=1)
    _fail(dead, "dl", now=now, retry_in=None)
    old_row = JobRecordFactory(state=JobState.SCHEDULED, attempt=2, due_time=now + timedelta(hours=3))
    return {
        "later": later,
        "sooner": sooner,
        "old_row": old_row.job_id,
        "fresh": fresh,
        "running": running,
        "dead": dead,
    }


# --- The view ---------------------------------------------------------------------------------


def test_the_retrying_view_lists_exactly_the_jobs_waiting_for_a_retry_next_try_first(client, login, jobs):
    login()
    response = client.get(reverse(JOBS), RETRYING)
    assert response.status_code == 200
    assert _shown(response) == [jobs["sooner"], jobs["later"], jobs["old_row"]]
    html = response.content.decode()
    assert "2 of 5" in html
    assert "1 of 3" in html
    assert "2 of 10" in html  # a row older than the column: the settings' ceiling
    assert response.context["title"] == "Retrying jobs"
    for column in ("column-retry_attempt", "column-next_try"):
        assert column in html
    # Each job's last failure is a line of its own under its row; there is no cause line.
    assert html.count('<tr class="bw-detail-row">') == 3
    assert html.count("Last failure:") == 3
    assert 'data-testid="bw-cause"' not in html
    tab = re.search(r'<a href="([^"]+)"[^>]*data-testid="bw-retrying"[^>]*>(.*?)</a>', html, re.S)
    assert tab
    assert 'aria-current="page"' in tab.group(0)
    assert "bw-count" not in tab.group(2)  # no count on the tab: it would read every Scheduled row
    assert re.search(r'data-testid="bw-result-count">3 jobs<', html)
    assert "Retrying: waiting for their next try, next try first." in html


def test_every_list_links_to_the_retrying_view_and_the_dashboard_does_too(client, login, jobs):
    login()
    html = client.get(reverse(JOBS)).content.decode()
    tab = re.search(r'<a href="([^"]+)"[^>]*data-testid="bw-retrying"', html)
    assert tab
    assert tab.group(1) == reverse(JOBS) + "?retrying=1"
    assert 'data-testid="bw-failures-all"' in html
    dashboard = client.get(reverse("admin:backwave_django_dashboard_changelist")).content.decode()
    assert 'href="/admin/backwave_django/jobrecord/?retrying=1" data-testid="bw-retrying-link"' in dashboard


def test_the_retrying_view_combines_with_the_other_filters(client, login, jobs):
    login()
    assert _shown(client.get(reverse(JOBS), {**RETRYING, "queue": "r1"})) == [jobs["later"]]
    assert _shown(client.get(reverse(JOBS), {**RETRYING, "q": str(jobs["sooner"])})) == [jobs["sooner"]]


def test_the_next_try_is_the_due_time_with_how_far_ahead_it_is(client, login, jobs):
    login()
    html = client.get(reverse(JOBS), RETRYING).content.decode()
    due = JobRecord.objects.get(job_id=jobs["sooner"]).due_time
    cell = re.search(r'<td class="field-next_try">(.*?)</td>', html, re.S)
    assert cell
    assert due.strftime("%Y-%m-%d %H:%M:%S UTC") in cell.group(1)
    assert re.search(r"due in (19|20) min<", cell.group(1)), cell.group(1)


def test_the_last_failure_line_is_shown_only_to_those_who_may_see_failure_detail(
    client, login, jobs, monkeypatch
):
    allowed = login("view_sensitive_jobrecord")
    html = client.get(reverse(JOBS), RETRYING).content.decode()
    assert "ValueError: card declined for order 42" in html
    assert "secret frame" not in html  # only the first line
    assert "none recorded" in html  # the factory row has no failure in its log

    login()
    html = client.get(reverse(JOBS), RETRYING).content.decode()
    assert "card declined for order 42" not in html
    failed = re.findall(
        r'<span class="bw-last-failure" title="Hidden: [^"]*">failed at</span> <span class="bw-when">'
        r'<time [^>]*>([^<]+)</time>',
        html,
    )
    assert len(failed) == 2
    assert all(re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC", when) for when in failed)

    client.force_login(allowed)
    monkeypatch.setenv("BACKWAVE_DISABLE_SENSITIVE_DATA", "1")
    with CaptureQueriesContext(connection) as queries:
        html = client.get(reverse(JOBS), RETRYING).content.decode()
    assert "card declined for order 42" not in html
    assert "failed at" in html
    assert not any("failure_detail, 1," in q["sql"] or "SUBSTR" in q["sql"].upper() for q in queries)


def test_the_last_failure_is_escaped(client, login):
    login("view_sensitive_jobrecord")
    job = JobRecordFactory(state=JobState.SCHEDULED, attempt=1)
    JobTransitionFactory(job=job, state=JobState.SCHEDULED, attempt=1, failure_detail="<b>x</b>: y\nz")
    html = client.get(reverse(JOBS), RETRYING).content.decode()
    assert "<b>x</b>" not in html
    assert "&lt;b&gt;x&lt;/b&gt;: y" in html


def test_the_retrying_view_costs_the_same_queries_for_one_row_or_many(client, login):
    login("view_sensitive_jobrecord")
    waiting_job("r", retry_in=timedelta(hours=1))
    client.get(reverse(JOBS), RETRYING)
    with CaptureQueriesContext(connection) as one_row:
        client.get(reverse(JOBS), RETRYING)
    for n in range(12):
        waiting_job(f"r{n}", retry_in=timedelta(hours=1), failures=1 + n % 3)
    with CaptureQueriesContext(connection) as many_rows:
        response = client.get(reverse(JOBS), RETRYING)
    assert len(_shown(response)) == 13
    assert len(many_rows) == len(one_row)


def test_the_retrying_view_never_counts_the_whole_table(client, login, jobs):
    login()
    with CaptureQueriesContext(connection) as queries:
        client.get(reverse(JOBS), RETRYING)
    counts = [
        q["sql"] for q in queries if "COUNT(" in q["sql"].upper() and "backwave_django_jobrecord" in q["sql"]
    ]
    assert counts
    assert all("LIMIT" in sql.upper() for sql in counts), counts
    # The last failure is read for the rows shown, never for the rows counted.
    assert not any("jobtransition" in sql for sql in counts), counts


@pytest.mark.usefixtures("job_statistics_restored")
def test_the_retrying_view_pages_along_the_claim_index(vendor, client, login):
    """Scheduled jobs are the partial index ``backwave_job_claim``: the view never walks the table."""
    from django.contrib import admin

    if vendor != "postgresql":
        pytest.skip("the plan is checked on PostgreSQL (partial indexes, and planner statistics)")
    now = timezone.now()
    waiting = [
        JobRecordFactory.build(state=JobState.SCHEDULED, attempt=1, due_time=now + timedelta(seconds=n))
        for n in range(60)
    ]
    done = [JobRecordFactory.build(state=JobState.SUCCEEDED, terminal=True) for _ in range(6_000)]
    JobRecord.objects.bulk_create(waiting + done, batch_size=2_000)
    with connection.cursor() as cursor:
        cursor.execute(f"ANALYZE {connection.ops.quote_name(JobRecord._meta.db_table)}")
    login("view_sensitive_jobrecord")
    request = client.get(reverse(JOBS), RETRYING).wsgi_request
    changelist = admin.site.get_model_admin(JobRecord).get_changelist_instance(request)
    plan = changelist.queryset[:50].explain()
    assert "backwave_job_claim" in plan, plan
    assert "Seq Scan on backwave_django_jobrecord" not in plan, plan


# --- Retry now: the bulk action ---------------------------------------------------------------


def _select(*job_ids: uuid.UUID) -> list[int]:
    return [JobRecord.objects.get(job_id=job_id).pk for job_id in job_ids]


def test_retry_now_makes_the_selected_waiting_jobs_due_and_audits_each(client, login, jobs):
    user = login("requeue_jobrecord")
    before = timezone.now()
    # From the list of all jobs, so the selection can hold jobs that are not waiting (the Retrying
    # view's own selection only ever holds waiting jobs).
    response = client.post(
        reverse(JOBS),
        {
            "action": "retry_selected_jobs_now",
            "index": "0",
            "_selected_action": _select(jobs["later"], jobs["sooner"], jobs["fresh"], jobs["dead"]),
        },
    )
    assert response.status_code == 302
    assert [re.sub(r"…[0-9a-f]{8}", "…", text) for text in flashed(response)] == [
        "Retried now (2): send-invoice …, send-invoice …. Not waiting for a retry (2): send-invoice …, send-invoice …."
    ]
    for name in ("later", "sooner"):
        record = JobRecord.objects.get(job_id=jobs[name])
        assert record.state == JobState.SCHEDULED
        assert record.due_time <= timezone.now()
        assert record.due_time >= before - timedelta(seconds=1)
    assert JobRecord.objects.get(job_id=jobs["fresh"]).due_time > timezone.now()
    assert JobRecord.objects.get(job_id=jobs["dead"]).state == JobState.DEAD_LETTERED
    assert sorted(OperatorAudit.objects.values_list("actor", "action", "target")) == sorted(
        (user.username, "retry_now", str(jobs[name])) for name in ("later", "sooner")
    )
    assert LogEntry.objects.count() == 4  # every selected row is logged with what happened to it
    assert set(LogEntry.objects.values_list("change_message", flat=True)) == {
        "Retry selected jobs now: retried now",
        "Retry selected jobs now: not waiting for a retry",
    }


def test_retry_now_is_offered_only_to_those_allowed_and_refused_otherwise(client, login, jobs):
    due = {
        job_id: JobRecord.objects.get(job_id=job_id).due_time for job_id in (jobs["later"], jobs["sooner"])
    }
    for codenames in ((), ("cancel_jobrecord",), ("view_sensitive_jobrecord",)):
        login(*codenames)
        assert "retry_selected_jobs_now" not in client.get(reverse(JOBS), RETRYING).content.decode()
        response = client.post(
            reverse(JOBS) + "?retrying=1",
            {"action": "retry_selected_jobs_now", "index": "0", "_selected_action": _select(*due)},
        )
        assert response.status_code < 500
        assert {job_id: JobRecord.objects.get(job_id=job_id).due_time for job_id in due} == due
    assert not OperatorAudit.objects.exists()
    assert not LogEntry.objects.exists()
    login("requeue_jobrecord")
    assert "retry_selected_jobs_now" in client.get(reverse(JOBS), RETRYING).content.decode()


# --- Retry now: the job page's button ---------------------------------------------------------


def test_the_button_shows_only_for_a_waiting_job_and_only_with_requeue(client, login, jobs):
    login("requeue_jobrecord")
    assert 'data-testid="bw-retry-now"' in client.get(_page(jobs["later"])).content.decode()
    for other in ("fresh", "running", "dead"):
        assert 'data-testid="bw-retry-now"' not in client.get(_page(jobs[other])).content.decode(), other
    for codenames in ((), ("cancel_jobrecord",), ("view_sensitive_jobrecord",)):
        login(*codenames)
        assert 'data-testid="bw-retry-now"' not in client.get(_page(jobs["later"])).content.decode()


def test_the_button_retries_now_audits_logs_and_says_so(client, login, jobs):
    user = login("requeue_jobrecord")
    response = client.post(_retry_now_url(jobs["later"]))
    assert (response.status_code, response["Location"]) == (303, _page(jobs["later"]))
    assert flashed(response) == [f"Retried now (1): {named(jobs['later'])}."]
    record = JobRecord.objects.get(job_id=jobs["later"])
    assert (record.state, record.attempt) == (JobState.SCHEDULED, 1)
    assert record.due_time <= timezone.now()
    assert list(OperatorAudit.objects.values_list("actor", "action", "target")) == [
        (user.username, "retry_now", str(jobs["later"]))
    ]
    entry = LogEntry.objects.get()
    assert (entry.user_id, entry.object_id, entry.change_message) == (
        user.pk,
        str(record.pk),
        "Retry now: retried now",
    )


@pytest.mark.parametrize("name", ["fresh", "running", "dead"])
def test_the_button_on_a_job_not_waiting_for_a_retry_changes_nothing(client, login, jobs, name):
    login("requeue_jobrecord")
    before = list(JobRecord.objects.order_by("pk").values_list("pk", "state", "attempt", "due_time"))
    response = client.post(_retry_now_url(jobs[name]))
    assert response.status_code == 303
    assert re.fullmatch(r"Not waiting for a retry \(1\): send-invoice …[0-9a-f]{8}\.", flashed(response)[0])
    assert list(JobRecord.objects.order_by("pk").values_list("pk", "state", "attempt", "due_time")) == before
    assert not OperatorAudit.objects.exists()


@pytest.mark.parametrize("codenames", [(), ("cancel_jobrecord",), ("view_sensitive_jobrecord",)])
def test_the_button_without_requeue_is_403_and_changes_nothing(client, login, jobs, codenames):
    login(*codenames)
    due = JobRecord.objects.get(job_id=jobs["later"]).due_time
    assert client.post(_retry_now_url(jobs["later"])).status_code == 403
    assert JobRecord.objects.get(job_id=jobs["later"]).due_time == due
    assert not OperatorAudit.objects.exists()
    assert not LogEntry.objects.exists()


def test_the_button_answers_only_post_and_names_an_unknown_job(client, login, jobs):
    login("requeue_jobrecord")
    assert client.get(_retry_now_url(jobs["later"])).status_code == 405
    for unknown in ("999999", str(uuid.uuid4()), "not-a-job"):
        response = client.post(reverse("admin:backwave_django_jobrecord_retry_now", args=[unknown]))
        assert response.status_code == 303
        assert flashed(response)[0].startswith("No job with id")
    assert not OperatorAudit.objects.exists()
