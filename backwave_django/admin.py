"""The operator console in the Django admin.

Rows are read-only: nothing here edits a job, queue or schedule row directly. State changes are
admin actions that go through :mod:`backwave_django.operator` (which audits them), each gated by
its permission (SPEC §7) and hidden without it. Payload, output and failure detail are shown only
with ``view_sensitive_jobrecord``, and never while ``BACKWAVE_DISABLE_SENSITIVE_DATA`` is set.
"""

from __future__ import annotations

import json
import uuid
from collections import Counter
from collections.abc import Callable
from typing import Any

from django.contrib import admin, messages
from django.db.models import Count, Q, QuerySet
from django.http import HttpRequest
from django.utils import timezone
from django.utils.html import format_html, format_html_join

from . import operator
from .conf import env_flag, get_settings
from .core import planner
from .core.states import JobState, TerminalStateClass
from .models import JobRecord, JobTransition, OperatorAudit, QueueSettings, RecurringSchedule, WorkerNode

SENSITIVE_PERMISSION = "backwave_django.view_sensitive_jobrecord"
DISABLE_SENSITIVE_ENV = "BACKWAVE_DISABLE_SENSITIVE_DATA"

#: Badge tones per state (neutral, info, active, success, muted, danger, warning).
STATE_TONES = {
    JobState.SCHEDULED: "#5b6b7f",
    JobState.AWAITING_PARENT: "#2f6f9f",
    JobState.LEASED: "#8a5a00",
    JobState.SUCCEEDED: "#2e7d32",
    JobState.CANCELLED: "#6d6d6d",
    JobState.DEAD_LETTERED: "#b3261e",
    JobState.QUARANTINED: "#a35200",
}


def can_view_sensitive(request: HttpRequest) -> bool:
    """Payload, output and failure detail: the permission, and the environment kill-switch off."""
    return not env_flag(DISABLE_SENSITIVE_ENV) and request.user.has_perm(SENSITIVE_PERMISSION)


def _badge(state: int) -> str:
    job_state = JobState(state)
    return format_html(
        '<span style="background:{};color:#fff;padding:1px 6px;border-radius:8px">{}</span>',
        STATE_TONES[job_state],
        job_state.label,
    )


def _pretty_json(value: Any) -> str:
    return format_html("<pre style='white-space:pre-wrap;margin:0'>{}</pre>", json.dumps(value, indent=2))


def _report(
    modeladmin: admin.ModelAdmin[Any],
    request: HttpRequest,
    counts: Counter[str],
    order: list[str] | None = None,
) -> None:
    """One message that counts the results: "3 cancelled immediately, 1 not cancellable"."""
    labels = sorted(counts, key=lambda label: (order or []).index(label) if label in (order or []) else 99)
    text = ", ".join(f"{counts[label]} {label}" for label in labels) or "nothing selected"
    modeladmin.message_user(request, text[:1].upper() + text[1:] + ".", messages.INFO)


class _ReadOnlyAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    """Rows are never added, edited or deleted here; only viewed."""

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class TerminalClassFilter(admin.SimpleListFilter):
    title = "terminal class"
    parameter_name = "terminal_class"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [(str(c.value), str(c.label)) for c in TerminalStateClass]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        if self.value() is None:
            return queryset
        return queryset.filter(state__in=TerminalStateClass(int(self.value() or 0)).states)


class TagFilter(admin.SimpleListFilter):
    title = "tag"
    parameter_name = "tag"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        from .models import JobTag

        top = JobTag.objects.values_list("key", "value").annotate(n=Count("id")).order_by("-n")[:20]
        return [(f"{k}:{v}" if k else v, f"{k}: {v}" if k else v) for k, v, _ in top]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        value = self.value()
        if not value:
            return queryset
        key, sep, tag = value.partition(":")
        pair = (key, tag) if sep else ("", value)
        return queryset.filter(tags__key=pair[0], tags__value=pair[1])


class TransitionInline(admin.TabularInline):  # type: ignore[type-arg]
    model = JobTransition
    extra = 0
    can_delete = False
    ordering = ("ordinal",)
    fields = ("ordinal", "state_badge", "attempt", "actor", "recorded_at", "detail")
    readonly_fields = fields
    verbose_name_plural = "transition log"

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        # The log is part of the job: whoever may view the job may view its log.
        return request.user.has_perm("backwave_django.view_jobrecord")

    def get_formset(self, request: HttpRequest, obj: Any = None, **kwargs: Any) -> Any:
        self._sensitive = can_view_sensitive(request)
        return super().get_formset(request, obj, **kwargs)

    @admin.display(description="state")
    def state_badge(self, entry: JobTransition) -> str:
        return _badge(entry.state)

    @admin.display(description="failure detail")
    def detail(self, entry: JobTransition) -> str:
        if entry.failure_detail is None:
            return "—"
        if not getattr(self, "_sensitive", False):
            return "Hidden: needs the “view sensitive” permission."
        return format_html("<pre style='white-space:pre-wrap;margin:0'>{}</pre>", entry.failure_detail)


def _operator_action(
    *, description: str, permission: str, run: Callable[[Any, str], Any], labels: dict[str, str]
) -> Callable[..., None]:
    """A bulk admin action: run one operator call per selected row and report the counted results."""

    @admin.action(description=description, permissions=[permission])
    def action(modeladmin: admin.ModelAdmin[Any], request: HttpRequest, queryset: QuerySet[Any]) -> None:
        counts: Counter[str] = Counter()
        actor = request.user.get_username()
        for obj in queryset:
            result = run(obj, actor)
            label = labels.get(getattr(result, "name", ""), "done")
            counts[label] += 1
            modeladmin.log_change(request, obj, f"{description}: {label}")
        _report(modeladmin, request, counts, list(labels.values()))

    action.__name__ = description.lower().replace(" ", "_")
    return action


cancel_jobs = _operator_action(
    description="Cancel selected jobs",
    permission="cancel",
    run=lambda job, actor: operator.cancel(job.job_id, actor=actor),
    labels={
        "CANCELLED_IMMEDIATELY": "cancelled immediately",
        "CANCELLATION_REQUESTED": "cancellation requested",
        "NOT_CANCELLABLE": "not cancellable",
    },
)
requeue_jobs = _operator_action(
    description="Requeue selected jobs",
    permission="requeue",
    run=lambda job, actor: operator.requeue(job.job_id, actor=actor),
    labels={"REQUEUED": "requeued", "NOT_REQUEUEABLE": "not requeueable"},
)


@admin.register(JobRecord)
class JobRecordAdmin(_ReadOnlyAdmin):
    list_display = (
        "short_id",
        "wire_name",
        "queue",
        "state_badge",
        "attempt_of",
        "due_time",
        "terminal_at",
        "tag_list",
    )
    list_filter = ("state", TerminalClassFilter, "queue", "wire_name", "schedule_id", TagFilter)
    ordering = ("-sequence",)
    list_per_page = 50
    show_full_result_count = False  # no COUNT(*) over the whole table on every page
    actions = (cancel_jobs, requeue_jobs)
    inlines = (TransitionInline,)
    search_help_text = "A job id, or part of a wire name or tag value."
    search_fields = ("wire_name",)
    readonly_fields = (
        "job_id",
        "wire_name",
        "queue",
        "state_badge",
        "attempt",
        "due_time",
        "enqueued_at",
        "lease_owner",
        "lease_expiry",
        "cancel_requested",
        "terminal_at",
        "terminal_cause",
        "parents_remaining",
        "mode",
        "schedule_id",
        "tag_list",
        "payload_view",
        "output_view",
    )
    fields = readonly_fields

    def has_cancel_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm("backwave_django.cancel_jobrecord")

    def has_requeue_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm("backwave_django.requeue_jobrecord")

    def get_queryset(self, request: HttpRequest) -> QuerySet[JobRecord]:
        return super().get_queryset(request).defer("payload", "output").prefetch_related("tags")

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet[Any], search_term: str
    ) -> tuple[QuerySet[Any], bool]:
        term = search_term.strip()
        if not term:
            return queryset, False
        try:
            return queryset.filter(job_id=uuid.UUID(term)), False
        except ValueError:
            pass
        matches = Q(wire_name__icontains=term) | Q(tags__value__icontains=term)
        return queryset.filter(matches).distinct(), True

    @admin.display(description="job id", ordering="sequence")
    def short_id(self, job: JobRecord) -> str:
        return format_html('<span title="{}">{}</span>', job.job_id, str(job.job_id)[:8])

    @admin.display(description="state", ordering="state")
    def state_badge(self, job: JobRecord) -> str:
        return _badge(job.state)

    @admin.display(description="attempt")
    def attempt_of(self, job: JobRecord) -> str:
        from .registry import get

        definition = get(job.wire_name)
        ceiling = (definition.retry if definition and definition.retry else get_settings().retry).max_attempts
        return f"{job.attempt} / {ceiling}"

    @admin.display(description="tags")
    def tag_list(self, job: JobRecord) -> str:
        return format_html_join(", ", "{}", ((str(tag),) for tag in job.tags.all())) or "—"

    # Payload and output: which fields are shown is decided per request (ModelAdmin instances are
    # shared between requests and threads, so no request state is kept on ``self``).

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> tuple[str, ...]:
        return self._fields_for(request)

    def get_fields(self, request: HttpRequest, obj: Any = None) -> tuple[str, ...]:
        return self._fields_for(request)

    def _fields_for(self, request: HttpRequest) -> tuple[str, ...]:
        sensitive = ("payload_view", "output_view") if can_view_sensitive(request) else ("sensitive_hidden",)
        return (*self.readonly_fields[:-2], *sensitive)

    @admin.display(description="payload")
    def payload_view(self, job: JobRecord) -> str:
        return "—" if job.payload is None else _pretty_json(job.payload)

    @admin.display(description="output")
    def output_view(self, job: JobRecord) -> str:
        return "—" if job.output is None else _pretty_json(job.output)

    @admin.display(description="payload and output")
    def sensitive_hidden(self, job: JobRecord) -> str:
        return "Hidden: needs the “view sensitive” permission."


def _queue_action(description: str, call: Callable[[str, str], None]) -> Callable[..., None]:
    @admin.action(description=description, permissions=["pause"])
    def action(modeladmin: admin.ModelAdmin[Any], request: HttpRequest, queryset: QuerySet[Any]) -> None:
        actor = request.user.get_username()
        for row in queryset:
            call(row.queue, actor)
            modeladmin.log_change(request, row, description)
        _report(modeladmin, request, Counter({description.split()[0].lower() + "d": queryset.count()}))

    action.__name__ = description.lower().replace(" ", "_")
    return action


@admin.register(QueueSettings)
class QueueSettingsAdmin(_ReadOnlyAdmin):
    list_display = ("queue", "status", "concurrency_limit", "in_use")
    ordering = ("queue",)
    actions = (
        _queue_action("Pause selected queues", lambda q, actor: operator.pause_queue(q, actor=actor)),
        _queue_action("Resume selected queues", lambda q, actor: operator.resume_queue(q, actor=actor)),
    )

    def has_pause_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm("backwave_django.pause_queuesettings")

    @admin.display(description="status")
    def status(self, row: QueueSettings) -> str:
        return "Paused" if row.paused else "Claiming"

    @admin.display(description="leased")
    def in_use(self, row: QueueSettings) -> int:
        return JobRecord.objects.filter(queue=row.queue, state=JobState.LEASED).count()


trigger_schedules = _operator_action(
    description="Trigger selected schedules now",
    permission="trigger",
    run=lambda schedule, actor: operator.trigger_schedule(schedule.schedule_id, actor=actor),
    labels={"TRIGGERED": "triggered", "SCHEDULE_NOT_FOUND": "not found"},
)


@admin.register(RecurringSchedule)
class RecurringScheduleAdmin(_ReadOnlyAdmin):
    list_display = (
        "schedule_id",
        "wire_name",
        "cron",
        "time_zone",
        "catch_up",
        "no_overlap",
        "cursor",
        "error",
    )
    ordering = ("schedule_id",)
    actions = (trigger_schedules,)

    def has_trigger_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm("backwave_django.trigger_recurringschedule")

    @admin.display(description="error")
    def error(self, row: RecurringSchedule) -> str:
        return planner.schedule_error(row.cron, row.time_zone) or "—"


@admin.register(WorkerNode)
class WorkerNodeAdmin(_ReadOnlyAdmin):
    list_display = (
        "worker_id",
        "hostname",
        "pid",
        "queue_list",
        "concurrency",
        "started_at",
        "last_seen_at",
        "alive",
    )
    ordering = ("-last_seen_at",)

    @admin.display(description="queues")
    def queue_list(self, row: WorkerNode) -> str:
        return ", ".join(str(q) for q in row.queues)

    @admin.display(description="alive", boolean=True)
    def alive(self, row: WorkerNode) -> bool:
        stale_after = get_settings().heartbeat_interval * 5
        return timezone.now() - row.last_seen_at <= stale_after


@admin.register(OperatorAudit)
class OperatorAuditAdmin(_ReadOnlyAdmin):
    list_display = ("recorded_at", "actor", "action", "target")
    list_filter = ("action",)
    search_fields = ("target", "actor")
    ordering = ("-id",)
