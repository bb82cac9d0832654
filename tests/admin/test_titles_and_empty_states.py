"""Every console page is titled by what it shows, and an empty list says what lands in it and
what to do, instead of Django's "Select … to view" and a bare "0 results"."""

from __future__ import annotations

import re
from urllib.parse import urlencode

import pytest
from django.contrib.admin.utils import quote
from django.urls import reverse

from backwave_django import JobState
from backwave_django.models import Workflow

from ..conftest import T0, enqueue
from ..factories import JobRecordFactory, WorkerNodeFactory

pytestmark = pytest.mark.django_db

ADMIN = "/admin/backwave_django"
LISTS = {
    "jobrecord": "Jobs",
    "workflow": "Workflows",
    "workernode": "Workers",
    "recurringschedule": "Recurring schedules",
    "operatoraudit": "Operator audit",
    "observer": "Observers",
    "observerdeadletter": "Observer dead letters",
}
DJANGO_DEFAULT = re.compile(r"<h1>(Select|View|Change) [^<]*</h1>|<title>(Select|View|Change) ")


def _h1(html: str) -> str:
    found = re.search(r"<h1>([^<]*)</h1>", html)
    assert found
    return found.group(1)


@pytest.mark.parametrize(("model", "title"), LISTS.items())
def test_every_list_is_titled_by_what_it_lists_and_says_what_to_do_when_empty(admin_client, model, title):
    html = admin_client.get(f"{ADMIN}/{model}/").content.decode()
    assert not DJANGO_DEFAULT.search(html)
    assert _h1(html) == title
    empty = re.search(r'<p class="bw-note bw-empty" data-testid="bw-empty">([^<]+)</p>', html)
    assert empty, model
    assert len(empty.group(1)) > 40  # a sentence that says what lands here, not "0 results"


def test_object_pages_are_titled_by_the_object_not_view_or_change(admin_client):
    worker = WorkerNodeFactory(worker_id="host-9:42:abc")
    workflow = Workflow.objects.create(
        workflow_id="01a23ef0-0000-7000-8000-0000a1b2c3d4", name="nightly", created_at=T0
    )
    job = JobRecordFactory(wire_name="send-invoice")
    pages = {
        f"{ADMIN}/workernode/{worker.pk}/change/": "Worker host-9:42:abc",
        f"{ADMIN}/workflow/{workflow.pk}/change/": "Workflow nightly …a1b2c3d4",
        f"{ADMIN}/jobrecord/{job.pk}/change/": f"Job send-invoice …{job.job_id.hex[-8:]}",
    }
    for url, title in pages.items():
        html = admin_client.get(url).content.decode()
        assert not DJANGO_DEFAULT.search(html), url
        assert _h1(html) == title, url


def test_an_empty_failure_tab_explains_itself_and_offers_no_action_on_zero_jobs(admin_client):
    enqueue()  # a job elsewhere: the tab is empty, the table is not
    url = reverse("admin:backwave_django_jobrecord_changelist")
    for state, words in (
        (JobState.DEAD_LETTERED, "No Dead-Lettered jobs. A job lands here when it fails"),
        (JobState.QUARANTINED, "No Quarantined jobs. A job lands here when no handler"),
    ):
        html = admin_client.get(url, {"state__exact": int(state)}).content.decode()
        assert words in html
        assert 'data-testid="bw-all-' not in html  # no "Requeue all 0 …"
        assert "all 0" not in html
    retrying = admin_client.get(url, {"retrying": 1}).content.decode()
    assert "No job is waiting for a retry." in retrying
    searched = admin_client.get(url, {"q": "no-such-wire-name"}).content.decode()
    assert "No job matches this search or filter." in searched


def test_a_tab_with_jobs_shows_no_empty_state_and_keeps_its_whole_filter_actions(admin_client):
    JobRecordFactory(state=JobState.DEAD_LETTERED, terminal=True, terminal_cause="boom")
    url = reverse("admin:backwave_django_jobrecord_changelist")
    html = admin_client.get(
        f"{url}?{urlencode({'state__exact': int(JobState.DEAD_LETTERED)})}"
    ).content.decode()
    assert 'data-testid="bw-empty"' not in html
    assert 'data-testid="bw-all-requeue"' in html


def test_the_worker_page_shows_its_queues_as_a_list_and_its_times_with_their_zone(admin_client):
    worker = WorkerNodeFactory(worker_id="host-9:42:abc", queues=["billing", "emails", "<b>x</b>"])
    html = admin_client.get(f"{ADMIN}/workernode/{worker.worker_id}/change/").content.decode()
    queues = re.search(r'<ol class="bw-queue-list" data-testid="bw-worker-queues">(.*?)</ol>', html, re.S)
    assert queues
    assert re.findall(r"<li><a [^>]*>([^<]+)</a></li>", queues.group(1)) == [
        "billing",
        "emails",
        "&lt;b&gt;x&lt;/b&gt;",
    ]
    assert '["billing"' not in html  # not the raw JSON
    assert "2026-01-01 00:00:00 UTC" in html  # started and last seen, with their zone
    assert "a.m." not in html
    listing = admin_client.get(f"{ADMIN}/workernode/").content.decode()
    assert f'href="{quote(worker.worker_id)}/change/" data-testid="bw-worker-page-link"' in listing


def test_no_console_page_shows_djangos_own_date_format(admin_client):
    import uuid

    from backwave_django.models import ObserverDeadLetter, OperatorAudit

    audit = OperatorAudit.objects.create(
        actor="alice", action="cancel", target=str(uuid.uuid4()), recorded_at=T0
    )
    letter = ObserverDeadLetter.objects.create(
        observer_id="mailer",
        position=7,
        job_id=uuid.uuid4(),
        ordinal=1,
        state=JobState.SUCCEEDED,
        attempt=1,
        delivery_attempts=5,
        dead_lettered_at=T0,
    )
    worker = WorkerNodeFactory()
    for url in (
        f"{ADMIN}/operatoraudit/{audit.pk}/change/",
        f"{ADMIN}/observerdeadletter/{letter.pk}/change/",
        f"{ADMIN}/workernode/{worker.pk}/change/",
    ):
        html = admin_client.get(url).content.decode()
        assert "2026-01-01 00:00:00 UTC" in html, url
        assert not re.search(r"Jan\. 1, 2026|midnight|\d [ap]\.m\.", html), url


def test_the_dashboards_busy_hour_note_shows_its_instant_as_every_page_does():
    from types import SimpleNamespace

    from django.template.loader import render_to_string

    chart = SimpleNamespace(recording=True, counted_from=T0, width=10, height=10)
    html = render_to_string("admin/backwave_django/dashboard_chart.html", {"chart": chart})
    note = re.search(r'data-testid="bw-throughput-partial">(.*?)</span>', html, re.S)
    assert note
    assert "2026-01-01 00:00:00 UTC" in note.group(1)
