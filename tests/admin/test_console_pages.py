"""What every console page shares: its own title, instants with their zone, live refresh, and the
smaller things an operator reads at a glance (a blocked queue, "cancel requested", audit entries,
each worker's running jobs, the schedule form's choice of jobs)."""

from __future__ import annotations

import re
from datetime import UTC, timedelta

import pytest
from django.utils import timezone

from backwave_django import Failure, ScheduleSpec, store
from backwave_django.admin.display import format_instant, relative_time, short_job_id
from backwave_django.models import JobRecord, RecurringSchedule, WorkerNode

from ..conftest import LEASE, enqueue, report

pytestmark = pytest.mark.django_db

ADMIN = "/admin/backwave_django"


@pytest.fixture
def world():
    """A running job (on worker "w-1"), a dead-lettered one, a schedule, the worker's row and an audit."""
    now = timezone.now()
    running = enqueue(now=now, queue="run")
    store.claim(worker_id="w-1", queues=["run"], max_jobs=1, lease_duration=LEASE, now=now)
    dead = enqueue(now=now, queue="dl")
    store.claim(worker_id="w-1", queues=["dl"], max_jobs=1, lease_duration=LEASE, now=now)
    report(dead, Failure(next_due_time=None, error="boom"), now=now, worker="w-1")
    store.upsert_schedule(
        ScheduleSpec(schedule_id="nightly", cron="0 2 * * *", wire_name="test.echo", payload={}), now=now
    )
    WorkerNode.objects.create(
        worker_id="w-1", hostname="h", pid=7, queues=["run"], concurrency=4, started_at=now, last_seen_at=now
    )
    store.pause_queue("run", actor="alice", now=now)
    return {"running": running, "dead": dead}


def _pk(job_id) -> int:
    return JobRecord.objects.get(job_id=job_id).pk


@pytest.mark.parametrize(
    ("path", "title"),
    [
        ("/dashboard/", "Dashboard"),
        ("/jobrecord/", "Jobs"),
        ("/jobrecord/?retrying=1", "Retrying jobs"),
        ("/jobrecord/?state__exact=5", "Dead-Lettered jobs"),
        ("/jobrecord/?state__exact=6", "Quarantined jobs"),
        ("/queuesettings/", "Queues"),
        ("/recurringschedule/", "Recurring schedules"),
        ("/workernode/", "Workers"),
        ("/operatoraudit/", "Operator audit"),
    ],
)
def test_every_page_has_its_own_title(admin_client, world, path, title):
    html = admin_client.get(ADMIN + path).content.decode()
    assert f"<title>{title} | " in html
    assert "Select " not in html.split("<title>")[1].split("</title>")[0]


def test_the_detail_pages_are_titled_by_what_they_show(admin_client, world):
    job = admin_client.get(f"{ADMIN}/jobrecord/{_pk(world['dead'])}/change/").content.decode()
    assert f"<title>Job send-invoice {short_job_id(world['dead'])} | " in job
    schedule = RecurringSchedule.objects.get().pk
    assert "<title>Schedule nightly | " in admin_client.get(f"{ADMIN}/recurringschedule/{schedule}/change/").content.decode()


def test_short_ids_are_the_random_end_of_the_id_and_instants_carry_their_zone(settings):
    job_id = "0192b3c4-d5e6-7f80-9a1b-2c3d4e5f6a7b"
    assert short_job_id(job_id) == "…4e5f6a7b"
    moment = timezone.now().replace(year=2026, month=12, day=1, hour=13, minute=44, second=9, microsecond=0)
    assert format_instant(moment.astimezone(UTC)) == "2026-12-01 13:44:09 UTC"
    settings.TIME_ZONE = "Europe/Berlin"
    assert format_instant(moment.astimezone(UTC)) == "2026-12-01 14:44:09 CET"
    assert relative_time(moment - timedelta(minutes=3, seconds=10), moment) == "3 min ago"
    assert relative_time(moment + timedelta(seconds=45), moment) == "in 45 s"
    assert relative_time(moment - timedelta(hours=2, minutes=5), moment) == "2 h 5 min ago"
    assert relative_time(moment - timedelta(days=3, hours=1), moment) == "3 days ago"


def test_the_audit_counts_entries_shows_times_with_their_zone_and_links_its_targets(admin_client, world):
    store.cancel_job(world["running"], actor="bob", now=timezone.now())
    html = admin_client.get(f"{ADMIN}/operatoraudit/").content.decode()
    assert re.search(r'data-testid="bw-result-count">2 entries<', html)
    assert re.search(r"<time [^>]*>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC</time>", html)
    assert f'job <a href="/admin/backwave_django/jobrecord/{world["running"]}/change/"' in html
    assert 'queue <a href="/admin/backwave_django/jobrecord/?queue=run">run</a>' in html
    assert "p.m." not in html


def test_a_queue_with_a_limit_of_0_is_blocked_not_claiming(admin_client, world):
    store.set_concurrency_limit("dl", 0, actor="alice", now=timezone.now())
    html = admin_client.get(f"{ADMIN}/queuesettings/").content.decode()
    row = re.search(r'<tr data-queue="dl">(.*?)</tr>', html, re.S)
    assert row
    assert 'data-status="blocked"' in row.group(1)
    assert ">Blocked (limit 0)<" in row.group(1)
    assert "Claiming" not in row.group(1)
    paused = re.search(r'<tr data-queue="run">(.*?)</tr>', html, re.S)
    assert paused
    assert 'data-status="paused"' in paused.group(1)


def test_the_queues_page_shows_each_queues_latency_and_throughput(admin_client, world):
    html = admin_client.get(f"{ADMIN}/queuesettings/").content.decode()
    dl = re.search(r'<tr data-queue="dl">(.*?)</tr>', html, re.S)
    assert dl
    # One failure in the hour: a trickle, never shown as 0 per minute.
    assert 'data-testid="bw-queue-throughput"><span class="bw-nowrap">&lt; 0.1 / min' in dl.group(1)
    assert "0 succeeded · 1 failed" in dl.group(1)
    assert "nothing waiting" in dl.group(1)


def test_cancel_requested_reads_as_words_not_a_red_cross(admin_client, world):
    html = admin_client.get(f"{ADMIN}/jobrecord/{_pk(world['running'])}/change/").content.decode()
    field = re.search(r'field-cancel_requested_text"><dt>[^<]*</dt><dd>(.*?)</dd>', html, re.S)
    assert field
    assert field.group(1) == "no"
    assert "icon-no.svg" not in html
    store.cancel_job(world["running"], actor="bob", now=timezone.now())
    html = admin_client.get(f"{ADMIN}/jobrecord/{_pk(world['running'])}/change/").content.decode()
    assert "yes: the handler stops at its next check" in html


def test_the_workers_page_lists_what_each_worker_is_running(admin_client, world):
    html = admin_client.get(f"{ADMIN}/workernode/").content.decode()
    assert "1 of 4 slots" in html
    jobs = re.search(r'<ul class="bw-running" data-testid="bw-worker-jobs">(.*?)</ul>', html, re.S)
    assert jobs
    assert f'href="/admin/backwave_django/jobrecord/{_pk(world["running"])}/change/"' in jobs.group(1)
    assert short_job_id(world["running"]) in jobs.group(1)
    # The job list filters by the worker running them.
    listed = admin_client.get(f"{ADMIN}/jobrecord/", {"lease_owner": "w-1"})
    assert [job.job_id for job in listed.context["cl"].result_list] == [world["running"]]


@pytest.mark.parametrize(
    ("path", "name", "regions"),
    [
        ("/dashboard/", "dashboard", "bw-dashboard-live"),
        ("/jobrecord/", "jobs", "bw-tabs bw-object-tools bw-results bw-paginator"),
        ("/queuesettings/", "queues", "bw-queues"),
        ("/workernode/", "workers", "result_list"),
    ],
)
def test_the_live_pages_refresh_themselves_and_name_what_they_swap(admin_client, world, path, name, regions):
    html = admin_client.get(ADMIN + path).content.decode()
    toolbar = re.search(r'<div class="bw-toolbar" id="bw-live-toolbar"([^>]*)>', html)
    assert toolbar
    assert f'data-bw-live="{name}"' in toolbar.group(1)
    assert f'data-bw-live-regions="{regions}"' in toolbar.group(1)
    assert re.search(r'data-refresh-ms="\d+"', toolbar.group(1))
    for region in regions.split():
        assert f'id="{region}"' in html
    assert re.search(r'<script src="[^"]*backwave_django/live\.js" defer>', html)


def test_the_schedule_form_offers_the_registered_jobs(admin_client):
    html = admin_client.get(f"{ADMIN}/recurringschedule/add/").content.decode()
    select = re.search(r'<select name="wire_name"[^>]*>(.*?)</select>', html, re.S)
    assert select
    assert '<option value="test.echo">test.echo (queue default)</option>' in select.group(1)
    assert '<option value="" selected>— choose a registered job —</option>' in select.group(1)
