"""The Workflows pages: the list and a workflow's page with its graph (docs/workflows.md, "The console")."""

from __future__ import annotations

import re
import uuid
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from backwave_django import (
    JobState,
    OutcomeReport,
    Success,
    WorkflowDefinition,
    WorkflowEnqueueResult,
    store,
)
from backwave_django.admin.workflows import GRAPH_MEMBERS
from backwave_django.models import JobRecord, Workflow

from ..conftest import LEASE, new_job
from .conftest import make_staff

pytestmark = pytest.mark.django_db

WORKFLOWS = "admin:backwave_django_workflow_changelist"
XSS = '<script>alert("bw")</script>'


def create(*members: Any, name: str | None = None, now: Any = None, **fields: Any) -> Workflow:
    now = now or timezone.now()
    definition = WorkflowDefinition(workflow_id=uuid.uuid4(), name=name, members=members, **fields)
    assert store.enqueue_workflow(definition, now=now) is WorkflowEnqueueResult.OK
    return Workflow.objects.get(workflow_id=definition.workflow_id)


def member(**fields: Any) -> Any:
    fields.setdefault("due_time", timezone.now())
    return new_job(**fields)


def run(job_id: uuid.UUID) -> None:
    """Claim and succeed one job (it must be due and alone in its queue)."""
    queue = JobRecord.objects.get(job_id=job_id).queue
    now = timezone.now()
    [claimed] = store.claim(worker_id="w", queues=[queue], max_jobs=1, lease_duration=LEASE, now=now)
    assert claimed.job_id == job_id
    report = OutcomeReport(job_id=job_id, worker_id="w", attempt=1, outcome=Success())
    assert store.report_outcome(report, now=now).name == "APPLIED"


@pytest.fixture
def diamond() -> tuple[Workflow, list[Any]]:
    """fetch → (parse, resize) → publish; fetch has run."""
    fetch = member(wire_name="fetch", queue="wf-fetch")
    parse = member(wire_name="parse", queue="wf-parse", parents=[fetch.job_id])
    resize = member(wire_name="resize", queue="wf-resize", parents=[fetch.job_id])
    publish = member(wire_name="publish", queue="wf-publish", parents=[parse.job_id, resize.job_id])
    workflow = create(publish, resize, parse, fetch, name="nightly import")
    run(fetch.job_id)
    return workflow, [fetch, parse, resize, publish]


def _row(html: str, name: str) -> str:
    match = re.search(rf"<tr>(?:(?!</tr>).)*?>{re.escape(name)}</a>.*?</tr>", html, re.S)
    assert match, f"no row for {name!r}"
    return match.group(0)


# --- Permissions --------------------------------------------------------------------------------


def test_the_pages_need_view_workflow(client, login, diamond):
    workflow, _ = diamond
    login()  # every other view permission, not this one
    assert client.get(reverse(WORKFLOWS)).status_code == 403
    assert client.get(reverse("admin:backwave_django_workflow_change", args=[workflow.pk])).status_code == 403
    login("view_workflow")
    assert client.get(reverse(WORKFLOWS)).status_code == 200
    assert client.get(reverse("admin:backwave_django_workflow_change", args=[workflow.pk])).status_code == 200


def test_workflows_cannot_be_added_changed_or_deleted(client, diamond):
    workflow, _ = diamond
    client.force_login(make_staff("view_workflow", "add_workflow", "change_workflow", "delete_workflow"))
    page = reverse("admin:backwave_django_workflow_change", args=[workflow.pk])
    assert client.get(reverse("admin:backwave_django_workflow_add")).status_code == 403
    assert client.post(page, {"name": "renamed"}).status_code == 403
    assert (
        client.post(reverse("admin:backwave_django_workflow_delete", args=[workflow.pk])).status_code == 403
    )
    assert Workflow.objects.get().name == "nightly import"
    html = client.get(page).content.decode()
    assert 'name="_save"' not in html
    assert "deletelink" not in html


# --- The list -----------------------------------------------------------------------------------


def test_the_list_shows_name_status_counts_by_state_and_age(client, login, diamond):
    workflow, _ = diamond
    create(member(queue="wf-old"), name="older", now=timezone.now() - timedelta(hours=3))
    login("view_workflow")
    html = client.get(reverse(WORKFLOWS)).content.decode()
    assert html.index("nightly import") < html.index(">older<")  # newest first
    row = _row(html, "nightly import")
    assert 'data-status="Running"' in row
    assert ">1 Succeeded<" in row
    assert ">2 Scheduled<" in row
    assert ">1 Awaiting Parent<" in row
    assert '<td class="field-member_total">4</td>' in row
    jobs = reverse("admin:backwave_django_jobrecord_changelist")
    assert f'href="{jobs}?workflow_id={workflow.workflow_id}&amp;state__exact=3"' in row
    assert f'href="{workflow.pk}/change/"' in row
    old_row = _row(html, "older")
    assert re.search(r"field-created\">.*?UTC</time> <small class=\"bw-ago\">3 h ago<", old_row), old_row
    assert 'data-testid="bw-result-count">2 workflows<' in html


def test_the_list_reads_the_members_of_a_whole_page_in_one_query(client, login):
    login("view_workflow")
    create(member(queue="q0"), name="first")

    def job_queries() -> tuple[int, int]:
        with CaptureQueriesContext(connection) as captured:
            assert client.get(reverse(WORKFLOWS)).status_code == 200
        sqls = [query["sql"] for query in captured.captured_queries]
        return len(sqls), sum(JobRecord._meta.db_table in sql for sql in sqls)

    total, on_jobs = job_queries()
    assert on_jobs == 1
    for index in range(1, 12):
        create(member(queue=f"q{index}"), member(queue=f"r{index}"), name=f"wf-{index}")
    assert job_queries() == (total, 1)


def test_search_finds_a_workflow_by_id_or_by_part_of_its_name(client, login, diamond):
    workflow, _ = diamond
    create(member(queue="other"), name="other thing")
    login("view_workflow")
    by_name = client.get(reverse(WORKFLOWS), {"q": "NIGHTLY"}).content.decode()
    assert "nightly import" in by_name
    assert "other thing" not in by_name
    by_id = client.get(reverse(WORKFLOWS), {"q": str(workflow.workflow_id)}).content.decode()
    assert "nightly import" in by_id
    assert "other thing" not in by_id


def test_names_are_escaped_in_the_list_and_on_the_page(client, login):
    workflow = create(member(wire_name=f"w-{XSS}", queue="x"), name=XSS)
    login("view_workflow")
    for url in (
        reverse(WORKFLOWS),
        reverse("admin:backwave_django_workflow_change", args=[workflow.pk]),
        reverse("admin:backwave_django_jobrecord_change", args=[JobRecord.objects.get().pk]),
    ):
        html = client.get(url).content.decode()
        assert XSS not in html, url
        assert "&lt;script&gt;alert(&quot;bw&quot;)&lt;/script&gt;" in html, url


# --- The workflow page --------------------------------------------------------------------------


def test_the_page_draws_the_graph_in_layers_with_each_members_state_and_link(client, login, diamond):
    workflow, (fetch, parse, resize, publish) = diamond
    login("view_workflow")
    html = client.get(reverse("admin:backwave_django_workflow_change", args=[workflow.pk])).content.decode()
    assert 'data-testid="bw-workflow-graph"' in html
    nodes = re.findall(
        r'<a class="bw-wf-node" href="([^"]+)" data-testid="bw-workflow-node" data-job-id="([^"]+)" '
        r'data-state="(\w+)" data-column="(\d+)">',
        html,
    )
    by_id = {uuid.UUID(job_id): (href, state, int(column)) for href, job_id, state, column in nodes}
    assert set(by_id) == {fetch.job_id, parse.job_id, resize.job_id, publish.job_id}
    assert by_id[fetch.job_id][1:] == ("Succeeded", 0)
    assert by_id[parse.job_id][1:] == ("Scheduled", 1)
    assert by_id[resize.job_id][1:] == ("Scheduled", 1)
    assert by_id[publish.job_id][1:] == ("AwaitingParent", 2)
    pk = JobRecord.objects.get(job_id=publish.job_id).pk
    assert by_id[publish.job_id][0] == reverse("admin:backwave_django_jobrecord_change", args=[pk])
    edges = set(re.findall(r'data-parent="([^"]+)" data-child="([^"]+)"', html))
    assert edges == {
        (str(fetch.job_id), str(parse.job_id)),
        (str(fetch.job_id), str(resize.job_id)),
        (str(parse.job_id), str(publish.job_id)),
        (str(resize.job_id), str(publish.job_id)),
    }
    # The members, parents first, with what each waits for.
    listed = re.findall(r'<tr class="bw-wf-member" data-job-id="([^"]+)">', html)
    assert listed[0] == str(fetch.job_id)
    assert listed[-1] == str(publish.job_id)
    assert 'data-status="Running"' in html
    assert f"?workflow_id={workflow.workflow_id}" in html


def test_a_workflow_too_large_to_draw_is_listed_instead(client, login):
    root = member(queue="big-root")
    workflow = create(root, *(member(queue="big", parents=[root.job_id]) for _ in range(GRAPH_MEMBERS)))
    login("view_workflow")
    html = client.get(reverse("admin:backwave_django_workflow_change", args=[workflow.pk])).content.decode()
    assert 'data-testid="bw-workflow-graph"' not in html
    assert f"up to {GRAPH_MEMBERS} members" in html
    assert html.count('class="bw-wf-member"') == GRAPH_MEMBERS + 1


def test_the_page_opens_by_workflow_id_and_links_the_restarted_workflow(client, login, diamond):
    workflow, _ = diamond
    again = create(member(queue="again"), name="again", restarted_from=workflow.workflow_id)
    gone = create(member(queue="gone"), name="gone", restarted_from=uuid.uuid4())
    login("view_workflow")
    html = client.get(reverse("admin:backwave_django_workflow_change", args=[str(again.workflow_id)])).content
    assert reverse("admin:backwave_django_workflow_change", args=[workflow.pk]) in html.decode()
    assert (
        "(no longer stored)"
        in client.get(reverse("admin:backwave_django_workflow_change", args=[gone.pk])).content.decode()
    )


def test_a_job_page_links_to_its_workflow_and_the_job_list_filters_by_it(client, login, diamond):
    workflow, (fetch, *_rest) = diamond
    standalone = store.enqueue(member(queue="alone"), now=timezone.now())
    assert standalone.name == "OK"
    login("view_workflow")
    job = JobRecord.objects.get(job_id=fetch.job_id)
    html = client.get(reverse("admin:backwave_django_jobrecord_change", args=[job.pk])).content.decode()
    link = reverse("admin:backwave_django_workflow_change", args=[workflow.pk])
    assert f'<a href="{link}" data-testid="bw-workflow-link">nightly import</a>' in html
    alone = JobRecord.objects.get(queue="alone")
    html = client.get(reverse("admin:backwave_django_jobrecord_change", args=[alone.pk])).content.decode()
    assert 'data-testid="bw-workflow-link"' not in html
    listed = client.get(
        reverse("admin:backwave_django_jobrecord_changelist"), {"workflow_id": str(workflow.workflow_id)}
    ).content.decode()
    shown = set(re.findall(r'data-bw-copy="([0-9a-f-]{36})"', listed))
    assert shown == {
        str(job_id)
        for job_id in JobRecord.objects.filter(workflow_id=workflow.workflow_id).values_list(
            "job_id", flat=True
        )
    }
    assert len(shown) == 4


def test_state_badges_use_the_console_tones(client, login, diamond):
    workflow, _ = diamond
    login("view_workflow")
    html = client.get(reverse("admin:backwave_django_workflow_change", args=[workflow.pk])).content.decode()
    from backwave_django.admin.display import STATE_TONES

    for state in (JobState.SUCCEEDED, JobState.SCHEDULED, JobState.AWAITING_PARENT):
        assert f'fill="{STATE_TONES[state]}"' in html


def test_the_graph_and_tables_label_members_by_the_short_id_used_everywhere(client, login):
    from backwave_django.admin.display import short_job_id

    # Jobs enqueued together share the start of their ids (the time part): the labels must not.
    ids = [uuid.UUID(f"01a23ef0-0000-7000-8000-{index:012x}") for index in (0xA1B2C3D4, 0xE5F60718)]
    first = member(job_id=ids[0], queue="wf-short")
    second = member(job_id=ids[1], queue="wf-short", parents=(ids[0],))
    workflow = create(first, second, name="together")
    login("view_workflow")
    html = client.get(reverse("admin:backwave_django_workflow_change", args=[workflow.pk])).content.decode()
    labels = re.findall(r'<text class="bw-wf-id"[^>]*>([^<]+)</text>', html)
    assert labels == [short_job_id(ids[0]), short_job_id(ids[1])] == ["…a1b2c3d4", "…e5f60718"]
    members = html[html.index('data-testid="bw-workflow-members"') :]
    assert f'title="{ids[0]}"><code>…a1b2c3d4</code></a>' in members
    # No label shows the shared start (tooltips, links and data attributes carry the full id).
    shown = re.sub(r'(title|data-[\w-]+|href)="[^"]*"|<title>[^<]*</title>', "", html)
    assert "01a23ef0" not in shown
    listing = client.get(reverse(WORKFLOWS)).content.decode()
    short = short_job_id(workflow.workflow_id)
    assert f'<code class="bw-quiet" title="{workflow.workflow_id}">{short}</code>' in listing
