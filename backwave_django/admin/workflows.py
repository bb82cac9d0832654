"""The Workflows pages: the list (name, status, members by state, age) and a workflow's page, which
draws its members' graph as an inline SVG, layered by topological depth, each member linking to
its job page (``docs/workflows.md``, "The console").

Read-only; viewing needs ``backwave_django.view_workflow`` (or ``change_workflow``, which allows
viewing as everywhere in Django, though nothing here can be changed). The list never counts the members
of every workflow: the page of workflows is read first, then their members' states in one grouped
query (``monitor.member_counts``, on ``backwave_job_workflow``).
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

from django.contrib import admin
from django.contrib.admin.views.main import ChangeList
from django.db.models import Q, QuerySet
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html, format_html_join

from ..core.states import JobState, WorkflowStatus
from ..core.workflows import topological_order, workflow_status_of
from ..models import Workflow
from ..monitor import member_counts, workflow_header, workflow_members
from .console import ReadOnlyAdmin
from .display import STATE_TONES, job_state_badge, short_job_id, timestamp, tone_badge
from .job_list import EstimatedCountPaginator
from .workflow_graph import Member, layout

if TYPE_CHECKING:
    from django.contrib.admin.options import _FieldsetSpec

#: A status's badge colour, from the state tones: running is Leased blue, failed Dead-Lettered red.
STATUS_TONES = {
    WorkflowStatus.RUNNING: STATE_TONES[JobState.LEASED],
    WorkflowStatus.FAILED: STATE_TONES[JobState.DEAD_LETTERED],
    WorkflowStatus.CANCELLED: STATE_TONES[JobState.CANCELLED],
    WorkflowStatus.SUCCEEDED: STATE_TONES[JobState.SUCCEEDED],
}
#: The workflow page lists at most this many members (parents first) ...
MEMBER_ROWS = 500
#: ... and draws the graph when the workflow has at most this many.
GRAPH_MEMBERS = 150
#: The facts at the top of the workflow page, in order.
WORKFLOW_FACTS = (
    "workflow_id_view",
    "name_view",
    "status_view",
    "created_view",
    "restarted_from_view",
    "members_view",
)


def status_badge(status: WorkflowStatus) -> str:
    """A workflow status's badge, marked ``data-status="<Value>"``."""
    return tone_badge(status.value, STATUS_TONES[status], status=status.value)


def state_counts_cell(counts: dict[JobState, int], jobs_url: str) -> str:
    """Members by state, each count linking to the job list filtered by the workflow and state."""
    return (
        format_html_join(
            " ",
            '<a href="{}&amp;state__exact={}" class="bw-wf-count">{}</a>',
            (
                (jobs_url, int(state), _count_badge(state, counts[state]))
                for state in JobState
                if counts.get(state)
            ),
        )
        or "—"
    )


def _count_badge(state: JobState, count: int) -> str:
    return tone_badge(f"{count:,} {state.label}", STATE_TONES[state], state=state.pascal)


class WorkflowAdmin(ReadOnlyAdmin):
    """Workflows, newest first, and the read-only workflow page with its graph."""

    uuid_lookup = "workflow_id"  # a copied workflow id works in the URL
    empty_text = (
        "No workflows yet. A workflow shows here once code enqueues one (enqueue_workflow, "
        "docs/workflows.md): its members, their states and the graph of what waits for what."
    )
    list_display = ("name_link", "status_column", "member_states", "member_total", "created")
    list_display_links = None  # the name column links to the workflow page itself
    ordering = ("-created_at", "-workflow_id")  # along ``backwave_workflow_created``
    sortable_by = ()
    list_per_page = 50
    paginator = EstimatedCountPaginator
    show_full_result_count = False
    show_facets = admin.ShowFacets.NEVER
    actions = ()
    search_fields = ("name",)
    search_help_text = "A workflow id (exact), or part of a name."
    readonly_fields = WORKFLOW_FACTS

    def get_fieldsets(self, request: HttpRequest, obj: Any = None) -> _FieldsetSpec:
        return [(None, {"fields": WORKFLOW_FACTS})]

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet[Any], search_term: str
    ) -> tuple[QuerySet[Any], bool]:
        term = search_term.strip()
        if not term:
            return queryset, False
        try:
            return queryset.filter(workflow_id=uuid.UUID(term)), False
        except ValueError:
            return queryset.filter(Q(name__icontains=term)), False

    def get_changelist_instance(self, request: HttpRequest) -> ChangeList:
        """The page of workflows, each with its members' counts by state (one grouped query)."""
        changelist = super().get_changelist_instance(request)
        rows = list(changelist.result_list)  # evaluated once: the template reuses these objects
        counts = member_counts(row.workflow_id for row in rows)
        jobs_url = reverse("admin:backwave_django_jobrecord_changelist")
        for row in rows:
            row.bw_counts = counts[row.workflow_id]
            row.bw_jobs_url = f"{jobs_url}?{urlencode({'workflow_id': row.workflow_id})}"
        return changelist

    # --- List columns (rows carry ``bw_counts`` and ``bw_jobs_url``) ------------------------------

    @admin.display(description="workflow")
    def name_link(self, workflow: Workflow) -> str:
        return format_html(
            '<a href="{}/change/" data-testid="bw-workflow-row">{}</a> '
            '<code class="bw-quiet" title="{}">{}</code>',
            workflow.pk,
            workflow.name or "(unnamed)",
            workflow.workflow_id,
            short_job_id(workflow.workflow_id),
        )

    @admin.display(description="status")
    def status_column(self, workflow: Workflow) -> str:
        return status_badge(workflow_status_of(getattr(workflow, "bw_counts", {})))

    @admin.display(description="members by state")
    def member_states(self, workflow: Workflow) -> str:
        return state_counts_cell(getattr(workflow, "bw_counts", {}), getattr(workflow, "bw_jobs_url", ""))

    @admin.display(description="members")
    def member_total(self, workflow: Workflow) -> str:
        return f"{sum(getattr(workflow, 'bw_counts', {}).values()):,}"

    @admin.display(description="created")
    def created(self, workflow: Workflow) -> str:
        return timestamp(workflow.created_at)

    # --- The workflow page's facts ---------------------------------------------------------------

    @admin.display(description="workflow id")
    def workflow_id_view(self, workflow: Workflow) -> str:
        return format_html('<code id="bw-workflow-id">{}</code>', workflow.workflow_id)

    @admin.display(description="name")
    def name_view(self, workflow: Workflow) -> str:
        return workflow.name or "—"

    @admin.display(description="status")
    def status_view(self, workflow: Workflow) -> str:
        counts = member_counts([workflow.workflow_id])[workflow.workflow_id]
        return status_badge(workflow_status_of(counts))

    @admin.display(description="created")
    def created_view(self, workflow: Workflow) -> str:
        return timestamp(workflow.created_at)

    @admin.display(description="restarted from")
    def restarted_from_view(self, workflow: Workflow) -> str:
        if workflow.restarted_from is None:
            return "—"
        earlier = workflow_header(workflow.restarted_from)
        if earlier is None:
            return format_html("<code>{}</code> (no longer stored)", workflow.restarted_from)
        url = reverse("admin:backwave_django_workflow_change", args=[earlier.row_id])
        return format_html('<a href="{}"><code>{}</code></a>', url, workflow.restarted_from)

    @admin.display(description="members")
    def members_view(self, workflow: Workflow) -> str:
        counts = member_counts([workflow.workflow_id])[workflow.workflow_id]
        jobs_url = reverse("admin:backwave_django_jobrecord_changelist")
        query = urlencode({"workflow_id": workflow.workflow_id})
        return format_html(
            '{} <a href="{}?{}" data-testid="bw-workflow-jobs">in the job list</a><div>{}</div>',
            f"{sum(counts.values()):,}",
            jobs_url,
            query,
            state_counts_cell(counts, f"{jobs_url}?{query}"),
        )

    # --- The graph -------------------------------------------------------------------------------

    def render_change_form(
        self,
        request: HttpRequest,
        context: dict[str, Any],
        add: bool = False,
        change: bool = False,
        form_url: str = "",
        obj: Any = None,
    ) -> Any:
        if obj is not None:
            title = f"Workflow {obj.name or '(unnamed)'} {short_job_id(obj.workflow_id)}"
            context = {**_graph_context(obj), **context, "title": title, "subtitle": None}
        return super().render_change_form(request, context, add, change, form_url, obj)


def _graph_context(workflow: Workflow) -> dict[str, Any]:
    """The members (parents first, at most ``MEMBER_ROWS``), their parents among them, and the
    graph when there are at most ``GRAPH_MEMBERS``."""
    found = workflow_members(workflow.workflow_id, limit=MEMBER_ROWS)
    truncated = found.truncated
    members = {m.job_id: Member(m.sequence, m.job_id, m.wire_name, m.state) for m in found.members}
    parents = found.parents
    order = topological_order(list(members), parents)
    job_url = "admin:backwave_django_jobrecord_change"
    urls = {job_id: reverse(job_url, args=[members[job_id].pk]) for job_id in order}
    listed = [
        {
            "url": urls[job_id],
            "job_id": job_id,
            "wire_name": members[job_id].wire_name,
            "badge": job_state_badge(members[job_id].state),
            "short": short_job_id(job_id),
            "parents": [
                {"url": urls[p], "short": short_job_id(p), "job_id": p} for p in parents.get(job_id, ())
            ],
        }
        for job_id in order
    ]
    drawn = not truncated and 0 < len(order) <= GRAPH_MEMBERS
    graph = layout([members[job_id] for job_id in order], parents, urls) if drawn else None
    return {
        "bw_workflow": workflow,
        "bw_members": listed,
        "bw_members_truncated": truncated,
        "bw_member_rows": MEMBER_ROWS,
        "bw_graph": graph,
        "bw_graph_members": GRAPH_MEMBERS,
        "bw_jobs_url": f"{reverse('admin:backwave_django_jobrecord_changelist')}?"
        f"{urlencode({'workflow_id': workflow.workflow_id})}",
    }
