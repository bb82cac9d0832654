"""Actions over the whole filter ("Requeue all 54 Dead-Lettered"): the buttons, the confirmation
page and its count, batches through ``operator`` with one audit row per job, the second
confirmation above ``CONSOLE_BULK_LIMIT``, permissions and forged requests; and the confirmation
before "Cancel selected jobs" interrupts running jobs."""

from __future__ import annotations

import re
from datetime import timedelta
from urllib.parse import urlencode

import pytest
from django.contrib.admin.models import LogEntry
from django.urls import reverse
from django.utils import timezone

from backwave_django import Failure, JobState, store
from backwave_django.admin import job_bulk
from backwave_django.models import JobRecord, OperatorAudit

from ..conftest import LEASE, enqueue, report
from .conftest import flashed

pytestmark = pytest.mark.django_db

JOBS = "admin:backwave_django_jobrecord_changelist"
DEAD = {"state__exact": str(int(JobState.DEAD_LETTERED))}


def _all(action: str, **params: str) -> str:
    return reverse("admin:backwave_django_jobrecord_all", args=[action]) + "?" + urlencode(params)


def _dead_letter(queue: str = "dl", count: int = 1) -> list:
    """``count`` Dead-Lettered jobs in ``queue``."""
    now = timezone.now()
    ids = [enqueue(now=now, queue=queue) for _ in range(count)]
    store.claim(worker_id="w", queues=[queue], max_jobs=count, lease_duration=LEASE, now=now)
    for job_id in ids:
        report(job_id, Failure(next_due_time=None, error="card declined"), now=now, worker="w")
    return ids


def _token(page) -> str:
    match = re.search(r'<input type="hidden" name="token" value="([^"]+)">', page.content.decode())
    assert match, "the confirmation page carries what it showed as a signed token"
    return match.group(1)


def _states(ids) -> set[int]:
    return set(JobRecord.objects.filter(job_id__in=ids).values_list("state", flat=True))


# --- The buttons ---------------------------------------------------------------------------------


def test_each_filtered_list_offers_its_action_over_the_whole_filter_to_those_allowed(client, login):
    _dead_letter(count=3)
    login("requeue_jobrecord", "cancel_jobrecord")
    html = client.get(reverse(JOBS), DEAD).content.decode()
    button = re.search(
        r'<a href="([^"]+)" class="bw-whole-filter" data-testid="bw-all-requeue">([^<]+)</a>', html
    )
    assert button
    assert button.group(2) == "Requeue all 3 Dead-Lettered…"
    assert button.group(1) == _all("requeue", **DEAD).replace("&", "&amp;")
    retrying = client.get(reverse(JOBS), {"retrying": "1"}).content.decode()
    # An empty view offers nothing to act on (no "Retry all 0 now…"): its empty state says why.
    assert 'data-testid="bw-all-retry-now"' not in retrying
    assert "No job is waiting for a retry." in retrying
    by_queue = client.get(reverse(JOBS), {"queue": "dl"}).content.decode()
    assert 'data-testid="bw-all-cancel">Cancel all matching…<' in by_queue
    # Nothing over the unfiltered list, and nothing for those without the action's permission.
    assert 'data-testid="bw-all-' not in client.get(reverse(JOBS)).content.decode()
    login()
    assert 'data-testid="bw-all-' not in client.get(reverse(JOBS), DEAD).content.decode()


# --- The confirmation page -----------------------------------------------------------------------


def test_the_confirmation_page_states_the_count_and_the_filter_and_changes_nothing(client, login):
    ids = _dead_letter(count=3)
    _dead_letter(queue="other")
    login("requeue_jobrecord")
    page = client.get(_all("requeue", queue="dl", **DEAD))
    assert page.status_code == 200
    html = page.content.decode()
    assert 'data-testid="bw-confirm-all"' in html
    assert "Requeue: 3 jobs matching this filter." in html
    assert 'data-testid="bw-confirm-filter">Filter: state is Dead-Lettered, queue is dl.</p>' in html
    assert html.count('<a href="/admin/backwave_django/jobrecord/') >= 3  # the jobs, named and linked
    assert 'value="Yes, requeue 3 jobs"' in html
    assert 'name="beyond_limit"' not in html  # within the limit: one confirmation
    assert _states(ids) == {JobState.DEAD_LETTERED}
    assert not OperatorAudit.objects.exists()


def test_confirming_requeues_every_matching_job_in_batches_with_one_audit_row_each(
    client, login, monkeypatch
):
    monkeypatch.setattr(job_bulk, "BATCH", 2)  # several batches from a few rows
    ids = _dead_letter(count=5)
    untouched = _dead_letter(queue="other")
    user = login("requeue_jobrecord")
    url = _all("requeue", queue="dl", **DEAD)
    response = client.post(url, {"confirm": "yes", "token": _token(client.get(url))})
    assert response.status_code == 303
    assert response["Location"] == reverse(JOBS) + "?" + urlencode({"queue": "dl", **DEAD})
    assert _states(ids) == {JobState.SCHEDULED}
    assert _states(untouched) == {JobState.DEAD_LETTERED}
    audits = list(OperatorAudit.objects.values_list("actor", "action", "target"))
    assert sorted(audits) == sorted((user.username, "requeue", str(job_id)) for job_id in ids)
    assert LogEntry.objects.filter(user=user).count() == 5
    [message] = flashed(response)
    assert re.fullmatch(r"Requeued \(5\): (send-invoice …[0-9a-f]{8}(, )?){5}\.", message)


def test_a_long_run_goes_on_over_several_requests_and_counts_everything_at_the_end(
    client, login, monkeypatch
):
    # Every batch uses up the time budget: each request does one batch of 2, then hands over.
    monkeypatch.setattr(job_bulk, "BATCH", 2)
    monkeypatch.setattr(job_bulk, "TIME_BUDGET", 0.0)
    ids = _dead_letter(count=5)
    login("requeue_jobrecord")
    url = _all("requeue", **DEAD)
    pages = 0
    response = client.post(url, {"confirm": "yes", "token": _token(client.get(url))})
    while response.status_code == 200:
        pages += 1
        html = response.content.decode()
        assert 'data-testid="bw-continue"' in html
        assert f"Requeue: {2 * pages} of 5 jobs done so far" in html
        assert 'document.getElementById("bw-confirm-form").submit()' in html  # goes on by itself
        fields = re.findall(r'<input type="hidden" name="(\w+)" value="([^"]*)">', html)
        data: dict[str, list[str]] = {}
        for name, value in fields:
            if name != "csrfmiddlewaretoken":
                data.setdefault(name, []).append(value)
        response = client.post(url, data)
    assert (response.status_code, pages) == (303, 2)
    assert _states(ids) == {JobState.SCHEDULED}
    assert OperatorAudit.objects.count() == 5  # each job once, over three requests
    [message] = flashed(response)
    assert re.fullmatch(r"Requeued \(5\): send-invoice …[0-9a-f]{8}, and 4 more\.", message)


def test_jobs_that_match_only_after_the_page_was_drawn_are_left_alone(client, login):
    first = _dead_letter(count=2)
    login("requeue_jobrecord")
    url = _all("requeue", **DEAD)
    token = _token(client.get(url))
    later = _dead_letter()
    client.post(url, {"confirm": "yes", "token": token})
    assert _states(first) == {JobState.SCHEDULED}
    assert _states(later) == {JobState.DEAD_LETTERED}


def test_above_the_limit_it_asks_a_second_time_before_it_starts(client, login, backwave_settings):
    backwave_settings(CONSOLE_BULK_LIMIT=2)
    ids = _dead_letter(count=3)
    login("requeue_jobrecord")
    url = _all("requeue", **DEAD)
    page = client.get(url)
    html = page.content.decode()
    assert "Requeue: more than 2 jobs matching this filter." in html
    assert 'name="beyond_limit" value="yes" required' in html
    assert "more than the console&#x27;s limit of 2 jobs (CONSOLE_BULK_LIMIT)" in html
    # One confirmation is not enough: the page again, nothing changed.
    again = client.post(url, {"confirm": "yes", "token": _token(page)})
    assert again.status_code == 200
    assert 'name="beyond_limit"' in again.content.decode()
    assert _states(ids) == {JobState.DEAD_LETTERED}
    assert not OperatorAudit.objects.exists()
    # With the second confirmation it acts on all of them.
    client.post(url, {"confirm": "yes", "token": _token(page), "beyond_limit": "yes"})
    assert _states(ids) == {JobState.SCHEDULED}
    assert OperatorAudit.objects.count() == 3


def test_retry_all_now_and_cancel_all_act_only_on_the_jobs_they_apply_to(client, login):
    now = timezone.now()
    waiting = enqueue(now=now, queue="r")
    store.claim(worker_id="w", queues=["r"], max_jobs=1, lease_duration=LEASE, now=now)
    report(waiting, Failure(next_due_time=now + timedelta(hours=1), error="later"), now=now, worker="w")
    fresh = enqueue(now=now, queue="r", due_time=now + timedelta(hours=1))
    dead = _dead_letter(queue="r")
    login("requeue_jobrecord", "cancel_jobrecord")

    url = _all("retry-now", retrying="1")
    client.post(url, {"confirm": "yes", "token": _token(client.get(url))})
    assert JobRecord.objects.get(job_id=waiting).due_time <= timezone.now()
    assert list(OperatorAudit.objects.values_list("action", flat=True)) == ["retry_now"]

    url = _all("cancel", queue="r")
    page = client.get(url).content.decode()
    assert "Cancel: 2 jobs matching this filter." in page  # the Dead-Lettered one cannot be cancelled
    client.post(url, {"confirm": "yes", "token": _token(client.get(url))})
    assert _states([waiting, fresh]) == {JobState.CANCELLED}
    assert _states(dead) == {JobState.DEAD_LETTERED}


# --- Permissions and forged requests -------------------------------------------------------------


@pytest.mark.parametrize(
    ("action", "needs"), [("requeue", "requeue_jobrecord"), ("cancel", "cancel_jobrecord")]
)
def test_without_the_permission_neither_the_page_nor_the_action_is_allowed(client, login, action, needs):
    ids = _dead_letter(count=2)
    other = "cancel_jobrecord" if needs == "requeue_jobrecord" else "requeue_jobrecord"
    login(other)
    url = _all(action, queue="dl")
    assert client.get(url).status_code == 403
    response = client.post(url, {"confirm": "yes", "token": "forged", "beyond_limit": "yes"})
    assert response.status_code == 403
    assert _states(ids) == {JobState.DEAD_LETTERED}
    assert not OperatorAudit.objects.exists()


@pytest.mark.parametrize(
    ("params", "data"),
    [
        ({"queue": "dl"}, {"confirm": "yes"}),  # no token of what was confirmed
        ({"queue": "dl"}, {"confirm": "yes", "token": "not-a-token"}),
        ({"queue": "dl"}, {"confirm": "yes", "through": "999999999"}),  # the old form, unsigned
        ({"queue": "dl"}, {"token": "whatever"}),  # not confirmed
        ({"queue": "dl", "nonsense__field": "1"}, {"confirm": "yes", "token": "x"}),
        ({}, {"confirm": "yes", "token": "x"}),  # no filter: the whole table is not an option
    ],
    ids=["no-token", "bad-token", "unsigned-through", "unconfirmed", "bad-filter", "no-filter"],
)
def test_a_malformed_or_unconfirmed_post_changes_nothing_and_never_fails(client, login, params, data):
    ids = _dead_letter(count=2)
    login("requeue_jobrecord")
    response = client.post(_all("requeue", **params), data)
    assert response.status_code in (200, 303)
    assert _states(ids) == {JobState.DEAD_LETTERED}
    assert not OperatorAudit.objects.exists()


def test_an_unknown_action_is_404_and_a_get_never_acts(client, login):
    ids = _dead_letter()
    login("requeue_jobrecord", "cancel_jobrecord")
    assert client.post(_all("delete", **DEAD), {"confirm": "yes", "through": "1"}).status_code == 404
    response = client.get(_all("requeue", **DEAD) + "&confirm=yes&through=999999999")
    assert response.status_code < 500
    assert _states(ids) == {JobState.DEAD_LETTERED}


# --- Cancelling running jobs asks first ----------------------------------------------------------


def test_cancel_selected_asks_before_interrupting_running_jobs(client, login):
    now = timezone.now()
    running = enqueue(now=now, queue="run")
    store.claim(worker_id="w-7", queues=["run"], max_jobs=1, lease_duration=LEASE, now=now)
    waiting = enqueue(now=now, queue="run", due_time=now + timedelta(hours=1))
    login("cancel_jobrecord")
    selected = [str(JobRecord.objects.get(job_id=job_id).pk) for job_id in (running, waiting)]
    post = {"action": "cancel_selected_jobs", "index": "0", "_selected_action": selected}
    page = client.post(reverse(JOBS), post)
    assert page.status_code == 200
    html = page.content.decode()
    assert "1 of the 2 selected jobs are running now." in html
    assert "on w-7, lease until" in html
    assert '<input type="hidden" name="bw_confirmed" value="yes">' in html
    assert not OperatorAudit.objects.exists()
    assert not JobRecord.objects.get(job_id=running).cancel_requested

    response = client.post(reverse(JOBS), {**post, "bw_confirmed": "yes"})
    assert response.status_code == 302
    assert JobRecord.objects.get(job_id=running).cancel_requested
    assert JobRecord.objects.get(job_id=waiting).state == JobState.CANCELLED
    assert OperatorAudit.objects.count() == 2


def test_cancel_selected_without_running_jobs_does_not_ask(client, login):
    now = timezone.now()
    waiting = enqueue(now=now, due_time=now + timedelta(hours=1))
    login("cancel_jobrecord")
    pk = str(JobRecord.objects.get(job_id=waiting).pk)
    response = client.post(
        reverse(JOBS), {"action": "cancel_selected_jobs", "index": "0", "_selected_action": [pk]}
    )
    assert response.status_code == 302
    assert JobRecord.objects.get(job_id=waiting).state == JobState.CANCELLED
