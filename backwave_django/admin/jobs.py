"""The Jobs pages: the job list with its Retrying and failures tabs, the job detail page, and the
Cancel, Requeue and Retry now actions.

Job rows are read-only: a job's state changes only through the Cancel, Requeue and Retry now
actions (bulk on the list, a button on the detail page), which go through
:mod:`backwave_django.operator`. The list's paginator and filters live in :mod:`.job_list`; see
``docs/admin.md`` ("Jobs", "Retrying", "Failures", "Job detail") for what each page shows.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

from django.contrib import admin, messages
from django.contrib.admin.utils import unquote
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.urls import URLPattern, path, reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString

from .. import clock, operator
from ..conf import get_settings
from ..core import actors
from ..core.states import HistoryPolicy, JobState
from ..models import JobRecord
from ..monitor import count_in_state, schedule_row_id, with_lease_expiry
from ..monitor.search import search_jobs
from .console import (
    CANCEL_PERMISSION,
    HIDDEN_TEXT,
    REQUEUE_PERMISSION,
    Acted,
    ReadOnlyAdmin,
    SeeOther,
    attempt_ceiling,
    backoff_text,
    can_view_sensitive,
    console_button,
    discarded_marker,
    live_context,
    max_attempts_text,
    progress_bar,
    refresh_interval_ms,
    result_message,
    seconds_text,
    workflow_link,
)
from .display import job_state_badge, pretty_json, short_job_id, tag_pills, timestamp
from .job_actions import (
    CANCEL_LABELS,
    REQUEUE_LABELS,
    RETRY_NOW_LABELS,
    cancel_jobs,
    confirm_cancel_running,
    job_name,
    requeue_jobs,
    retry_now_jobs,
)
from .job_bulk import report_filter, whole_filter_buttons, whole_filter_view
from .job_list import (
    SEARCH_NOTES,
    EstimatedCountPaginator,
    JobChangeList,
    LeaseOwnerFilter,
    PriorityFilter,
    QueueFilter,
    RetryingFilter,
    ScheduleFilter,
    TerminalClassFilter,
    WireNameFilter,
    failure_tab,
    job_cell,
    retrying_view,
    status_cell,
    tags_cell,
    when_cell,
    with_last_failure,
)
from .job_page import linked_jobs, page_context
from .job_tags import TagFilter, suggestions_response

if TYPE_CHECKING:
    from django.contrib.admin.options import _FieldsetSpec

#: The failure tabs count up to this many jobs each ("1,000+").
FAILURE_COUNT_CAP = 1_000
#: The Retrying tab's blurb: Scheduled jobs that have run (attempt >= 1), next try first.
RETRYING_BLURB = "waiting for their next try, next try first"

#: The failures view: two tabs over the job list, never merged (label, state, blurb, test id).
FAILURE_TABS = (
    ("Dead-Lettered", JobState.DEAD_LETTERED, "ran and kept failing", "bw-failures-dead-lettered"),
    ("Quarantined", JobState.QUARANTINED, "could not be routed or decoded", "bw-failures-quarantined"),
)


#: The job detail page's fields, in groups drawn several to a line (the state, cause and last
#: failure lead the page instead: ``job_page.summary``).
JOB_FIELD_GROUPS = (
    (
        "Job",
        (
            "job_id_copy",
            "wire_name",
            "queue",
            "state_badge",
            "attempt_of",
            "priority",
            "sequence",
            "mode",
            "unique_key_view",
        ),
    ),
    (
        "Times and lease",
        (
            "enqueued_at_utc",
            "due_at",
            "terminal_at_utc",
            "lease_owner",
            "lease_expiry_utc",
            "cancel_requested_text",
        ),
    ),
    ("Relations", ("parents_remaining", "minted_by", "workflow", "tag_list", "trace_context_view")),
)
JOB_FACTS = tuple(name for _, fields in JOB_FIELD_GROUPS for name in fields)
SENSITIVE_FIELDS = ("payload_view", "output_view")
#: The job's own policy, stored on the row (or the settings' when the row predates the columns).
POLICY_FIELDS = ("max_attempts_policy", "backoff_policy", "timeout_policy")
#: The Retrying view's columns: the attempt as "n of max" (with progress) and the next try; each
#: job's last failure is a line of its own under its row (``JobChangeList``).
RETRYING_COLUMNS = ("job", "retry_attempt", "next_try", "tag_pills")
#: The parts of the job list that live refresh swaps: tab counts, whole-filter buttons, rows, count.
LIVE_REGIONS = "bw-tabs bw-object-tools bw-results bw-paginator"
#: The list's titles: the tab or filter shown, instead of Django's "Select job to view".
TITLES = {
    JobState.DEAD_LETTERED: "Dead-Lettered jobs",
    JobState.QUARANTINED: "Quarantined jobs",
}


#: What an empty list says: what lands on it and what to do (``docs/admin.md``, "Jobs").
EMPTY_JOBS = (
    "No jobs yet. Jobs show here once code enqueues them (enqueue(), docs/quickstart.md) or a "
    "recurring schedule mints them."
)
EMPTY_FILTERED = "No job matches this search or filter. Clear it (All jobs, above) to see every job."
EMPTY_RETRYING = (
    "No job is waiting for a retry. A job that fails with attempts left waits here for its next "
    "try, with its last failure under it."
)
EMPTY_TABS = {
    JobState.DEAD_LETTERED: (
        "No Dead-Lettered jobs. A job lands here when it fails on its last attempt, gives up "
        "(Discard) or its lease expires on its last attempt; fix the cause, then requeue it from here "
        "or from its page."
    ),
    JobState.QUARANTINED: (
        "No Quarantined jobs. A job lands here when no handler is registered for its wire name or "
        "its payload cannot be decoded; deploy the handler, then requeue it."
    ),
}


class JobRecordAdmin(ReadOnlyAdmin):
    """The job list (newest first, never fully counted) and the read-only job detail page."""

    uuid_lookup = "job_id"  # a copied job id works in the URL
    # Four columns that fit beside the admin's two sidebars at 1280 px: the job (wire name, short
    # id, queue), its state (with attempt, priority and progress), its due or end time, its tags.
    # The failure lists add each job's terminal cause as a full-width line under its row.
    list_display = ("job", "status", "when", "tag_pills")
    list_display_links = None  # the job cell links to the detail page itself
    # Only the primary key orders the list (newest first, or oldest first): sorting a large table
    # by any other column would be a full sort on every page load, so no other column has an
    # ordering (which also makes a hand-written ``?o=`` for them a no-op).
    sortable_by = ("job",)
    list_filter = (
        "state",
        RetryingFilter,
        TerminalClassFilter,
        QueueFilter,
        PriorityFilter,
        WireNameFilter,
        ScheduleFilter,
        TagFilter,
        LeaseOwnerFilter,
    )
    ordering = ("-sequence",)  # newest first, along the primary key
    list_per_page = 50
    paginator = EstimatedCountPaginator
    show_full_result_count = False  # no COUNT(*) over the whole table on every page
    show_facets = admin.ShowFacets.NEVER  # facet counts would scan the table per filter
    actions = (cancel_jobs, requeue_jobs, retry_now_jobs)
    search_help_text = (
        "A job id, short id (…b2c92a1a) or sequence number; key=value for an argument; "
        "or part of an error, a wire name or a tag (or key:value)."
    )
    search_fields = ("wire_name",)
    readonly_fields = (
        *JOB_FACTS,
        *POLICY_FIELDS,
        "progress_view",
        "progress_public",
        *SENSITIVE_FIELDS,
        "sensitive_hidden",
    )

    def has_cancel_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm(CANCEL_PERMISSION)

    def has_requeue_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm(REQUEUE_PERMISSION)

    def get_queryset(self, request: HttpRequest) -> QuerySet[JobRecord]:
        # Payload and output load only when the detail page shows them (and the viewer may see them).
        queryset = super().get_queryset(request).defer("payload", "output").prefetch_related("tags")
        # Which Dead-Lettered rows the lease sweep ended, for the Discarded marker (admin/console.py).
        queryset = with_lease_expiry(queryset)
        if retrying_view(request):
            queryset = with_last_failure(queryset, detail=can_view_sensitive(request))
        return queryset

    def get_ordering(self, request: HttpRequest) -> tuple[str, ...]:
        # The Retrying view: next try first, along ``backwave_job_claim`` (Scheduled rows only).
        return ("due_time", "sequence") if retrying_view(request) else tuple(self.ordering or ())

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet[Any], search_term: str
    ) -> tuple[QuerySet[Any], bool]:
        # The needles and their costs: ``monitor/search.py``. Its notes reach the page through the
        # request (this admin is shared between requests).
        found = search_jobs(queryset, search_term, failure_detail=can_view_sensitive(request))
        setattr(request, SEARCH_NOTES, found.notes)
        return found.jobs, False

    def get_list_display(self, request: HttpRequest) -> tuple[Any, ...]:
        return RETRYING_COLUMNS if retrying_view(request) else tuple(super().get_list_display(request))

    def get_changelist(self, request: HttpRequest, **kwargs: Any) -> type[JobChangeList]:
        return JobChangeList

    def changelist_view(self, request: HttpRequest, extra_context: dict[str, Any] | None = None) -> Any:
        active = failure_tab(request)
        retrying_active = retrying_view(request)
        changelist_url = reverse("admin:backwave_django_jobrecord_changelist")
        tabs = [
            {
                "label": "All jobs",
                "url": changelist_url,
                "active": active is None and not retrying_active,
                "testid": "bw-failures-all",
                "count": None,
                "blurb": "",
            },
            {
                "label": "Retrying",
                "url": f"{changelist_url}?{urlencode({RetryingFilter.parameter_name: 1})}",
                "active": retrying_active,
                "testid": "bw-retrying",
                # No count: without an index of its own, counting the jobs waiting for a retry
                # would read every Scheduled row on every page of the list (the view itself
                # counts, capped, when it is opened).
                "count": None,
                "blurb": RETRYING_BLURB,
            },
        ]
        for label, state, blurb, testid in FAILURE_TABS:
            count = count_in_state(state, up_to=FAILURE_COUNT_CAP + 1)
            tabs.append(
                {
                    "label": label,
                    "url": f"{changelist_url}?{urlencode({'state__exact': int(state)})}",
                    "active": active == state,
                    "testid": testid,
                    "count": f"{FAILURE_COUNT_CAP:,}+" if count > FAILURE_COUNT_CAP else f"{count:,}",
                    "blurb": blurb,
                }
            )
        blurbs = {state: f"{label}: {blurb}." for label, state, blurb, _ in FAILURE_TABS}
        active_blurb = blurbs.get(active) if active is not None else None
        title = "Retrying jobs" if retrying_active else TITLES.get(active, "Jobs") if active else "Jobs"
        context = {
            "title": title,
            "bw_tabs": tabs,
            "bw_active_blurb": f"Retrying: {RETRYING_BLURB}." if retrying_active else active_blurb,
            **(extra_context or {}),
        }
        response = super().changelist_view(request, context)
        data = getattr(response, "context_data", None) or {}
        cl = data.get("cl")
        if isinstance(cl, JobChangeList):
            report_filter(self, request, cl)
            # Nothing to act on: no "Requeue all 0 …" button, the empty state says what to do.
            data["bw_whole_filter"] = whole_filter_buttons(request, cl) if cl.result_list else []
            data["bw_live"] = live_context("jobs", LIVE_REGIONS, refresh_interval_ms(cl.bw_build_seconds))
        return response

    def empty_state(self, request: HttpRequest, changelist: Any) -> str:
        """An empty tab says what lands in it; an empty filtered list, that nothing matches."""
        if retrying_view(request) and not changelist.query:
            return EMPTY_RETRYING
        tab = failure_tab(request)
        if tab is not None and not changelist.query:
            return EMPTY_TABS[tab]
        if changelist.query or changelist.has_active_filters:
            return EMPTY_FILTERED
        return EMPTY_JOBS

    # --- Columns and facts ---------------------------------------------------------------------

    # List cells link relative to the changelist they are drawn on: no reverse() per row.

    @admin.display(description="job", ordering="sequence")
    def job(self, job: JobRecord) -> str:
        return job_cell(job)

    @admin.display(description="state")
    def status(self, job: JobRecord) -> str:
        return status_cell(job)

    @admin.display(description="due / ended")
    def when(self, job: JobRecord) -> str:
        return when_cell(job, clock.now())

    @admin.display(description="job id")
    def job_id_copy(self, job: JobRecord) -> str:
        return format_html(
            '<code id="bw-job-id">{}</code> <button type="button" class="bw-copy" data-bw-copy="{}" '
            'data-testid="bw-copy-job-id" aria-label="Copy the job id">copy</button>',
            job.job_id,
            job.job_id,
        )

    @admin.display(description="state")
    def state_badge(self, job: JobRecord) -> str:
        marker = discarded_marker(job)
        return (
            format_html("{} {}", job_state_badge(job.state), marker) if marker else job_state_badge(job.state)
        )

    @admin.display(description="attempt")
    def attempt_of(self, job: JobRecord) -> str:
        return f"{job.attempt} / {attempt_ceiling(job)}"

    @admin.display(description="unique key")
    def unique_key_view(self, job: JobRecord) -> str:
        """A unique job's key: the digest its conflicting enqueues share (see docs/jobs.md)."""
        if not job.unique_key:
            return "— (not a unique job)"
        return format_html('<code title="{}">{}…</code>', job.unique_key, job.unique_key[:16])

    @admin.display(description="trace context")
    def trace_context_view(self, job: JobRecord) -> str:
        """The enqueuer's W3C traceparent, the parent of the handler's span (docs/tracing.md)."""
        return format_html("<code>{}</code>", job.trace_context) if job.trace_context else "—"

    @admin.display(description="attempt")
    def retry_attempt(self, job: JobRecord) -> str:
        return format_html(
            '<span class="bw-line"><span class="bw-nowrap">{} of {}</span>{}</span>',
            job.attempt,
            attempt_ceiling(job),
            format_html(" {}", progress_bar(job.progress)) if job.progress else "",
        )

    @admin.display(description="next try")
    def next_try(self, job: JobRecord) -> str:
        return timestamp(job.due_time, label="due")

    @admin.display(description="max attempts")
    def max_attempts_policy(self, job: JobRecord) -> str:
        return max_attempts_text(job)

    @admin.display(description="backoff")
    def backoff_policy(self, job: JobRecord) -> str:
        return backoff_text(job)

    @admin.display(description="timeout")
    def timeout_policy(self, job: JobRecord) -> str:
        return "none" if job.timeout is None else seconds_text(job.timeout)

    @admin.display(description="progress")
    def progress_view(self, job: JobRecord) -> str:
        return progress_bar(job.progress, detail=True, sensitive=True)

    @admin.display(description="progress")
    def progress_public(self, job: JobRecord) -> str:
        return progress_bar(job.progress, detail=True, sensitive=False)

    @admin.display(description="due time")
    def due_at(self, job: JobRecord) -> str:
        return timestamp(job.due_time)

    @admin.display(description="terminal at")
    def terminal_at_utc(self, job: JobRecord) -> str:
        return timestamp(job.terminal_at)

    @admin.display(description="enqueued at")
    def enqueued_at_utc(self, job: JobRecord) -> str:
        return timestamp(job.enqueued_at)

    @admin.display(description="lease expiry")
    def lease_expiry_utc(self, job: JobRecord) -> str:
        return timestamp(job.lease_expiry)

    @admin.display(description="cancel requested")
    def cancel_requested_text(self, job: JobRecord) -> str:
        """A plain yes or no: Django's red ✖ for "no" would read as an error."""
        if not job.cancel_requested:
            return "no"
        return "yes: the handler stops at its next check" if job.state == JobState.LEASED else "yes"

    @admin.display(description="tags")
    def tag_pills(self, job: JobRecord) -> str:
        return tags_cell(job.tags.all())

    @admin.display(description="tags")
    def tag_list(self, job: JobRecord) -> str:
        return tag_pills(job.tags.all(), reverse("admin:backwave_django_jobrecord_changelist"))

    @admin.display(description="minted by")
    def minted_by(self, job: JobRecord) -> str:
        if job.schedule_id is None:
            return "—"
        pk = schedule_row_id(job.schedule_id)
        if pk is None:
            return format_html("{} (schedule removed)", job.schedule_id)
        url = reverse("admin:backwave_django_recurringschedule_change", args=[pk])
        return format_html('<a href="{}">{}</a>', url, job.schedule_id)

    @admin.display(description="workflow")
    def workflow(self, job: JobRecord) -> str:
        return workflow_link(job.workflow_id)

    @admin.display(description="payload")
    def payload_view(self, job: JobRecord) -> str:
        return pretty_json(job.payload)

    @admin.display(description="output")
    def output_view(self, job: JobRecord) -> str:
        return "—" if job.output is None else pretty_json(job.output)

    @admin.display(description="payload and output")
    def sensitive_hidden(self, job: JobRecord) -> str:
        return HIDDEN_TEXT

    # Which fields show is decided per request (ModelAdmin instances are shared between requests
    # and threads, so no request state is kept on ``self``).

    def get_fieldsets(self, request: HttpRequest, obj: Any = None) -> _FieldsetSpec:
        allowed = can_view_sensitive(request)
        sensitive = SENSITIVE_FIELDS if allowed else ("sensitive_hidden",)
        groups: _FieldsetSpec = [(name, {"fields": fields}) for name, fields in JOB_FIELD_GROUPS]
        return [
            *groups,
            ("Policy", {"fields": POLICY_FIELDS}),
            ("Progress", {"fields": ("progress_view" if allowed else "progress_public",)}),
            ("Payload and output", {"fields": sensitive}),
        ]

    # --- Detail page: timeline, dependencies, buttons ------------------------------------------

    def render_change_form(
        self,
        request: HttpRequest,
        context: dict[str, Any],
        add: bool = False,
        change: bool = False,
        form_url: str = "",
        obj: Any = None,
    ) -> Any:
        # The buttons, timeline and facts all come from ``obj``, the one read Django made for this
        # page: a second read could see a newer state (a Cancel button beside a Cancelled badge).
        if obj is not None:
            context = {
                **self._detail_context(request, obj),
                **context,
                "title": f"Job {obj.wire_name} {short_job_id(obj.job_id)}",
                "subtitle": None,
            }
        return super().render_change_form(request, context, add, change, form_url, obj)

    def _detail_context(self, request: HttpRequest, job: JobRecord) -> dict[str, Any]:
        sensitive = can_view_sensitive(request)
        state = JobState(job.state)
        return {
            "bw_job": job,
            "bw_state_badge": SafeString(job_state_badge(job.state)),
            "bw_sensitive": sensitive,
            "bw_hidden_text": HIDDEN_TEXT,
            "bw_history_off": get_settings().history is HistoryPolicy.OFF,
            **page_context(request, job, sensitive=sensitive),
            **linked_jobs(job.job_id),
            "bw_can_cancel": not state.is_terminal and self.has_cancel_permission(request),
            "bw_can_requeue": state in (JobState.DEAD_LETTERED, JobState.QUARANTINED)
            and self.has_requeue_permission(request),
            "bw_can_retry_now": state is JobState.SCHEDULED
            and job.attempt >= 1
            and self.has_requeue_permission(request),
            "bw_cancel_url": reverse("admin:backwave_django_jobrecord_cancel", args=[job.pk]),
            "bw_requeue_url": reverse("admin:backwave_django_jobrecord_requeue", args=[job.pk]),
            "bw_retry_now_url": reverse("admin:backwave_django_jobrecord_retry_now", args=[job.pk]),
        }

    def get_urls(self) -> list[URLPattern]:
        return [
            # Before the per-job URLs below, which would read "all" as a job id.
            path(
                "all/<slug:action>/",
                self.admin_site.admin_view(self.whole_filter_view),
                name="backwave_django_jobrecord_all",
            ),
            path(
                "tag-suggestions/",
                self.admin_site.admin_view(self.tag_suggestions_view),
                name="backwave_django_jobrecord_tag_suggestions",
            ),
            path(
                "<path:object_id>/cancel/",
                self.admin_site.admin_view(self.cancel_view),
                name="backwave_django_jobrecord_cancel",
            ),
            path(
                "<path:object_id>/requeue/",
                self.admin_site.admin_view(self.requeue_view),
                name="backwave_django_jobrecord_requeue",
            ),
            path(
                "<path:object_id>/retry-now/",
                self.admin_site.admin_view(self.retry_now_view),
                name="backwave_django_jobrecord_retry_now",
            ),
            *super().get_urls(),
        ]

    def whole_filter_view(self, request: HttpRequest, action: str) -> HttpResponse:
        """GET: confirm an action over the whole filter; POST: run it (see :mod:`.job_bulk`)."""
        return whole_filter_view(self, request, action)

    def tag_suggestions_view(self, request: HttpRequest) -> HttpResponse:
        """GET: the tag filter's search suggestions as JSON (``job_tags.suggestions_response``)."""
        return suggestions_response(request, allowed=self.has_view_permission(request))

    @console_button(permission=CANCEL_PERMISSION)
    def cancel_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        """POST: cancel one job (the detail page's Cancel button). A running job is cancelled only
        once the POST says ``confirm=yes``; without it the answer is the confirmation page."""
        job = self.get_object(request, unquote(object_id))
        if job is not None and job.state == JobState.LEASED and request.POST.get("confirm") != "yes":
            return confirm_cancel_running(self, request, job)
        return self._act_on_job(request, object_id, operator.cancel, "Cancel", CANCEL_LABELS, job=job)

    @console_button(permission=REQUEUE_PERMISSION)
    def requeue_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        """POST: requeue one Dead-Lettered or Quarantined job (the detail page's Requeue button)."""
        return self._act_on_job(request, object_id, operator.requeue, "Requeue", REQUEUE_LABELS)

    @console_button(permission=REQUEUE_PERMISSION)
    def retry_now_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        """POST: run a job waiting for a retry now (the detail page's Retry now button)."""
        return self._act_on_job(request, object_id, operator.retry_now, "Retry now", RETRY_NOW_LABELS)

    def _act_on_job(
        self,
        request: HttpRequest,
        object_id: str,
        run: Callable[..., Any],
        verb: str,
        labels: dict[str, str],
        job: JobRecord | None = None,
    ) -> HttpResponse:
        """Run one operator call on the job a button names, log it and say what it did to which job."""
        job = job or self.get_object(request, unquote(object_id))
        if job is None:
            self.message_user(
                request, f"No job with id “{object_id}”; nothing was changed.", messages.WARNING
            )
            return SeeOther(reverse("admin:backwave_django_jobrecord_changelist"))
        result = run(job.job_id, actor=actors.admin_user(request.user)).name
        self.log_change(request, job, f"{verb}: {labels[result]}")
        result_message(self, request, [Acted(result, labels[result], job_name(job))], list(labels.values()))
        return SeeOther(reverse("admin:backwave_django_jobrecord_change", args=[job.pk]))
