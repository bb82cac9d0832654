"""The Operator audit page: who did what to which job, queue, limit or schedule, and when.

Rows are written by the store, one per operator action that acted (through
:mod:`backwave_django.operator`), and are append-only: here they are only listed, newest first,
each target linking to its job, queue, limit or schedule (a purge's target is its summary, plain text).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from django.contrib import admin
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html

from ..core.states import OperatorAction
from ..models import OperatorAudit
from .console import ReadOnlyAdmin
from .display import short_job_id, timestamp

JOB_ACTIONS = {OperatorAction.CANCEL, OperatorAction.REQUEUE, OperatorAction.RETRY_NOW}
QUEUE_ACTIONS = {
    OperatorAction.PAUSE_QUEUE,
    OperatorAction.RESUME_QUEUE,
    OperatorAction.SET_CONCURRENCY_LIMIT,
}
LIMIT_ACTIONS = {OperatorAction.SET_LIMIT, OperatorAction.CLEAR_LIMIT}


class OperatorAuditAdmin(ReadOnlyAdmin):
    """The audit log, newest first, filterable by action and searchable by target and actor."""

    empty_text = (
        "Nothing audited yet. Every operator action (cancel, requeue, retry now, pause, resume, "
        "a concurrency limit, a limit overridden or cleared, a schedule saved, triggered or removed) "
        "is recorded here with who did it."
    )

    list_display = ("when", "actor", "action", "target_link")
    # An entry's page shows the same cells: its time with its zone, never Django's date format.
    fields = readonly_fields = list_display
    list_filter = ("action",)
    search_fields = ("target", "actor")
    search_help_text = "A job id, queue, limit or schedule id (exact or part), or who acted."
    ordering = ("-id",)

    def changelist_view(self, request: HttpRequest, extra_context: dict[str, Any] | None = None) -> Any:
        return super().changelist_view(request, {"title": "Operator audit", **(extra_context or {})})

    @admin.display(description="when", ordering="id")
    def when(self, row: OperatorAudit) -> str:
        return timestamp(row.recorded_at)

    @admin.display(description="target")
    def target_link(self, row: OperatorAudit) -> str:
        """The job (by its short id), queue, limit or schedule acted on, linking to it; a purge's
        summary."""
        if row.action == OperatorAction.PURGE:
            return row.target
        if row.action in JOB_ACTIONS:
            url = reverse("admin:backwave_django_jobrecord_change", args=[row.target])
            return format_html(
                'job <a href="{}" title="{}"><code>{}</code></a>', url, row.target, short_job_id(row.target)
            )
        if row.action in QUEUE_ACTIONS:
            url = reverse("admin:backwave_django_jobrecord_changelist")
            query = urlencode({"queue": row.target})
            return format_html('queue <a href="{}?{}">{}</a>', url, query, row.target)
        if row.action in LIMIT_ACTIONS:
            url = reverse("admin:backwave_django_limitsettings_changelist")
            return format_html('limit <a href="{}">{}</a>', url, row.target)
        url = reverse("admin:backwave_django_recurringschedule_changelist")
        query = urlencode({"q": row.target})
        return format_html('schedule <a href="{}?{}">{}</a>', url, query, row.target)
