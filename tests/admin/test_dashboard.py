"""The Dashboard page: permission, counts and their links, health, chart, previews, live fragment, escaping."""

from __future__ import annotations

import re
from datetime import timedelta
from html import unescape
from urllib.parse import parse_qs, urlsplit

import pytest
from django.contrib.auth.models import Permission, User
from django.urls import reverse
from django.utils import timezone

from backwave_django import Failure, JobState, Unroutable, store
from backwave_django.models import JobRecord, RecurringSchedule, WorkerNode

from ..conftest import LEASE, enqueue, report

pytestmark = pytest.mark.django_db

DASHBOARD = "admin:backwave_django_dashboard_changelist"
FRAGMENT = "admin:backwave_django_dashboard_fragment"
XSS = "<script>alert(1)</script>"


def _staff(*codenames: str) -> User:
    user = User.objects.create_user("staff-" + "-".join(codenames or ("none",)), password="pw", is_staff=True)
    user.user_permissions.set(
        Permission.objects.filter(content_type__app_label="backwave_django", codename__in=codenames)
    )
    return user


@pytest.fixture
def viewer(client):
    client.force_login(_staff("view_jobrecord"))
    return client


def _run(job_id, outcome=None, *, now, worker="w-1"):
    """Claim ``job_id``'s queue (the job must be its only due job) and report ``outcome``."""
    queue = JobRecord.objects.get(job_id=job_id).queue
    store.claim(worker_id=worker, queues=[queue], max_jobs=1, lease_duration=LEASE, now=now)
    if outcome is not None:
        report(job_id, outcome, now=now, worker=worker)


@pytest.fixture
def busy():
    """A little of everything, on the real clock (the page reads it)."""
    now = timezone.now()
    dead = enqueue(now=now, due_time=now, queue="mail", wire_name="send-mail")
    _run(dead, Failure(next_due_time=None, error="smtp refused"), now=now)
    quarantined = enqueue(now=now, due_time=now, queue="mail", wire_name="gone-away")
    _run(quarantined, Unroutable(reason="no handler registered for wire name 'gone-away'"), now=now)
    running = enqueue(now=now, due_time=now, queue="mail")
    _run(running, now=now, worker="host-1:42:abc")
    parent = enqueue(now=now, due_time=now + timedelta(hours=1), queue="mail")
    enqueue(now=now, due_time=now, queue="mail", parents=(parent,))
    enqueue(now=now, due_time=now - timedelta(minutes=3), queue="reports")
    store.pause_queue("reports", actor="op", now=now)
    store.set_concurrency_limit("mail", 1, actor="op", now=now)
    return {"dead": dead, "quarantined": quarantined, "running": running, "now": now}


# --- Permission ------------------------------------------------------------------------------


@pytest.mark.parametrize("name", [DASHBOARD, FRAGMENT])
def test_anonymous_visitors_are_sent_to_the_login_page(client, name):
    response = client.get(reverse(name))
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("admin:login"))


@pytest.mark.parametrize("name", [DASHBOARD, FRAGMENT])
def test_staff_without_view_jobrecord_are_refused(client, name):
    client.force_login(_staff("view_queuesettings"))
    assert client.get(reverse(name)).status_code == 403


@pytest.mark.parametrize("name", [DASHBOARD, FRAGMENT])
def test_view_jobrecord_is_enough_to_see_the_dashboard(viewer, name):
    assert viewer.get(reverse(name)).status_code == 200


def test_the_app_index_links_the_dashboard_only_for_those_who_may_see_it(client):
    url = reverse(DASHBOARD)
    assert url == "/admin/backwave_django/dashboard/"
    client.force_login(_staff("view_jobrecord"))
    assert url in client.get(reverse("admin:app_list", args=["backwave_django"])).content.decode()
    client.force_login(_staff("view_queuesettings"))
    assert url not in client.get(reverse("admin:app_list", args=["backwave_django"])).content.decode()


def test_the_dashboard_offers_no_add_change_or_delete_pages(viewer):
    page = viewer.get(reverse(DASHBOARD)).content.decode()
    assert "/admin/backwave_django/dashboard/add/" not in page
    assert viewer.get("/admin/backwave_django/dashboard/add/").status_code == 404


# --- Counts ----------------------------------------------------------------------------------


def _cell_links(html: str, queue: str) -> dict[int, tuple[str, str]]:
    """{state value: (count text, href)} for the queue's row of the counts table."""
    row = re.search(rf'data-testid="bw-counts-row" data-queue="{re.escape(queue)}">(.*?)</tr>', html, re.S)
    assert row, f"no counts row for {queue!r}"
    cells = re.findall(
        r'<a href="([^"]+)" data-testid="bw-count" data-state="(\d)">([^<]+)</a>', row.group(1)
    )
    return {int(state): (count, unescape(href)) for href, state, count in cells}


def test_counts_cover_every_state_including_awaiting_parent_and_link_to_the_filtered_list(viewer, busy):
    html = viewer.get(reverse(DASHBOARD)).content.decode()
    cells = _cell_links(html, "mail")

    assert {state: count for state, (count, _) in cells.items()} == {
        JobState.SCHEDULED: "1",
        JobState.AWAITING_PARENT: "1",
        JobState.LEASED: "1",
        JobState.SUCCEEDED: "0",
        JobState.CANCELLED: "0",
        JobState.DEAD_LETTERED: "1",
        JobState.QUARANTINED: "1",
    }
    for state in JobState:
        _, href = cells[state]
        assert urlsplit(href).path == reverse("admin:backwave_django_jobrecord_changelist")
        assert parse_qs(urlsplit(href).query) == {"queue": ["mail"], "state__exact": [str(int(state))]}
    assert "Awaiting Parent" in html


def test_a_count_link_opens_the_job_list_filtered_to_exactly_those_jobs(viewer, busy):
    html = viewer.get(reverse(DASHBOARD)).content.decode()
    _, href = _cell_links(html, "mail")[JobState.DEAD_LETTERED]

    listing = viewer.get(href)

    assert listing.status_code == 200
    shown = list(listing.context["cl"].result_list)
    assert [job.job_id for job in shown] == [busy["dead"]]


# --- Health ----------------------------------------------------------------------------------


def _section(html: str, testid: str) -> str:
    match = re.search(
        rf'data-testid="{testid}"(.*?)</(?:div|section)>\s*(?:<div class="bw-health-item|</div>|<section|$)',
        html,
        re.S,
    )
    assert match, f"no section {testid}"
    return match.group(1)


def test_health_names_paused_and_capped_queues(viewer, busy):
    html = viewer.get(reverse(DASHBOARD)).content.decode()
    assert "reports" in _section(html, "bw-health-paused")
    capped = _section(html, "bw-health-at-limit")
    assert "mail" in capped
    assert "1 / 1 leased" in capped


def test_health_shows_queue_latency_of_the_oldest_due_unclaimed_job(viewer, busy):
    html = viewer.get(reverse(DASHBOARD)).content.decode()
    row = re.search(r'data-testid="bw-latency-row" data-queue="reports">(.*?)</tr>', html, re.S)
    assert row
    assert re.search(r"3 min \d\d s", row.group(1))
    assert "paused" in row.group(1)


def test_health_reports_schedules_with_errors_or_skipped_ticks(viewer):
    RecurringSchedule.objects.create(
        schedule_id="lost",
        cron="0 0 2 * * *",
        time_zone="Mars/Olympus",
        wire_name="x",
        payload={"args": [], "kwargs": {}},
        cursor=timezone.now(),
        skipped_ticks=["2026-01-01T02:00:00Z"],
    )
    html = viewer.get(reverse(DASHBOARD)).content.decode()
    assert 'data-testid="bw-schedules-errored">1 errored' in html
    assert 'data-testid="bw-schedules-skipped">1 skipped tick<' in html
    assert "Mars/Olympus" in html


def test_health_tells_live_workers_from_stale_ones(viewer):
    now = timezone.now()
    for name, seen in (("live-one", now), ("stale-one", now - timedelta(hours=1))):
        WorkerNode.objects.create(
            worker_id=name,
            hostname="h",
            pid=1,
            queues=["default"],
            concurrency=2,
            started_at=now,
            last_seen_at=seen,
        )
    html = viewer.get(reverse(DASHBOARD)).content.decode()
    assert 'data-testid="bw-workers-live">1 live' in html
    assert 'data-testid="bw-workers-stale">1 stale' in html
    flags = dict(
        re.findall(
            r'data-live="(true|false)">\s*<span class="bw-dot" aria-hidden="true"></span>'
            r'<a class="bw-mono bw-breakable" href="[^"]+" data-testid="bw-worker-link">([^<]+)',
            html,
        )
    )
    assert flags == {"true": "live-one", "false": "stale-one"}
    # Each worker links to its own page.
    assert 'href="/admin/backwave_django/workernode/live-one/change/"' in html


# --- Throughput, previews, fragment ---------------------------------------------------------


def test_the_throughput_chart_is_an_inline_svg_with_title_axes_and_legend(viewer, busy):
    html = viewer.get(reverse(DASHBOARD)).content.decode()
    svg = re.search(r'<svg id="bw-throughput-chart".*?</svg>', html, re.S)
    assert svg
    assert 'role="img"' in svg.group(0)
    assert '<title id="bw-chart-title">' in svg.group(0)
    assert 'viewBox="0 0 640 220"' in svg.group(0)
    assert set(re.findall(r'data-series="(\w+)"', svg.group(0))) == {
        "succeeded",
        "failed",
        "dead_lettered",
    }
    legend = _section(html, "bw-throughput-legend")
    assert "Succeeded" in legend
    assert "Failed, retried" in legend
    assert "Dead-Lettered" in legend
    # One Dead-Lettered in the hour.
    totals = re.findall(r'data-testid="bw-throughput-total">([^<]+)<', html)
    assert totals == ["0", "0", "1"]


def test_the_page_needs_nothing_from_another_origin(viewer, busy):
    html = viewer.get(reverse(DASHBOARD)).content.decode()
    external = list(re.findall(r'(?:src|href)="(https?:)?//[^"]*"', html))
    assert external == []
    assert re.search(r'src="[^"]*backwave_django/live\.js"', html)
    # The pause button only makes sense with the script: it starts hidden and the script shows it.
    toggle = re.search(r'<button[^>]*id="bw-refresh-toggle"[^>]*>', html)
    assert toggle
    assert " hidden" in toggle.group(0)
    assert 'id="bw-reload"' in html


def test_executing_now_shows_the_lease_owner_and_a_countdown(viewer, busy):
    html = viewer.get(reverse(DASHBOARD)).content.decode()
    row = re.search(r'data-testid="bw-executing-row">(.*?)</tr>', html, re.S)
    assert row
    assert "host-1:42:abc" in row.group(1)
    assert re.search(r'data-testid="bw-countdown">(\d+ s|\d min \d\d s) left<', row.group(1))
    assert f"<code title=\"{busy['running']}\">…{busy['running'].hex[-8:]}</code>" in row.group(1)


def test_needs_attention_lists_the_newest_dead_lettered_and_quarantined_jobs(viewer, busy):
    html = viewer.get(reverse(DASHBOARD)).content.decode()
    rows = re.findall(r'data-testid="bw-attention-row"[^>]*>(.*?)</tr>\s*<tr class="bw-detail-row">(.*?)</tr>', html, re.S)
    assert len(rows) == 2
    joined = "".join(row + cause for row, cause in rows)
    assert f"…{busy['dead'].hex[-8:]}</code>" in joined
    assert f"…{busy['quarantined'].hex[-8:]}</code>" in joined
    assert "smtp refused" in joined  # the cause, on the line under its job
    assert 'data-testid="bw-dead-lettered-total">1 Dead-Lettered' in html


def test_the_fragment_is_the_live_part_alone_and_never_cached(viewer, busy):
    response = viewer.get(reverse(FRAGMENT))
    body = response.content.decode()
    assert "no-store" in response["Cache-Control"]
    assert "<html" not in body
    assert "bw-refresh-toggle" not in body
    assert 'id="bw-counts"' in body
    assert 'id="bw-health"' in body
    assert 'id="bw-throughput"' in body
    page = viewer.get(reverse(DASHBOARD)).content.decode()
    assert f'data-fragment-url="{reverse(FRAGMENT)}"' in page


def test_an_empty_store_renders_zeroed_signals_and_empty_previews(viewer):
    html = viewer.get(reverse(DASHBOARD)).content.decode()
    assert "No jobs yet." in html
    assert "Nothing is running." in html
    assert "Nothing Dead-Lettered or Quarantined." in html
    assert "None: every queue is claiming." in html
    assert "No worker has registered." in html


# --- Escaping --------------------------------------------------------------------------------


def test_queue_wire_worker_and_schedule_names_are_escaped(viewer):
    now = timezone.now()
    job = enqueue(now=now, due_time=now, queue=XSS, wire_name=XSS)
    _run(job, Failure(next_due_time=None, error=XSS), now=now, worker=XSS)
    leased = enqueue(now=now, due_time=now, queue=XSS, wire_name=XSS)
    _run(leased, now=now, worker=XSS)
    store.pause_queue(XSS, actor="op", now=now)
    WorkerNode.objects.create(
        worker_id=XSS, hostname=XSS, pid=1, queues=[XSS], concurrency=1, started_at=now, last_seen_at=now
    )
    RecurringSchedule.objects.create(
        schedule_id=XSS, cron="nonsense", wire_name=XSS, payload={}, cursor=now, skipped_ticks=[XSS]
    )

    for name in (DASHBOARD, FRAGMENT):
        html = viewer.get(reverse(name)).content.decode()
        assert XSS not in html
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html


@pytest.mark.parametrize(
    ("build_seconds", "interval_ms"),
    [(0.01, 5000), (0.25, 5000), (0.5, 10_000), (1.0, 20_000), (10.0, 60_000)],
)
def test_live_refresh_slows_down_when_the_page_is_slow_to_build(build_seconds, interval_ms):
    from backwave_django.admin.dashboard import refresh_interval_ms

    assert refresh_interval_ms(build_seconds) == interval_ms


def test_the_page_tells_the_script_how_often_to_refresh(viewer):
    html = viewer.get(reverse(DASHBOARD)).content.decode()
    assert re.search(r'id="bw-dashboard"[^>]*data-refresh-ms="\d+"', html)
    assert re.search(r'id="bw-summary"[^>]*data-refresh-ms="\d+"', html)
