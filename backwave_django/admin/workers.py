"""The Workers page: every worker process that has reported in, its liveness and what it is running.

Rows are written by the workers' heartbeats and only viewed here. A worker not seen for five
heartbeat intervals shows as stale, the same rule the worker uses to prune rows
(``docs/admin.md``, "Workers and operator audit"). Each worker's running jobs (its Leased jobs,
by lease owner) are read once per page (``monitor.running_by_worker``), and the page refreshes
itself like the Dashboard (``live.js``).

Each worker has a page of its own (its id in the URL, so the job page's attempts and the
Dashboard link the worker that ran a job without looking it up first): its host, process, slots,
the queues it serves as a list, when it started and was last seen, and what it is running.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

from django.contrib import admin
from django.contrib.admin.utils import quote
from django.contrib.admin.views.main import ChangeList
from django.http import HttpRequest
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from .. import clock, monitor
from ..models import WorkerNode
from .console import REFRESH_SECONDS, ReadOnlyAdmin, live_context
from .display import CLAIMING_TONE, STALE_TONE, short_job_id, timestamp, tone_badge

if TYPE_CHECKING:
    from django.contrib.admin.options import _FieldsetSpec

#: The worker page's fields, in order.
WORKER_FACTS = ("worker_id_view", "status", "hostname", "pid", "slots", "queue_table", "started", "last_seen")

CANCEL_REQUESTED = SafeString(' <span class="bw-pill">cancel requested</span>')


class WorkerChangeList(ChangeList):
    """The workers shown, each given what it is running (``bw_running``), read in one query."""

    def get_results(self, request: HttpRequest) -> None:
        super().get_results(request)
        running = monitor.running_by_worker()
        self.result_list = list(self.result_list)
        for row in self.result_list:
            row.bw_running = running.get(row.worker_id)


class WorkerNodeAdmin(ReadOnlyAdmin):
    """The workers, most recently seen first: what each runs, its queues, and alive/stale."""

    empty_text = (
        "No worker has reported in. Start one with manage.py backwave_worker: it shows here "
        "from its first heartbeat, with the queues it serves and what it runs."
    )
    list_display = ("worker", "running", "queue_list", "last_seen", "status")
    list_display_links = None  # the worker cell links to the worker's page itself
    ordering = ("-last_seen_at",)
    search_fields = ("worker_id", "hostname")
    search_help_text = "Part of a worker id or of a host name."
    readonly_fields = (*WORKER_FACTS, "running_jobs")

    def get_object(self, request: HttpRequest, object_id: str, from_field: str | None = None) -> Any:
        """A worker by its primary key, or by its worker id (how the console links a worker)."""
        if object_id.isdigit():
            return super().get_object(request, object_id, from_field)
        return self.get_queryset(request).filter(worker_id=object_id).first()

    def get_fieldsets(self, request: HttpRequest, obj: Any = None) -> _FieldsetSpec:
        return [("Worker", {"fields": WORKER_FACTS}), ("Running", {"fields": ("running_jobs",)})]

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
            context = {**context, "title": f"Worker {obj.worker_id}", "subtitle": None}
        return super().render_change_form(request, context, add, change, form_url, obj)

    def get_changelist(self, request: HttpRequest, **kwargs: Any) -> type[WorkerChangeList]:
        return WorkerChangeList

    def changelist_view(self, request: HttpRequest, extra_context: dict[str, Any] | None = None) -> Any:
        response = super().changelist_view(request, {"title": "Workers", **(extra_context or {})})
        if isinstance(response, TemplateResponse) and response.context_data is not None:
            response.context_data["bw_live"] = live_context("workers", "result_list", REFRESH_SECONDS * 1000)
        return response

    @admin.display(description="worker", ordering="worker_id")
    def worker(self, row: WorkerNode) -> str:
        return format_html(
            '<a class="bw-mono bw-breakable" href="{}/change/" data-testid="bw-worker-page-link">{}</a>'
            '<small class="bw-quiet bw-block">{} · pid {} · started {}</small>',
            quote(row.worker_id),
            row.worker_id,
            row.hostname,
            row.pid,
            timestamp(row.started_at),
        )

    @admin.display(description="running")
    def running(self, row: WorkerNode) -> str:
        """How many of its slots are busy, and its jobs (the lease ending first on top)."""
        return running_cell(row, getattr(row, "bw_running", None))

    # --- The worker page -------------------------------------------------------------------------

    @admin.display(description="worker id")
    def worker_id_view(self, row: WorkerNode) -> str:
        return format_html('<code id="bw-worker-id">{}</code>', row.worker_id)

    @admin.display(description="slots")
    def slots(self, row: WorkerNode) -> str:
        return f"{row.concurrency} (jobs it runs at once)"

    @admin.display(description="queues")
    def queue_table(self, row: WorkerNode) -> str:
        """The queues it serves, in its order, each linking to the job list of that queue."""
        queues = [str(queue) for queue in row.queues] if isinstance(row.queues, list) else []
        if not queues:
            return "— (none)"
        jobs = reverse("admin:backwave_django_jobrecord_changelist")
        return format_html(
            '<ol class="bw-queue-list" data-testid="bw-worker-queues">{}</ol>',
            format_html_join(
                "", '<li><a href="{}?{}">{}</a></li>', ((jobs, urlencode({"queue": q}), q) for q in queues)
            ),
        )

    @admin.display(description="started")
    def started(self, row: WorkerNode) -> str:
        return timestamp(row.started_at)

    @admin.display(description="running")
    def running_jobs(self, row: WorkerNode) -> str:
        return running_cell(row, monitor.running_by_worker().get(row.worker_id))

    # --- Shared cells ----------------------------------------------------------------------------

    @admin.display(description="queues")
    def queue_list(self, row: WorkerNode) -> str:
        return ", ".join(str(queue) for queue in row.queues)

    @admin.display(description="last seen", ordering="last_seen_at")
    def last_seen(self, row: WorkerNode) -> str:
        return timestamp(row.last_seen_at)

    @admin.display(description="alive", boolean=True)
    def alive(self, row: WorkerNode) -> bool:
        return monitor.is_worker_live(row.last_seen_at, now=clock.now())

    @admin.display(description="status")
    def status(self, row: WorkerNode) -> str:
        if self.alive(row):
            return tone_badge("alive", CLAIMING_TONE)
        return tone_badge("stale", STALE_TONE)


def running_cell(row: WorkerNode, jobs: monitor.WorkerJobs | None) -> str:
    """How many of a worker's slots are busy, and its jobs (the lease ending first on top)."""
    count = jobs.count if jobs is not None else 0
    busy = format_html('<span class="bw-nowrap">{} of {} slots</span>', count, row.concurrency)
    if jobs is None or not jobs.jobs:
        return busy
    change = reverse("admin:backwave_django_jobrecord_changelist")
    items = format_html_join(
        "",
        '<li><a href="{}{}/change/">{} <code>{}</code></a>{}</li>',
        (
            (
                change,
                job.sequence,
                job.wire_name,
                short_job_id(job.job_id),
                CANCEL_REQUESTED if job.cancel_requested else "",
            )
            for job in jobs.jobs
        ),
    )
    more = ""
    if jobs.count > len(jobs.jobs):
        more = format_html(
            '<li><a href="{}?{}">all {} running →</a></li>',
            change,
            urlencode({"lease_owner": row.worker_id}),
            jobs.count,
        )
    return format_html('{}<ul class="bw-running" data-testid="bw-worker-jobs">{}{}</ul>', busy, items, more)
