"""The job page's policy and progress, the list's progress column, and the Discarded marker."""

from __future__ import annotations

import re
import uuid
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from backwave_django import Failure, JobState, store
from backwave_django.admin.console import is_discarded, progress_bar, read_progress
from backwave_django.core.retry import RetryPolicy
from backwave_django.models import JobRecord

from ..conftest import LEASE, enqueue, report
from ..factories import JobRecordFactory

pytestmark = pytest.mark.django_db

JOBS = "admin:backwave_django_jobrecord_changelist"
PROGRESS = {"done": 30, "total": 120, "note": "rows of tenant acme-secret", "at": "2026-01-01T00:00:05Z"}
HIDDEN = "Hidden: needs the “view sensitive” permission."


def _page(job: JobRecord | uuid.UUID) -> str:
    pk = job.pk if isinstance(job, JobRecord) else JobRecord.objects.get(job_id=job).pk
    return reverse("admin:backwave_django_jobrecord_change", args=[pk])


def _field(html: str, name: str) -> str:
    """The rendered value of one read-only field of the job page."""
    found = re.search(rf'<div class="bw-field field-{name}"><dt>[^<]*</dt><dd>(.*?)</dd>', html, re.S)
    assert found, f"no field {name}"
    return found.group(1).strip()


def _with_progress(job_id: uuid.UUID, progress: object = PROGRESS) -> JobRecord:
    JobRecord.objects.filter(job_id=job_id).update(progress=progress)
    return JobRecord.objects.get(job_id=job_id)


# --- Policy -------------------------------------------------------------------------------------


def test_the_job_page_shows_the_stored_policy(client, login):
    login()
    job = enqueue(max_attempts=3, backoff=(1.0, 5.0), timeout=30.0)
    html = client.get(_page(job)).content.decode()
    assert _field(html, "max_attempts_policy") == "3"
    assert _field(html, "backoff_policy") == "1 s, 5 s (the last repeats)"
    assert _field(html, "timeout_policy") == "30 s"
    assert _field(html, "attempt_of") == "0 / 3"


def test_a_row_older_than_the_policy_columns_shows_the_settings_defaults(client, login, backwave_settings):
    backwave_settings(RETRY={"MAX_ATTEMPTS": 4})
    login()
    job = JobRecordFactory(max_attempts=None, backoff=None, timeout=None)
    html = client.get(_page(job)).content.decode()
    assert _field(html, "max_attempts_policy") == "settings default: 4"
    assert _field(html, "backoff_policy") == "settings default"
    assert _field(html, "timeout_policy") == "none"
    assert _field(html, "attempt_of") == "0 / 4"


def test_an_enqueued_job_without_a_policy_stores_the_settings_ceiling_and_no_timeout(client, login):
    login()
    html = client.get(_page(enqueue())).content.decode()
    assert _field(html, "max_attempts_policy") == "10"
    assert _field(html, "backoff_policy") == "settings default"
    assert _field(html, "timeout_policy") == "none"


def test_fractional_seconds_are_shown_as_stored(client, login):
    login()
    html = client.get(_page(enqueue(backoff=(0.5,), timeout=2.25))).content.decode()
    assert _field(html, "backoff_policy") == "0.5 s (the last repeats)"
    assert _field(html, "timeout_policy") == "2.25 s"


# --- Progress on the job page -------------------------------------------------------------------


def test_the_job_page_draws_progress_as_a_bar_with_the_note_for_those_allowed(client, login):
    login("view_sensitive_jobrecord")
    job = _with_progress(enqueue())
    html = client.get(_page(job)).content.decode()
    shown = _field(html, "progress_view")
    assert '<progress class="bw-progress-bar" max="100" value="25.0"' in shown
    assert "30 / 120 (25%)" in shown
    assert re.search(
        r"at <span class=\"bw-when\"><time [^>]*>2026-01-01 00:00:05 UTC</time> <small[^>]*>\d+ days ago<",
        shown,
    )
    assert (
        '<span class="bw-progress-note" data-testid="bw-progress-note">rows of tenant acme-secret</span>'
        in shown
    )


def test_the_progress_note_is_hidden_without_the_permission_and_under_the_kill_switch(
    client, login, monkeypatch
):
    job = _with_progress(enqueue())
    login()
    html = client.get(_page(job)).content.decode()
    assert "acme-secret" not in html
    shown = _field(html, "progress_public")
    assert "30 / 120 (25%)" in shown  # the numbers are metadata
    assert f"Note — {HIDDEN}" in shown

    login("view_sensitive_jobrecord")
    monkeypatch.setenv("BACKWAVE_DISABLE_SENSITIVE_DATA", "true")
    html = client.get(_page(job)).content.decode()
    assert "acme-secret" not in html
    assert "30 / 120 (25%)" in _field(html, "progress_public")


def test_progress_without_a_total_is_the_count_done_and_the_note(client, login):
    login("view_sensitive_jobrecord")
    job = _with_progress(
        enqueue(), {"done": 42, "total": None, "note": "scanning", "at": "2026-01-01T00:00:00Z"}
    )
    shown = _field(client.get(_page(job)).content.decode(), "progress_view")
    assert "<progress" not in shown
    assert "42 done" in shown
    assert "scanning" in shown


def test_a_job_without_progress_says_so_and_markup_in_a_note_is_escaped(client, login):
    login("view_sensitive_jobrecord")
    html = client.get(_page(enqueue())).content.decode()
    assert _field(html, "progress_view") == "—"
    job = _with_progress(enqueue(), {**PROGRESS, "note": "<script>p()</script>"})
    html = client.get(_page(job)).content.decode()
    assert "<script>p()" not in html
    assert "&lt;script&gt;p()&lt;/script&gt;" in html


@pytest.mark.parametrize(
    ("stored", "text"),
    [
        ({"done": 5, "total": 0, "note": "", "at": "x"}, "5 / 0 (100%)"),
        ({"done": 150, "total": 100}, "150 / 100 (100%)"),
        ({"done": 1.5, "total": 4}, "1.5 / 4 (38%)"),
        ({"done": 1234567}, "1,234,567 done"),
        ({"done": "many", "total": 3}, None),
        ({"total": 3}, None),
        (["not", "a", "dict"], None),
        ("text", None),
    ],
)
def test_odd_stored_progress_never_breaks_the_page(client, login, stored, text):
    login("view_sensitive_jobrecord")
    job = _with_progress(enqueue(), stored)
    for url in (_page(job), reverse(JOBS)):
        response = client.get(url)
        assert response.status_code == 200
    progress = read_progress(stored)
    assert (progress.text if progress else None) == text
    assert progress_bar(stored) == "—" if text is None else text in progress_bar(stored)


# --- Progress in the list -----------------------------------------------------------------------


def test_the_list_shows_a_small_bar_and_never_the_note(client, login):
    login("view_sensitive_jobrecord")
    job = _with_progress(enqueue())
    html = client.get(reverse(JOBS)).content.decode()
    cell = re.search(r'<td class="field-status">(.*?)</td>', html, re.S)
    assert cell
    assert 'class="bw-progress bw-progress--compact"' in cell.group(1)
    assert 'value="25.0"' in cell.group(1)
    assert "30 / 120 (25%)" in cell.group(1)
    assert "acme-secret" not in html
    retrying = client.get(reverse(JOBS), {"retrying": "1"}).content.decode()
    assert "acme-secret" not in retrying
    assert job.progress == PROGRESS


def test_the_progress_column_costs_no_query_per_row(client, login):
    login()
    _with_progress(enqueue())
    client.get(reverse(JOBS))
    with CaptureQueriesContext(connection) as one_row:
        client.get(reverse(JOBS))
    for n in range(15):
        _with_progress(enqueue(tags=[f"t{n}"]), {**PROGRESS, "done": n})
    with CaptureQueriesContext(connection) as many_rows:
        html = client.get(reverse(JOBS)).content.decode()
    assert html.count('class="bw-progress-bar"') == 16
    assert len(many_rows) == len(one_row)


# --- The Discarded marker -----------------------------------------------------------------------


def _dead(queue: str, *, max_attempts: int, error: str = "card expired") -> JobRecord:
    """A job that failed on its first attempt and was dead-lettered there."""
    now = timezone.now()
    job = enqueue(now=now, queue=queue, max_attempts=max_attempts)
    store.claim(worker_id="w", queues=[queue], max_jobs=1, lease_duration=LEASE, now=now)
    report(job, Failure(next_due_time=None, error=error), now=now, worker="w", failure_detail="Discard: x")
    record = JobRecord.objects.get(job_id=job)
    assert record.state == JobState.DEAD_LETTERED
    return record


def _lease_expired(queue: str, *, max_attempts: int) -> JobRecord:
    now = timezone.now() - timedelta(minutes=5)
    job = enqueue(now=now, queue=queue, max_attempts=max_attempts)
    store.claim(worker_id="w", queues=[queue], max_jobs=1, lease_duration=LEASE, now=now)
    store.expire_leases(queues=[queue], now=now + 2 * LEASE, retry=RetryPolicy())
    return JobRecord.objects.get(job_id=job)


def test_a_job_dead_lettered_before_its_ceiling_is_marked_discarded(client, login):
    login()
    discarded = _dead("d", max_attempts=3, error="card expired: not retrying")
    exhausted = _dead("e", max_attempts=1)
    tab = client.get(reverse(JOBS), {"state__exact": int(JobState.DEAD_LETTERED)}).content.decode()
    rows = {}
    for job in (discarded, exhausted):
        # The job's row and the line under it (its cause).
        row = re.search(
            rf'<a href="{job.pk}/change/".*?</tr>\s*<tr class="bw-detail-row">.*?</tr>', tab, re.S
        )
        assert row, job
        rows[job.pk] = row.group(0)
    assert 'data-testid="bw-discarded"' in rows[discarded.pk]
    assert "card expired: not retrying" in rows[discarded.pk]  # the reason, as its cause
    assert 'data-testid="bw-discarded"' not in rows[exhausted.pk]

    page = client.get(_page(discarded)).content.decode()
    state = _field(page, "state_badge")
    assert 'data-state="DeadLettered"' in state
    assert re.search(
        r'<span class="bw-marker" data-testid="bw-discarded" title="[^"]*1 of 3[^"]*">Discarded</span>', state
    )
    assert "bw-discarded" not in client.get(_page(exhausted)).content.decode()


def test_a_lease_expiry_dead_letter_is_never_marked_discarded(client, login):
    login()
    expired = _lease_expired("x", max_attempts=1)
    assert expired.state == JobState.DEAD_LETTERED
    assert expired.terminal_cause == "Lease expired on attempt 1 (attempt ceiling reached)."
    # Even below its ceiling (a ceiling raised since), the lease sweep's dead letter is not a discard:
    # its log says who ended it, whatever the cause's words.
    JobRecord.objects.filter(pk=expired.pk).update(max_attempts=5, terminal_cause="reworded")
    expired.refresh_from_db()
    assert not is_discarded(expired)
    assert "bw-discarded" not in client.get(_page(expired)).content.decode()
    tab = client.get(reverse(JOBS), {"state__exact": int(JobState.DEAD_LETTERED)}).content.decode()
    assert f'href="{expired.pk}/change/"' in tab
    assert "bw-discarded" not in tab


@pytest.mark.parametrize(
    ("fields", "discarded"),
    [
        ({"attempt": 1, "max_attempts": 3}, True),
        ({"attempt": 3, "max_attempts": 3}, False),
        ({"attempt": 4, "max_attempts": 3}, False),
        ({"attempt": 2, "max_attempts": None}, True),  # settings: 10
        ({"attempt": 10, "max_attempts": None}, False),
        # The lease sweep's dead letter, below a ceiling raised since: read off the log, not the cause.
        ({"attempt": 1, "max_attempts": 3, "bw_lease_expired": True}, False),
        ({"attempt": 1, "max_attempts": 3, "bw_lease_expired": False}, True),
    ],
)
def test_the_discarded_rule(fields, discarded):
    fields = dict(fields)
    expired = fields.pop("bw_lease_expired", None)
    job = JobRecordFactory.build(state=JobState.DEAD_LETTERED, terminal=True, terminal_cause="nope", **fields)
    if expired is not None:
        job.bw_lease_expired = expired
    assert is_discarded(job) is discarded
    for other in (JobState.QUARANTINED, JobState.SCHEDULED, JobState.SUCCEEDED):
        assert not is_discarded(JobRecordFactory.build(state=other, **fields))
