"""The job list's actions on selected jobs, each through ``operator`` (one audit row per job that
acted), the words their result messages use, and the confirmation asked before a running job is
cancelled (its handler is interrupted, unlike a job that is only waiting).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.contrib import admin
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.html import format_html

from .. import monitor, operator
from ..core.states import JobState
from ..models import JobRecord
from .console import BREADCRUMBS_AS_LIST, DETAIL_ROWS, bulk_operator_action
from .display import short_job_id, timestamp

CANCEL_LABELS = {
    "CANCELLED_IMMEDIATELY": "cancelled immediately",
    "CANCELLATION_REQUESTED": "cancellation requested",
    "NOT_CANCELLABLE": "not cancellable",
}
REQUEUE_LABELS = {"REQUEUED": "requeued", "NOT_REQUEUEABLE": "not requeueable"}
RETRY_NOW_LABELS = {"RETRIED_NOW": "retried now", "NOT_RETRYING": "not waiting for a retry"}
#: What a cancellation does to a running job, said on every page that asks to confirm one.
RUNNING_CANCEL_TEXT = (
    "A running job is asked to stop: its handler sees the request at its next check "
    "(ctx.cancel_requested, ctx.raise_if_cancelled()) once its worker's next heartbeat delivers "
    "it, and the job ends Cancelled. A handler that never checks runs to its end."
)


def job_name(job: JobRecord) -> str:
    """A job as result messages name it: its wire name and short id, linking to its page."""
    return format_html(
        '<a href="{}">{} <code>{}</code></a>',
        reverse("admin:backwave_django_jobrecord_change", args=[job.pk]),
        job.wire_name,
        short_job_id(job.job_id),
    )


def confirmation_page(
    model_admin: admin.ModelAdmin[Any], request: HttpRequest, context: dict[str, Any]
) -> TemplateResponse:
    """The console's confirmation page (``confirm.html``): what will happen to how many jobs, and a
    form that posts the same request again with the confirmation added. Nothing changes until then."""
    opts = model_admin.opts
    return TemplateResponse(
        request,
        "admin/backwave_django/confirm.html",
        {
            **model_admin.admin_site.each_context(request),
            "opts": opts,
            "app_label": opts.app_label,
            "bw_breadcrumbs_as_list": BREADCRUMBS_AS_LIST,
            "bw_model_url": reverse(f"admin:{opts.app_label}_{opts.model_name}_changelist"),
            **context,
        },
    )


def running_rows(jobs: QuerySet[JobRecord]) -> list[dict[str, Any]]:
    """The running jobs among ``jobs`` (at most ``DETAIL_ROWS``), as the confirmation page lists them."""
    running = jobs.filter(state=JobState.LEASED).prefetch_related(None).order_by("pk")[:DETAIL_ROWS]
    return [
        _running_row(job, job.lease_owner, job.lease_expiry)
        for job in running.only("pk", "job_id", "wire_name", "lease_owner", "lease_expiry")
    ]


def _running_row(job: JobRecord, lease_owner: str | None, lease_expiry: datetime | None) -> dict[str, Any]:
    return {
        "name": job_name(job),
        "detail": format_html("on {}, lease until {}", lease_owner or "—", timestamp(lease_expiry)),
    }


def running_job_rows(job: JobRecord) -> list[dict[str, Any]]:
    """The job as the confirmation page lists it while it runs, read again through the monitor
    (it may have ended since the page linked here); empty once it is no longer Leased."""
    now = monitor.get_job(job.job_id)
    if now is None or now.state is not JobState.LEASED:
        return []
    return [_running_row(job, now.lease_owner, now.lease_expiry)]


def confirm_cancel_running(
    model_admin: admin.ModelAdmin[Any], request: HttpRequest, job: JobRecord
) -> TemplateResponse:
    """Ask before cancelling a running job (the job page's Cancel button)."""
    return confirmation_page(
        model_admin,
        request,
        {
            "title": "Cancel a running job?",
            "bw_lead": format_html("{} is running now.", job_name(job)),
            "bw_explanation": RUNNING_CANCEL_TEXT,
            "bw_items": running_job_rows(job),
            "bw_action_url": reverse("admin:backwave_django_jobrecord_cancel", args=[job.pk]),
            "bw_fields": [("confirm", "yes")],
            "bw_submit": "Yes, cancel the running job",
            "bw_back_url": reverse("admin:backwave_django_jobrecord_change", args=[job.pk]),
            "bw_testid": "bw-confirm-cancel-running",
        },
    )


def confirm_cancel_selection(
    model_admin: admin.ModelAdmin[Any], request: HttpRequest, queryset: QuerySet[Any]
) -> HttpResponse | None:
    """Before "Cancel selected jobs" interrupts running jobs, ask; None once confirmed (or when none runs)."""
    if request.POST.get("bw_confirmed") == "yes":
        return None
    running = running_rows(queryset)
    if not running:
        return None
    selected = request.POST.getlist(ACTION_CHECKBOX_NAME)
    return confirmation_page(
        model_admin,
        request,
        {
            "title": "Cancel running jobs?",
            "bw_lead": f"{len(running):,} of the {len(selected):,} selected jobs are running now.",
            "bw_explanation": RUNNING_CANCEL_TEXT + " The others are cancelled at once.",
            "bw_items": running,
            "bw_action_url": request.get_full_path(),
            "bw_fields": [
                ("action", request.POST.get("action", "")),
                ("index", request.POST.get("index", "0")),
                ("bw_confirmed", "yes"),
                *((ACTION_CHECKBOX_NAME, value) for value in selected),
            ],
            "bw_submit": f"Yes, cancel the {len(selected):,} selected jobs",
            "bw_back_url": request.get_full_path(),
            "bw_testid": "bw-confirm-cancel-selected",
        },
    )


cancel_jobs = bulk_operator_action(
    description="Cancel selected jobs",
    permission="cancel",
    run=lambda job, actor: operator.cancel(job.job_id, actor=actor),
    labels=CANCEL_LABELS,
    name=job_name,
    confirm=confirm_cancel_selection,
)
requeue_jobs = bulk_operator_action(
    description="Requeue selected jobs",
    permission="requeue",
    run=lambda job, actor: operator.requeue(job.job_id, actor=actor),
    labels=REQUEUE_LABELS,
    name=job_name,
)
retry_now_jobs = bulk_operator_action(
    description="Retry selected jobs now",
    permission="requeue",
    run=lambda job, actor: operator.retry_now(job.job_id, actor=actor),
    labels=RETRY_NOW_LABELS,
    name=job_name,
)
