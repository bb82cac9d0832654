"""The job list and the job detail page: columns, filters, search, failures tabs, timeline, edges."""

from __future__ import annotations

import re
import uuid
from datetime import timedelta
from urllib.parse import urljoin

import pytest
from django.urls import reverse
from django.utils import timezone

from backwave_django import Failure, JobState, store
from backwave_django.admin.job_list import COUNT_CAP, EstimatedCountPaginator
from backwave_django.core.outcomes import Unroutable
from backwave_django.models import JobRecord

from ..conftest import LEASE, enqueue, report
from ..factories import JobRecordFactory, JobTagFactory, JobTransitionFactory

pytestmark = pytest.mark.django_db

JOBS = "admin:backwave_django_jobrecord_changelist"


def _change(job_id: uuid.UUID) -> str:
    return reverse("admin:backwave_django_jobrecord_change", args=[JobRecord.objects.get(job_id=job_id).pk])


def _shown(response) -> list[uuid.UUID]:
    return [job.job_id for job in response.context["cl"].result_list]


def _fail(job_id: uuid.UUID, queue: str, *, now, outcome=None, detail: str | None = "Boom: trace") -> None:
    store.claim(worker_id="w", queues=[queue], max_jobs=32, lease_duration=LEASE, now=now)
    report(
        job_id,
        outcome or Failure(next_due_time=None, error="kept failing"),
        now=now,
        worker="w",
        failure_detail=detail,
    )


@pytest.fixture
def failures():
    """One Dead-Lettered job (queue "dl") and one Quarantined job (queue "q"), plus a scheduled one."""
    now = timezone.now()
    dead = enqueue(now=now, queue="dl", tags=["vip"])
    _fail(dead, "dl", now=now)
    quarantined = enqueue(now=now, queue="q", wire_name="gone")
    _fail(
        quarantined,
        "q",
        now=now,
        outcome=Unroutable(reason="no handler registered for wire name 'gone'"),
        detail=None,
    )
    pending = enqueue(now=now, due_time=now + timedelta(hours=1))
    return {"dead": dead, "quarantined": quarantined, "pending": pending}


# --- The list ----------------------------------------------------------------------------------


def test_the_list_is_newest_first_with_short_copyable_ids_and_times_with_their_zone(client, login):
    login()
    first, second = enqueue(), enqueue()
    response = client.get(reverse(JOBS))
    assert _shown(response) == [second, first]
    html = response.content.decode()
    assert response.context["title"] == "Jobs"  # not Django's "Select job to view"
    assert f'data-bw-copy="{second}"' in html
    link = re.search(rf'<a href="([^"]+)" class="bw-job-link" title="send-invoice {second}">send-invoice</a>', html)
    assert link
    assert client.get(urljoin(reverse(JOBS), link.group(1))).context["original"].job_id == second
    # The short id is the random end of the id: time-ordered ids share their start.
    assert f'<code title="{second}">…{second.hex[-8:]}</code>' in html
    # The due time: the current time zone (UTC here) with its name, never broken, and how long ago.
    assert re.search(
        r'<time class="bw-time" datetime="2026-01-01T00:00:00\+00:00" title="2026-01-01T00:00:00Z">'
        r"2026-01-01 00:00:00 UTC</time> <small class=\"bw-ago\">due \d+ days ago</small>",
        html,
    )
    assert "attempt 0 / 10" in html  # attempt / the retry ceiling


def test_tags_render_as_filter_links_and_are_fetched_in_one_query(
    client, login, django_assert_max_num_queries
):
    login()
    for n in range(5):
        enqueue(tags=[f"label-{n}", ("tenant", "acme")])
    client.get(reverse(JOBS))  # warm the session and permission caches
    with django_assert_max_num_queries(14):
        html = client.get(reverse(JOBS)).content.decode()
    assert '<a class="bw-tag" href="?tk=tenant&amp;tv=acme">tenant:acme</a>' in html
    assert '<a class="bw-tag" href="?tl=label-3">label-3</a>' in html


def test_the_detail_page_tags_link_to_the_filtered_list(client, login):
    login()
    job = enqueue(tags=[("tenant", "acme")])
    html = client.get(_change(job)).content.decode()
    assert (
        '<a class="bw-tag" href="/admin/backwave_django/jobrecord/?tk=tenant&amp;tv=acme">tenant:acme</a>'
        in html
    )


def test_the_detail_page_shows_the_trace_context_it_was_enqueued_with(client, login):
    login()
    traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    traced, untraced = enqueue(trace_context=traceparent), enqueue()
    assert f"<code>{traceparent}</code>" in client.get(_change(traced)).content.decode()
    html = client.get(_change(untraced)).content.decode()
    assert "trace context" in html.lower()
    assert traceparent not in html


def test_the_number_of_queries_does_not_grow_with_the_rows_shown(client, login, django_assert_num_queries):
    login()
    enqueue(tags=["a"])
    client.get(reverse(JOBS))
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as one_row:
        client.get(reverse(JOBS))
    for n in range(20):
        enqueue(tags=[f"t{n}", ("k", str(n))], wire_name=f"w{n}")
    with CaptureQueriesContext(connection) as many_rows:
        client.get(reverse(JOBS))
    assert len(many_rows) == len(one_row)


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ({"state__exact": str(int(JobState.DEAD_LETTERED))}, ["dead"]),
        ({"terminal_class": "1"}, ["quarantined", "dead"]),
        ({"terminal_class": "0"}, []),
        ({"queue": "q"}, ["quarantined"]),
        ({"wire_name": "gone"}, ["quarantined"]),
        ({"tl": "vip"}, ["dead"]),
        ({"queue": "dl", "tl": "vip"}, ["dead"]),
        ({"tl": "nope"}, []),
    ],
)
def test_filters(client, login, failures, query, expected):
    login()
    response = client.get(reverse(JOBS), query)
    assert response.status_code == 200
    assert _shown(response) == [failures[name] for name in expected]


def test_a_keyed_tag_filter_keeps_colons_and_equals_signs_intact(client, login):
    login()
    odd = enqueue(tags=[("ratio", "3:1=x"), "a:b"])
    enqueue(tags=[("ratio", "3")])
    assert _shown(client.get(reverse(JOBS), {"tk": "ratio", "tv": "3:1=x"})) == [odd]
    assert _shown(client.get(reverse(JOBS), {"tl": "a:b"})) == [odd]


def test_the_schedule_filter_deep_links_to_a_schedules_instances(client, login):
    login()
    minted = JobRecordFactory(schedule_id="nightly")
    JobRecordFactory()
    assert _shown(client.get(reverse(JOBS), {"schedule_id": "nightly"})) == [minted.job_id]


@pytest.mark.parametrize(
    ("term", "expected"),
    [
        ("job id", ["pending"]),
        ("gone", ["quarantined"]),
        ("vip", ["dead"]),
        ("send-inv", ["pending", "dead"]),
    ],
)
def test_search_by_job_id_wire_name_or_tag(client, login, failures, term, expected):
    login()
    term = str(failures["pending"]) if term == "job id" else term
    assert _shown(client.get(reverse(JOBS), {"q": term})) == [failures[name] for name in expected]


def test_search_by_key_value_tag(client, login):
    login()
    acme = enqueue(tags=[("tenant", "acme")])
    enqueue(tags=[("tenant", "other")])
    assert _shown(client.get(reverse(JOBS), {"q": "tenant:acme"})) == [acme]


def test_failures_are_two_tabs_with_counts_and_a_cause_column(client, login, failures):
    login()
    html = client.get(reverse(JOBS)).content.decode()
    for testid, count in (("bw-failures-dead-lettered", 1), ("bw-failures-quarantined", 1)):
        tab = re.search(rf'<a href="([^"]+)"[^>]*data-testid="{testid}"[^>]*>(.*?)</a>', html, re.S)
        assert tab, testid
        assert f'<span class="bw-count">{count}</span>' in tab.group(2)
    assert 'data-testid="bw-failures-all"' in html
    assert 'data-testid="bw-cause"' not in html  # the cause line belongs to the failure lists

    dead_tab = client.get(reverse(JOBS), {"state__exact": int(JobState.DEAD_LETTERED)})
    assert _shown(dead_tab) == [failures["dead"]]
    assert dead_tab.context["title"] == "Dead-Lettered jobs"
    html = dead_tab.content.decode()
    # The cause is a line of its own under its job's row, across the table after the checkbox.
    detail = re.search(r'<tr class="bw-detail-row">(.*?)</tr>', html, re.S)
    assert detail
    assert '<td colspan="4" class="bw-detail">' in detail.group(1)
    assert 'data-testid="bw-cause" title="kept failing">kept failing</span>' in detail.group(1)
    assert "Dead-Lettered: ran and kept failing." in html
    assert "requeue_selected_jobs" not in html  # the viewer may not requeue: no action offered

    quarantine_tab = client.get(reverse(JOBS), {"state__exact": int(JobState.QUARANTINED)})
    assert _shown(quarantine_tab) == [failures["quarantined"]]
    assert "no handler registered for wire name &#x27;gone&#x27;" in quarantine_tab.content.decode()


def test_the_failure_tabs_offer_bulk_requeue_to_those_allowed(client, login, failures):
    login("requeue_jobrecord")
    html = client.get(reverse(JOBS), {"state__exact": int(JobState.QUARANTINED)}).content.decode()
    assert "requeue_selected_jobs" in html


def test_tags_and_causes_are_escaped_in_the_list(client, login):
    login()
    job = JobRecordFactory(state=JobState.DEAD_LETTERED, terminal=True, terminal_cause="<script>c()</script>")
    JobTagFactory(job=job, value="<script>t()</script>")
    html = client.get(reverse(JOBS), {"state__exact": int(JobState.DEAD_LETTERED)}).content.decode()
    assert "<script>t()" not in html
    assert "<script>c()" not in html
    assert "&lt;script&gt;t()" in html
    assert "&lt;script&gt;c()" in html


# --- Counting without COUNT(*) -----------------------------------------------------------------


def test_the_list_never_counts_the_whole_table(client, login, failures):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    login()
    with CaptureQueriesContext(connection) as queries:
        client.get(reverse(JOBS))
        client.get(reverse(JOBS), {"queue": "dl"})
    counts = [
        q["sql"] for q in queries if "COUNT(" in q["sql"].upper() and "backwave_django_jobrecord" in q["sql"]
    ]
    assert counts, "expected capped counts"
    assert all("LIMIT" in sql.upper() for sql in counts), counts


def test_the_paginator_caps_a_filtered_count_and_says_so(monkeypatch):
    monkeypatch.setattr("backwave_django.admin.job_list.COUNT_CAP", 3)
    for _ in range(5):
        JobRecordFactory()
    paginator = EstimatedCountPaginator(JobRecord.objects.filter(queue="default").order_by("-sequence"), 2)
    assert (paginator.count, paginator.count_label, paginator.num_pages) == (3, "3+", 2)
    exact = EstimatedCountPaginator(JobRecord.objects.filter(queue="nope").order_by("-sequence"), 2)
    assert (exact.count, exact.count_label) == (0, "0")


def test_the_paginator_uses_the_planner_estimate_for_an_unfiltered_large_table(monkeypatch):
    monkeypatch.setattr("backwave_django.admin.job_list._estimated_rows", lambda queryset: 2_000_000)
    paginator = EstimatedCountPaginator(JobRecord.objects.order_by("-sequence"), 50)
    assert (paginator.count, paginator.count_label) == (2_000_000, "about 2,000,000")
    monkeypatch.setattr("backwave_django.admin.job_list._estimated_rows", lambda queryset: COUNT_CAP - 1)
    small = EstimatedCountPaginator(JobRecord.objects.order_by("-sequence"), 50)
    assert (small.count, small.count_label) == (0, "0")  # a small estimate is not trusted: counted


def test_the_estimate_comes_from_the_database_statistics_where_there_are_any(vendor):
    from backwave_django.admin.job_list import _estimated_rows

    estimate = _estimated_rows(JobRecord.objects.all())
    if vendor == "sqlite":
        assert estimate is None
    else:
        assert estimate is None or estimate >= 0


# --- The detail page ---------------------------------------------------------------------------


def test_the_detail_page_shows_the_timeline_newest_first_with_failure_detail_under_failing_rows(
    client, login, failures
):
    login("view_sensitive_jobrecord")
    html = client.get(_change(failures["dead"])).content.decode()
    log = html[html.index('id="bw-transition-log"') :]
    states = re.findall(r'data-state="(\w+)"', log)
    assert states == ["DeadLettered", "Leased", "Scheduled"]
    assert log.index("Boom: trace") < log.index('data-state="Leased"')  # under the failing row
    assert re.search(r'<td data-label="actor">w</td>', log)
    assert "3 recorded" in log


def test_failure_detail_is_hidden_without_the_sensitive_permission(client, login, failures, monkeypatch):
    login()
    html = client.get(_change(failures["dead"])).content.decode()
    assert "Boom: trace" not in html
    assert "Failure detail — Hidden: needs the" in html
    login("view_sensitive_jobrecord")
    monkeypatch.setenv("BACKWAVE_DISABLE_SENSITIVE_DATA", " Yes ")
    html = client.get(_change(failures["dead"])).content.decode()
    assert "Boom: trace" not in html


def test_payload_and_output_are_pretty_printed_json_for_those_allowed(client, login):
    job = JobRecordFactory(
        state=JobState.SUCCEEDED,
        terminal=True,
        payload={"args": [1], "kwargs": {"k": "v"}},
        output={"sent": True},
    )
    url = reverse("admin:backwave_django_jobrecord_change", args=[job.pk])
    login("view_sensitive_jobrecord")
    html = client.get(url).content.decode()
    assert "&quot;sent&quot;: true" in html
    assert "&quot;kwargs&quot;: {\n    &quot;k&quot;: &quot;v&quot;\n  }" in html
    assert "bytes · JSON" in html
    login()
    html = client.get(url).content.decode()
    assert "sent" not in html
    assert "Hidden: needs the" in html


def test_dependency_edges_link_gating_parents_and_waiting_children(client, login):
    login()
    parent = enqueue()
    child = enqueue(parents=[parent])
    grandchild = enqueue(parents=[child])
    html = client.get(_change(child)).content.decode()
    edges = html[html.index('id="bw-dependencies"') : html.index('id="bw-transition-log"')]
    assert f'<a href="{_change(parent)}"><code>{parent}</code></a>' in edges
    assert f'<a href="{_change(grandchild)}"><code>{grandchild}</code></a>' in edges
    assert (
        edges.index("still blocking this job") < edges.index(str(parent)) < edges.index("waiting on this job")
    )


def test_a_job_can_be_opened_by_its_job_id(client, login):
    login()
    job = enqueue()
    response = client.get(reverse("admin:backwave_django_jobrecord_change", args=[str(job)]))
    assert response.status_code == 200
    assert str(job) in response.content.decode()


def test_an_unknown_job_is_a_clear_message_not_an_error(client, login):
    login()
    for unknown in ("999999", str(uuid.uuid4()), "not-an-id"):
        response = client.get(reverse("admin:backwave_django_jobrecord_change", args=[unknown]), follow=True)
        assert response.status_code == 200
        assert "doesn\u2019t exist" in response.content.decode()


def test_minted_by_links_the_schedule(client, login):
    from backwave_django import ScheduleSpec

    login()
    store.upsert_schedule(
        ScheduleSpec(
            schedule_id="nightly", cron="0 2 * * *", wire_name="test.echo", payload={"args": [], "kwargs": {}}
        ),
        now=timezone.now(),
    )
    store.trigger_schedule("nightly", actor="t", now=timezone.now())
    job = JobRecord.objects.get(schedule_id="nightly")
    html = client.get(reverse("admin:backwave_django_jobrecord_change", args=[job.pk])).content.decode()
    assert re.search(r'<a href="/admin/backwave_django/recurringschedule/\d+/change/">nightly</a>', html)


def test_escaped_content_in_the_timeline(client, login):
    login("view_sensitive_jobrecord")
    job = JobRecordFactory(state=JobState.DEAD_LETTERED, terminal=True)
    JobTransitionFactory(
        job=job, state=JobState.DEAD_LETTERED, actor="<i>w</i>", failure_detail="<script>f()</script>"
    )
    html = client.get(reverse("admin:backwave_django_jobrecord_change", args=[job.pk])).content.decode()
    assert "<script>f()" not in html
    assert "<i>w</i>" not in html
    assert "&lt;script&gt;f()&lt;/script&gt;" in html
    assert "&lt;i&gt;w&lt;/i&gt;" in html


def test_only_the_primary_key_orders_the_list(client, login):
    login()
    first, second = enqueue(wire_name="a"), enqueue(wire_name="b")
    html = client.get(reverse(JOBS)).content.decode()
    sortable = re.findall(r'<th scope="col" class="sortable[^"]*column-(\w+)', html)
    assert sortable == ["job"]
    header = re.search(r'column-job.*?<a href="\?o=(\d+)"', html, re.S)
    assert header
    column = int(header.group(1))
    assert _shown(client.get(reverse(JOBS), {"o": str(column)})) == [first, second]  # oldest first
    # A hand-written ordering by another column (wire name: "a" < "b") is ignored.
    assert _shown(client.get(reverse(JOBS), {"o": str(column + 1)})) == [second, first]
    assert _shown(client.get(reverse(JOBS), {"o": f"-{column + 1}"})) == [second, first]


# --- Review fixes: malformed selections, the copy icon, the search count, one read per page ------


@pytest.mark.parametrize(
    "selected",
    [
        ["abc"],
        [str(uuid.UUID(int=3))],
        ["1;DROP TABLE x"],
        ["99999999999999999999"],  # a number, but beyond the primary key's range
        ["{real}", "abc"],  # one bad value spoils the whole selection
    ],
    ids=["word", "uuid", "sql", "out-of-range", "mixed"],
)
@pytest.mark.parametrize("action", ["cancel_selected_jobs", "requeue_selected_jobs"])
def test_a_malformed_selection_is_refused_with_a_message_and_changes_nothing(
    client, login, failures, action, selected
):
    from django.contrib.admin.models import LogEntry

    from backwave_django.models import OperatorAudit

    from .conftest import flashed

    login("cancel_jobrecord", "requeue_jobrecord")
    real = str(JobRecord.objects.get(job_id=failures["dead"]).pk)
    posted = [real if value == "{real}" else value for value in selected]
    before = list(JobRecord.objects.order_by("pk").values_list("pk", "state", "attempt"))
    url = reverse(JOBS) + "?queue=dl"
    response = client.post(url, {"action": action, "index": "0", "_selected_action": posted})
    assert (response.status_code, response["Location"]) == (302, url)
    [message] = flashed(response)
    bad = next(value for value in posted if value != real)
    assert message == f"“{bad[:40]}” is not the id of a job listed here; nothing was changed."
    assert list(JobRecord.objects.order_by("pk").values_list("pk", "state", "attempt")) == before
    assert not OperatorAudit.objects.exists()
    assert not LogEntry.objects.exists()


def test_a_valid_selection_still_runs_the_action(client, login, failures):
    from .conftest import flashed

    login("requeue_jobrecord")
    pk = JobRecord.objects.get(job_id=failures["dead"]).pk
    response = client.post(
        reverse(JOBS), {"action": "requeue_selected_jobs", "index": "0", "_selected_action": [f" {pk} "]}
    )
    assert flashed(response) == [f"Requeued (1): send-invoice …{failures['dead'].hex[-8:]}."]
    assert JobRecord.objects.get(pk=pk).state == JobState.SCHEDULED


def test_the_list_copy_button_is_an_inline_icon_with_a_label(client, login):
    login()
    job = enqueue()
    html = client.get(reverse(JOBS)).content.decode()
    button = re.search(
        rf'<button type="button" class="bw-copy" data-bw-copy="{job}"[^>]*>(.*?)</button>', html
    )
    assert button, "no copy button for the job"
    assert 'aria-label="Copy the job id"' in button.group(0)
    assert button.group(1).startswith("<svg ")
    assert 'aria-hidden="true"' in button.group(1)
    assert "\u29c9" not in html  # a glyph no common Linux font has: it drew an empty box


def test_the_search_bar_count_agrees_with_the_capped_paginator(client, login, monkeypatch):
    monkeypatch.setattr("backwave_django.admin.job_list.COUNT_CAP", 3)
    login()
    for _ in range(5):
        JobRecordFactory(wire_name="send-invoice")
    JobRecordFactory(wire_name="other")
    html = client.get(reverse(JOBS), {"q": "invoice"}).content.decode()
    search = re.search(r'<span class="small quiet"[^>]*>(.*?)</span>', html, re.S)
    assert search, "no count beside the search bar"
    assert re.sub(r"<[^>]+>", "", search.group(1)) == "3+ results (Show all)"
    assert re.search(r'data-testid="bw-result-count">3\+ jobs<', html)
    exact = client.get(reverse(JOBS), {"q": "other"}).content.decode()
    assert re.search(r'<span class="small quiet"[^>]*>1 result \(', exact)
    unfiltered = client.get(reverse(JOBS)).content.decode()
    assert 'class="small quiet"' not in unfiltered  # nothing narrowed: nothing to count against


def test_the_detail_page_reads_the_job_once_so_buttons_and_facts_agree(client, login, monkeypatch):
    """A job cancelled while its page is drawn: the page shows one state, before or after, never both."""
    from backwave_django.admin.jobs import JobRecordAdmin

    login("cancel_jobrecord")
    job = enqueue()
    url = _change(job)
    read = JobRecordAdmin.get_object
    reads = []

    def read_then_cancel_elsewhere(self, request, object_id, from_field=None):
        found = read(self, request, object_id, from_field)
        reads.append(found.state)
        JobRecord.objects.filter(job_id=job).update(state=JobState.CANCELLED, terminal_at=timezone.now())
        return found

    monkeypatch.setattr(JobRecordAdmin, "get_object", read_then_cancel_elsewhere)
    html = client.get(url).content.decode()
    facts = re.search(r'field-state_badge.*?data-state="(\w+)"', html, re.S)
    assert facts
    assert reads == [JobState.SCHEDULED]
    assert (facts.group(1), 'data-testid="bw-cancel"' in html) == ("Scheduled", True)


@pytest.mark.usefixtures("job_statistics_restored")
def test_the_failure_tabs_page_through_their_own_partial_index(vendor, client, login):
    """Newest first among Dead-Lettered jobs reads ``backwave_job_failures``: no sort, no table walk."""
    from django.contrib import admin
    from django.db import connection

    if vendor != "postgresql":
        pytest.skip("the plan is checked on PostgreSQL (partial indexes, and planner statistics)")
    # The failures are the oldest rows, so walking the primary key backwards would visit every other row.
    dead = [JobRecordFactory.build(state=JobState.DEAD_LETTERED, terminal=True) for _ in range(60)]
    done = [JobRecordFactory.build(state=JobState.SUCCEEDED, terminal=True) for _ in range(6_000)]
    JobRecord.objects.bulk_create(dead + done, batch_size=2_000)
    with connection.cursor() as cursor:
        cursor.execute(f"ANALYZE {connection.ops.quote_name(JobRecord._meta.db_table)}")
    login()
    request = client.get(reverse(JOBS), {"state__exact": int(JobState.DEAD_LETTERED)}).wsgi_request
    changelist = admin.site.get_model_admin(JobRecord).get_changelist_instance(request)
    plan = changelist.queryset[:50].explain()
    assert "backwave_job_failures" in plan, plan
    assert "Sort" not in plan, plan


# --- Priority and unique jobs ----------------------------------------------------------------------


def test_the_list_shows_non_default_priorities_and_filters_by_priority_range(client, login):
    login()
    high, normal, low = enqueue(priority=5), enqueue(), enqueue(priority=-3)
    html = client.get(reverse(JOBS)).content.decode()
    facts = re.findall(r'<small class="bw-facts bw-quiet">([^<]*)</small>', html)
    assert facts == ["attempt 0 / 10 · priority -3", "attempt 0 / 10", "attempt 0 / 10 · priority +5"]
    for value, expected in (("above", [high]), ("normal", [normal]), ("below", [low])):
        assert _shown(client.get(reverse(JOBS), {"priority": value})) == expected


def test_the_detail_page_shows_the_priority_and_a_unique_jobs_key(client, login):
    from backwave_django.core.unique import UniqueKey

    login()
    job = enqueue(priority=7, unique=UniqueKey(key="ab" * 32))
    html = client.get(_change(job)).content.decode()
    assert re.search(r'field-priority"><dt>Priority</dt><dd>7</dd>', html)
    assert f'<code title="{"ab" * 32}">{"ab" * 8}…</code>' in html
    plain = client.get(_change(enqueue())).content.decode()
    assert "— (not a unique job)" in plain
