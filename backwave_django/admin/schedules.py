"""The Recurring schedules pages: the list, the detail page with Trigger now, create, edit, delete.

Schedule rows are written only through :mod:`backwave_django.operator`: saving the form calls
``operator.save_schedule`` and deleting (one schedule, or the selected ones) calls
``operator.remove_schedule``, with the acting user as the actor, so every schedule saved or
removed here leaves one ``OperatorAudit`` row. The form validates a definition exactly as the
store would, with the rule the store applies (``planner.require_schedulable``); see ``docs/admin.md``
("Recurring schedules").
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.utils import unquote
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.urls import URLPattern, path, reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from .. import operator, registry
from ..conf import get_settings
from ..core import actors, planner
from ..core.cron_gloss import describe as describe_cron
from ..core.outcomes import ScheduleSpec
from ..core.policy import DEFAULT_POLICY
from ..core.states import CatchUp, JobState
from ..core.validation import SCHEDULE_ID_RULE, validate_schedule_id
from ..models import RecurringSchedule
from ..monitor import has_live_instance, minted_instances, schedule_row_id, with_live_instance
from .console import (
    DETAIL_ROWS,
    TRIGGER_PERMISSION,
    Acted,
    ConsoleAdmin,
    SeeOther,
    bulk_operator_action,
    console_button,
    result_message,
)
from .display import STATE_TONES, job_link, job_state_badge, stored_timestamp, timestamp

if TYPE_CHECKING:
    from django.contrib.admin.options import _FieldsetSpec

TRIGGER_LABELS = {"TRIGGERED": "triggered", "SCHEDULE_NOT_FOUND": "not found"}
#: A wire name no job is registered under: a form error, on a stored schedule or a forged choice.
UNREGISTERED = (
    "No job is registered with wire name “%(value)s”: every instance would be Quarantined. "
    "Declare it with @job(...) in an app's jobs.py, or fix the name."
)
LIVE_INSTANCE = SafeString('<span class="bw-pill" data-testid="bw-live-instance">live instance</span>')
NO_LIVE_INSTANCE = SafeString('<span class="bw-quiet">no live instance</span>')


class RecurringScheduleForm(forms.ModelForm):  # type: ignore[type-arg]
    """Create or redefine a schedule, validated exactly as ``store.upsert_schedule`` validates it.

    Cron and zone go through ``planner.require_schedulable`` (the rule the upsert applies); the wire
    name and payload through ``registry.route`` (what a worker does with each instance), so a
    schedule whose every instance would be Quarantined is refused with the cause. Nothing is saved
    by the form: :meth:`RecurringScheduleAdmin.save_model` hands :attr:`spec` to
    ``operator.save_schedule``.
    """

    spec: ScheduleSpec | None = None

    class Meta:
        model = RecurringSchedule
        fields = (
            "schedule_id",
            "cron",
            "wire_name",
            "payload",
            "queue",
            "time_zone",
            "catch_up",
            "no_overlap",
        )
        help_texts = {
            "schedule_id": f"Fixed once created: {SCHEDULE_ID_RULE}.",
            "cron": "5 fields (minute hour day-of-month month day-of-week) or 6 with seconds first, "
            "e.g. “0 2 * * *” for daily at 02:00. Lists, ranges and steps; no names or macros.",
            "time_zone": "An IANA name such as Europe/Berlin; empty means UTC.",
            "payload": 'The call\'s arguments: {"args": [...], "kwargs": {...}}.',
            "no_overlap": "Mint nothing while an instance of this schedule is still live.",
        }

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if "payload" in self.fields and self.instance.pk is None:
            self.fields["payload"].initial = {"args": [], "kwargs": {}}
        if "wire_name" in self.fields:
            # A choice of the registered jobs (a schedule of anything else would be Quarantined);
            # a stored name no longer registered stays selectable, and the form says why it fails.
            names = sorted(registry.definitions())
            current = self.instance.wire_name if self.instance.pk else None
            if current and current not in names:
                names.append(current)
            self.fields["wire_name"] = forms.ChoiceField(
                choices=[("", "— choose a registered job —"), *((name, _job_label(name)) for name in names)],
                label="Job (wire name)",
                help_text="The registered jobs (@job in an app's jobs.py), by wire name, with their queue.",
                error_messages={"invalid_choice": UNREGISTERED},
            )

    def clean_schedule_id(self) -> str:
        """The one schedule-id rule (``validate_schedule_id``; docs/schedules.md, "Schedule ids")."""
        schedule_id: str = self.cleaned_data["schedule_id"]
        try:
            return validate_schedule_id(schedule_id)
        except ValueError as exc:
            raise forms.ValidationError(str(exc)) from None

    def clean(self) -> dict[str, Any]:
        data: dict[str, Any] = super().clean() or {}
        cron, zone = data.get("cron"), data.get("time_zone") or None
        if cron:
            try:
                planner.require_schedulable(cron, None)
            except ValueError as exc:
                self.add_error("cron", str(exc))
            else:
                if zone is not None:
                    try:
                        planner.require_schedulable(cron, zone)
                    except ValueError as exc:
                        self.add_error("time_zone", str(exc))
        wire_name = data.get("wire_name")
        limit = get_settings().max_wire_name_length
        if wire_name and len(wire_name) > limit:
            self.add_error(
                "wire_name",
                f"The wire name is {len(wire_name):,} characters; MAX_WIRE_NAME_LENGTH is {limit:,}.",
            )
        elif wire_name and registry.get(wire_name) is None:
            self.add_error("wire_name", UNREGISTERED % {"value": wire_name})
        elif wire_name and "payload" in data:
            routed = registry.route(wire_name, data["payload"])
            if isinstance(routed, registry.NotRoutable):
                self.add_error("payload", f"Every instance would be Quarantined: {routed.reason}.")
        if not self.errors:
            self._build_spec(data, zone)
        return data

    def _build_spec(self, data: dict[str, Any], zone: str | None) -> None:
        # Instances run under the job's own policy, as an enqueue of it would.
        definition = registry.get(data["wire_name"])
        policy = definition.policy if definition else DEFAULT_POLICY
        try:
            self.spec = ScheduleSpec(
                schedule_id=self.instance.schedule_id if self.instance.pk else data["schedule_id"],
                cron=data["cron"],
                wire_name=data["wire_name"],
                payload=data["payload"],
                queue=data["queue"],
                time_zone=zone,
                catch_up=CatchUp(data["catch_up"]),
                no_overlap=bool(data["no_overlap"]),
                max_attempts=policy.max_attempts,
                backoff=policy.backoff,
                timeout=policy.timeout,
                **(definition.schedule_flow(data["payload"]) if definition else {}),
            )
        except (TypeError, ValueError) as exc:
            self.add_error(None, str(exc))


def _job_label(wire_name: str) -> str:
    """A wire name as the form offers it: with the queue its job runs on, or why it cannot run."""
    definition = registry.get(wire_name)
    return f"{wire_name} (queue {definition.queue})" if definition else f"{wire_name} (not registered)"


def schedule_name(schedule: RecurringSchedule) -> str:
    """A schedule as result messages name it: a link to its page, and one to its instances."""
    jobs = reverse("admin:backwave_django_jobrecord_changelist")
    instances = f"{jobs}?{urlencode({'schedule_id': schedule.schedule_id})}"
    return format_html(
        '<a href="{}">{}</a> (<a href="{}">its instances</a>)',
        reverse("admin:backwave_django_recurringschedule_change", args=[schedule.pk]),
        schedule.schedule_id,
        instances,
    )


trigger_schedules = bulk_operator_action(
    description="Trigger selected schedules now",
    permission="trigger",
    run=lambda schedule, actor: operator.trigger_schedule(schedule.schedule_id, actor=actor),
    labels=TRIGGER_LABELS,
    name=schedule_name,
)

SCHEDULE_STATUS = (
    "cron_gloss",
    "next_due",
    "live_instance_text",
    "cursor_utc",
    "skipped_count",
    "error",
)


class RecurringScheduleAdmin(ConsoleAdmin):
    """Schedules are created, redefined and deleted here, but written only through the operator.

    A schedule declared in ``settings.BACKWAVE["SCHEDULES"]`` is read-only here: a worker start
    re-applies the settings, so an edit would not stick.
    """

    empty_text = (
        "No recurring schedules. Add one with the button above, or declare it in settings "
        '(BACKWAVE["SCHEDULES"], docs/schedules.md): a worker mints a job at each tick.'
    )

    form = RecurringScheduleForm
    # Five columns that fit at 1280 px: the schedule (its job and queue under it), when it runs
    # (the cron in words, the expression and the zone), the next due time, how it catches up,
    # and its status (a live instance, skipped ticks, or the error of one that no longer resolves).
    list_display = ("schedule_id", "cron_gloss", "next_due", "policy", "status")
    ordering = ("schedule_id",)
    search_fields = ("schedule_id", "wire_name")
    actions = (trigger_schedules,)

    def has_trigger_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm(TRIGGER_PERMISSION)

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        declared = obj is not None and obj.declared_in_settings
        return not declared and super().has_change_permission(request, obj)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        declared = obj is not None and obj.declared_in_settings
        return not declared and super().has_delete_permission(request, obj)

    def get_queryset(self, request: HttpRequest) -> QuerySet[RecurringSchedule]:
        schedules: QuerySet[RecurringSchedule] = with_live_instance(super().get_queryset(request))
        return schedules

    def changelist_view(self, request: HttpRequest, extra_context: dict[str, Any] | None = None) -> Any:
        return super().changelist_view(request, {"title": "Recurring schedules", **(extra_context or {})})

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> tuple[str, ...]:
        return () if obj is None else ("schedule_id", *SCHEDULE_STATUS)

    def get_fieldsets(self, request: HttpRequest, obj: Any = None) -> _FieldsetSpec:
        fields = RecurringScheduleForm.Meta.fields
        if obj is None:
            return [(None, {"fields": fields})]
        return [("Definition", {"fields": fields}), ("Status", {"fields": SCHEDULE_STATUS})]

    def save_model(self, request: HttpRequest, obj: RecurringSchedule, form: Any, change: bool) -> None:
        """Hand the validated definition to the operator (which audits it; the store writes the row)."""
        spec = form.spec
        assert spec is not None, "save_model runs only after the form validated"
        operator.save_schedule(spec, actor=actors.admin_user(request.user))
        obj.pk = schedule_row_id(spec.schedule_id)

    def delete_model(self, request: HttpRequest, obj: RecurringSchedule) -> None:
        """The delete page: remove the schedule through the operator (minted instances stay)."""
        operator.remove_schedule(obj.schedule_id, actor=actors.admin_user(request.user))

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[RecurringSchedule]) -> None:
        """The "delete selected" action: one operator removal (and audit row) per schedule."""
        actor = actors.admin_user(request.user)
        for schedule_id in queryset.values_list("schedule_id", flat=True):
            operator.remove_schedule(schedule_id, actor=actor)

    # --- Columns -------------------------------------------------------------------------------

    @admin.display(description="runs", ordering="cron")
    def cron_gloss(self, row: RecurringSchedule) -> str:
        gloss = describe_cron(row.cron)
        zone = row.time_zone or "UTC"
        if gloss == row.cron:
            return format_html('<code>{}</code> <small class="bw-quiet">{}</small>', row.cron, zone)
        return format_html(
            '{} <small class="bw-quiet">{}</small><br><code class="bw-raw-cron">{}</code>',
            gloss,
            zone,
            row.cron,
        )

    @admin.display(description="next due")
    def next_due(self, row: RecurringSchedule) -> str:
        return timestamp(planner.next_due(row.cron, row.time_zone, row.cursor)[0])

    @admin.display(description="catch-up")
    def policy(self, row: RecurringSchedule) -> str:
        return format_html(
            '<span class="bw-nowrap">{}</span><small class="bw-quiet bw-block">{}</small>',
            CatchUp(row.catch_up).label,
            "no overlap" if row.no_overlap else "overlap allowed",
        )

    @admin.display(description="status")
    def status(self, row: RecurringSchedule) -> str:
        """A live instance, recorded skipped ticks, and the error of a schedule that no longer resolves."""
        parts: list[str] = [LIVE_INSTANCE if self.live_instance(row) else NO_LIVE_INSTANCE]
        skipped = self.skipped_count(row)
        if skipped:
            plural = "" if skipped == 1 else "s"
            parts.append(format_html('<span class="bw-block">{} skipped tick{}</span>', skipped, plural))
        problem = planner.schedule_error(row.cron, row.time_zone)
        if problem:
            parts.append(self.error(row))
        return format_html_join("", "{}", ((part,) for part in parts))

    @admin.display(description="live instance")
    def live_instance(self, row: RecurringSchedule) -> bool:
        live = getattr(row, "has_live_instance", None)
        if live is None:
            live = has_live_instance(row.schedule_id)
        return bool(live)

    @admin.display(description="live instance")
    def live_instance_text(self, row: RecurringSchedule) -> str:
        return "yes" if self.live_instance(row) else "no"

    @admin.display(description="cursor")
    def cursor_utc(self, row: RecurringSchedule) -> str:
        return timestamp(row.cursor)

    @admin.display(description="skipped ticks")
    def skipped_count(self, row: RecurringSchedule) -> int:
        return len(row.skipped_ticks or [])

    @admin.display(description="error")
    def error(self, row: RecurringSchedule) -> str:
        problem = planner.schedule_error(row.cron, row.time_zone)
        if problem is None:
            return "—"
        return format_html(
            '<span class="bw-error bw-block" style="color:{}">{}</span>',
            STATE_TONES[JobState.QUARANTINED],
            problem,
        )

    # --- Detail page and the Trigger-now button --------------------------------------------------

    def change_view(
        self,
        request: HttpRequest,
        object_id: str,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> Any:
        visible = self.has_view_or_change_permission(request)
        schedule = self.get_object(request, unquote(object_id)) if visible else None
        context = dict(extra_context or {})
        if schedule is not None:
            context["title"] = f"Schedule {schedule.schedule_id}"
            context["subtitle"] = None
            jobs_url = reverse("admin:backwave_django_jobrecord_changelist")
            context.update(
                bw_schedule=schedule,
                bw_error=planner.schedule_error(schedule.cron, schedule.time_zone),
                bw_instances=_minted_instances(schedule.schedule_id),
                bw_all_instances_url=f"{jobs_url}?{urlencode({'schedule_id': schedule.schedule_id})}",
                bw_skipped_ticks=[
                    SafeString(stored_timestamp(tick)) for tick in reversed(schedule.skipped_ticks or [])
                ],
                bw_can_trigger=self.has_trigger_permission(request),
                bw_trigger_url=reverse("admin:backwave_django_recurringschedule_trigger", args=[schedule.pk]),
            )
        return super().change_view(request, object_id, form_url, context)

    def get_urls(self) -> list[URLPattern]:
        return [
            path(
                "<path:object_id>/trigger/",
                self.admin_site.admin_view(self.trigger_view),
                name="backwave_django_recurringschedule_trigger",
            ),
            *super().get_urls(),
        ]

    @console_button(permission=TRIGGER_PERMISSION)
    def trigger_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        """POST: mint one instance of the schedule now."""
        schedule = self.get_object(request, unquote(object_id))
        if schedule is None:
            self.message_user(
                request, f"No schedule with id “{object_id}”; nothing was triggered.", messages.WARNING
            )
            return SeeOther(reverse("admin:backwave_django_recurringschedule_changelist"))
        result = operator.trigger_schedule(schedule.schedule_id, actor=actors.admin_user(request.user)).name
        label = TRIGGER_LABELS[result]
        self.log_change(request, schedule, f"Trigger now: {label}")
        done = [Acted(result, label, schedule_name(schedule))]
        result_message(self, request, done, list(TRIGGER_LABELS.values()))
        return SeeOther(reverse("admin:backwave_django_recurringschedule_change", args=[schedule.pk]))


def _minted_instances(schedule_id: str) -> list[dict[str, Any]]:
    """The newest minted instances of a schedule, for its detail page."""
    return [
        {
            "link": SafeString(
                job_link(reverse("admin:backwave_django_jobrecord_change", args=[job.sequence]), job.job_id)
            ),
            "job_id": job.job_id,
            "badge": SafeString(job_state_badge(job.state)),
            "attempt": job.attempt,
            "due": SafeString(timestamp(job.due_time)),
            "terminal": SafeString(timestamp(job.terminal_at)),
        }
        for job in minted_instances(schedule_id, limit=DETAIL_ROWS)
    ]
