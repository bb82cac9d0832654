"""The job list's search box finds what the console shows (monitor/search.py): the short id as
displayed, the sequence number in a job's URL, the full id, error text (failure detail only for
those allowed sensitive content) and argument values; a bounded scan says so."""

from __future__ import annotations

import re
import uuid

import pytest
from django.urls import reverse

from backwave_django import Failure
from backwave_django.admin.display import short_job_id
from backwave_django.models import JobRecord
from backwave_django.monitor import search

from ..conftest import enqueue, lease_one, report
from .conftest import flashed

pytestmark = pytest.mark.django_db

JOBS = "admin:backwave_django_jobrecord_changelist"


def _shown(html: str) -> list[str]:
    """The short ids of the jobs the list's rows link to (each row links to ``<sequence>/change/``)."""
    sequences = dict.fromkeys(int(n) for n in re.findall(r'href="(\d+)/change/"', html))
    ids = dict(JobRecord.objects.filter(pk__in=sequences).values_list("pk", "job_id"))
    return [short_job_id(ids[n]) for n in sequences]


def _search(client, term: str) -> list[str]:
    response = client.get(reverse(JOBS), {"q": term})
    assert response.status_code == 200
    return _shown(response.content.decode())


def _failed(detail: str, cause: str = "card declined") -> uuid.UUID:
    job_id = enqueue(queue="pay", max_attempts=1, payload={"args": [], "kwargs": {"order_id": 42}})
    lease_one(job_id)
    report(job_id, Failure(next_due_time=None, error=cause), failure_detail=detail)
    return job_id


def test_each_needle_the_console_shows_finds_the_job(client, login):
    wanted = _failed("PaymentError: insufficient funds")
    enqueue(queue="pay", payload={"args": [], "kwargs": {"order_id": 7}})
    shown = short_job_id(wanted)
    login()
    # What the list shows for the job, typed back into the search box.
    listed = client.get(reverse(JOBS)).content.decode()
    assert shown in listed
    sequence = JobRecord.objects.get(job_id=wanted).pk
    assert f"{sequence}/change/" in listed  # the number in the job's URL
    for term in (shown, shown[1:], str(sequence), str(wanted), "card declined", "order_id=42"):
        assert _search(client, term) == [shown], term


def test_failure_detail_is_searched_only_for_those_allowed_sensitive_content(client, login):
    wanted = _failed("PaymentError: insufficient funds")
    login()
    assert _search(client, "insufficient funds") == []
    login("view_sensitive_jobrecord")
    assert _search(client, "insufficient funds") == [short_job_id(wanted)]


def test_a_search_that_scanned_only_the_newest_jobs_says_so(client, login, monkeypatch):
    monkeypatch.setattr(search, "SCAN_LIMIT", 1)
    _failed("x")
    newest = _failed("x")
    login()
    response = client.get(reverse(JOBS), {"q": "declined"})
    assert _shown(response.content.decode()) == [short_job_id(newest)]
    assert any("of the newest 1 jobs only were searched" in message for message in flashed(response))


def test_the_search_box_says_what_it_takes(client, login):
    login()
    html = client.get(reverse(JOBS)).content.decode()
    assert "short id (…b2c92a1a) or sequence number; key=value for an argument" in html
