"""The operator console in the Django admin.

Rows are read-only: nothing here edits a job or queue row directly, and schedule rows are written
only through ``store.upsert_schedule`` / ``store.remove_schedule``. State changes are operator
actions (bulk admin actions and per-object POST buttons) that go through
:mod:`backwave_django.operator`, which audits them; each is gated by its permission (SPEC §7),
hidden without it, answered with a message counting the results, and logged as a Django
``LogEntry`` for the acting user. Payload, output and failure detail are shown only with
``view_sensitive_jobrecord``, and never while ``BACKWAVE_DISABLE_SENSITIVE_DATA`` is set.

The job list is built for large tables: no full ``COUNT(*)`` per page load (an estimate when
unfiltered, a capped count otherwise), filters whose choices never scan the job table, tags
prefetched per page, newest first along the primary key.
"""

from __future__ import annotations

import json
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.contrib.admin.utils import unquote
from django.contrib.admin.views.main import ChangeList
from django.core.exceptions import PermissionDenied, ValidationError
from django.core.paginator import Paginator
from django.db import connections
from django.db.models import BooleanField, Exists, ExpressionWrapper, OuterRef, Q, QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseNotAllowed, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils import timezone
from django.utils.functional import cached_property
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from . import clock, monitor, operator, registry, store
from .conf import env_flag, get_settings
from .core import planner
from .core.cron_gloss import describe as describe_cron
from .core.encoding import json_size
from .core.outcomes import ScheduleSpec
from .core.states import CatchUp, HistoryPolicy, JobState, TerminalStateClass
from .models import (
    JobDependency,
    JobRecord,
    JobTag,
    JobTransition,
    OperatorAudit,
    QueueSettings,
    RecurringSchedule,
    WorkerNode,
)

if TYPE_CHECKING:
    from django.contrib.admin.options import _FieldsetSpec

CANCEL_PERMISSION = "backwave_django.cancel_jobrecord"
REQUEUE_PERMISSION = "backwave_django.requeue_jobrecord"
SENSITIVE_PERMISSION = "backwave_django.view_sensitive_jobrecord"
TRIGGER_PERMISSION = "backwave_django.trigger_recurringschedule"
PAUSE_PERMISSION = "backwave_django.pause_queuesettings"
DISABLE_SENSITIVE_ENV = "BACKWAVE_DISABLE_SENSITIVE_DATA"

#: Badge colours per state, the reference tones: Scheduled amber, Awaiting Parent navy, Leased
#: wave blue, Succeeded green, Cancelled navy, Dead-Lettered and Quarantined red.
STATE_TONES = {
    JobState.SCHEDULED: "#9a6700",
    JobState.AWAITING_PARENT: "#24406b",
    JobState.LEASED: "#1f6feb",
    JobState.SUCCEEDED: "#1a7f37",
    JobState.CANCELLED: "#24406b",
    JobState.DEAD_LETTERED: "#b3261e",
    JobState.QUARANTINED: "#b3261e",
}
PAUSED_TONE = STATE_TONES[JobState.SCHEDULED]
CLAIMING_TONE = STATE_TONES[JobState.SUCCEEDED]
STALE_TONE = "#6e7781"

#: Filtered job lists are counted exactly up to this many rows and shown as "1,000+" beyond: a
#: count that stops early costs the same on any table size (20 pages of 50; narrow the filter for more).
COUNT_CAP = 1_000
#: The failure tabs count up to this many jobs each ("1,000+").
FAILURE_COUNT_CAP = 1_000
#: The tag filter offers the most common tags among this many of the newest tag rows.
TAG_SAMPLE = 2_000
#: How many tags the tag filter offers.
TAG_CHOICES = 20
#: How many gating parents / waiting children and minted instances a detail page lists.
DETAIL_ROWS = 50

HIDDEN_TEXT = "Hidden: needs the “view sensitive” permission."

#: The copy button's icon, two overlapping sheets drawn inline: no font glyph for "copy" renders
#: everywhere (U+29C9 is an empty box in common Linux browser fonts). The button carries the label.
COPY_ICON = SafeString(
    '<svg class="bw-copy-icon" width="12" height="12" viewBox="0 0 16 16" aria-hidden="true" '
    'focusable="false"><rect x="5" y="5" width="9.5" height="9.5" rx="1.5" fill="none" '
    'stroke="currentColor" stroke-width="1.6"/><path d="M3 11h-.5A1.5 1.5 0 0 1 1 9.5v-7A1.5 1.5 0 0 '
    '1 2.5 1h7A1.5 1.5 0 0 1 11 2.5V3" fill="none" stroke="currentColor" stroke-width="1.6"/></svg>'
)

#: The failures view: two tabs over the job list, never merged (label, state, blurb, test id).
FAILURE_TABS = (
    ("Dead-Lettered", JobState.DEAD_LETTERED, "ran and kept failing", "bw-failures-dead-lettered"),
    ("Quarantined", JobState.QUARANTINED, "could not be routed or decoded", "bw-failures-quarantined"),
)

CANCEL_LABELS = {
    "CANCELLED_IMMEDIATELY": "cancelled immediately",
    "CANCELLATION_REQUESTED": "cancellation requested",
    "NOT_CANCELLABLE": "not cancellable",
}
REQUEUE_LABELS = {"REQUEUED": "requeued", "NOT_REQUEUEABLE": "not requeueable"}
TRIGGER_LABELS = {"TRIGGERED": "triggered", "SCHEDULE_NOT_FOUND": "not found"}


# --- Shared helpers --------------------------------------------------------------------------


def _django_breadcrumbs_are_a_list() -> bool:
    """Whether the installed Django marks breadcrumbs up as ``<ol class="breadcrumbs">``.

    Django 6 styles only that list, Django 5.2 only ``<div class="breadcrumbs">`` with ``&rsaquo;``
    between the links. The console's own pages (Dashboard, Queues) draw the same markup as
    Django's pages, so this is read from Django's own ``admin/base.html`` rather than guessed
    from a version number.
    """
    base = Path(admin.__file__).parent / "templates" / "admin" / "base.html"
    return '<ol class="breadcrumbs">' in base.read_text(encoding="utf-8")


#: Context for ``admin/backwave_django/breadcrumbs.html``: which markup the installed Django styles.
BREADCRUMBS_AS_LIST = _django_breadcrumbs_are_a_list()


def can_view_sensitive(request: HttpRequest) -> bool:
    """Payload, output and failure detail: the permission, and the environment kill-switch off."""
    return not env_flag(DISABLE_SENSITIVE_ENV) and request.user.has_perm(SENSITIVE_PERMISSION)


def format_instant(value: datetime | None) -> str:
    """UTC with second precision, sortable (``2026-01-01 00:00:00Z``); "—" when unset."""
    if value is None:
        return "—"
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%SZ")


def _tone_badge(text: str, tone: str, **data: str) -> str:
    attributes = format_html_join("", ' data-{}="{}"', data.items())
    return format_html(
        '<span class="bw-badge"{} style="background:{};color:#fff;padding:1px 7px;border-radius:8px;'
        'white-space:nowrap">{}</span>',
        attributes,
        tone,
        text,
    )


def _badge(state: int) -> str:
    job_state = JobState(state)
    return _tone_badge(str(job_state.label), STATE_TONES[job_state], state=job_state.pascal)


def _pretty_json(value: Any) -> str:
    size = json_size(value)
    return format_html(
        '<div class="bw-json"><small>{} bytes · JSON</small>'
        "<pre style='white-space:pre-wrap;margin:0'>{}</pre></div>",
        f"{size:,}",
        json.dumps(value, indent=2, ensure_ascii=False),
    )


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


class SeeOther(HttpResponseRedirect):
    """POST/redirect/GET: the answer to every operator button."""

    status_code = 303


def _tag_query(key: str, value: str) -> str:
    """The job-list query string that filters by one tag (a label has ``key == ""``)."""
    return urlencode({"tk": key, "tv": value} if key else {"tl": value})


def _tag_pills(tags: Any, base_url: str = "") -> str:
    return (
        format_html_join(
            " ",
            '<a class="bw-tag" href="{}?{}">{}</a>',
            ((base_url, _tag_query(tag.key, tag.value), str(tag)) for tag in tags),
        )
        or "—"
    )


class _ConsoleAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    """A console changelist whose bulk actions refuse a malformed selection.

    Django filters ``pk__in=<the posted _selected_action values>`` as given, so a value that is not
    a primary key of this model (``abc``, a job's UUID, ``1;DROP TABLE x``, a number out of range)
    would raise inside the action: a server error. Each value is checked first; one bad value
    refuses the whole request with a message, and nothing is changed.
    """

    def response_action(
        self, request: HttpRequest, queryset: QuerySet[Any], *args: Any, **kwargs: Any
    ) -> HttpResponse | None:
        # ``*args, **kwargs``: Django 6.1 also passes where the action was run (``action_location``).
        pk = self.opts.pk
        for value in request.POST.getlist(ACTION_CHECKBOX_NAME):
            try:
                pk.run_validators(pk.to_python(value))
            except ValidationError:
                self.message_user(
                    request,
                    f"“{value[:40]}” is not the id of a {self.opts.verbose_name} listed here; "
                    "nothing was changed.",
                    messages.ERROR,
                )
                return HttpResponseRedirect(request.get_full_path())
        return super().response_action(request, queryset, *args, **kwargs)


class _ReadOnlyAdmin(_ConsoleAdmin):
    """Rows are never added, edited or deleted here; only viewed."""

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


def _require_post(request: HttpRequest) -> HttpResponse | None:
    """Operator buttons change state, so they answer only POST (CSRF-checked by ``admin_view``)."""
    return None if request.method == "POST" else HttpResponseNotAllowed(["POST"])


# --- The job list at scale ---------------------------------------------------------------------


def _estimated_rows(queryset: QuerySet[Any]) -> int | None:
    """The planner's row estimate for the whole table (PostgreSQL, MariaDB/MySQL), or None."""
    connection = connections[queryset.db]
    table = queryset.model._meta.db_table
    if connection.vendor == "postgresql":
        sql = "SELECT reltuples::bigint FROM pg_class WHERE oid = to_regclass(%s)"
        params = [connection.ops.quote_name(table)]
    elif connection.vendor == "mysql":
        sql = (
            "SELECT table_rows FROM information_schema.tables "
            "WHERE table_schema = DATABASE() AND table_name = %s"
        )
        params = [table]
    else:
        return None
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        row = cursor.fetchone()
    # PostgreSQL reports -1 for a table that was never vacuumed or analysed.
    return int(row[0]) if row and row[0] is not None and row[0] >= 0 else None


class EstimatedCountPaginator(Paginator):  # type: ignore[type-arg]
    """A paginator that never counts a million rows to draw a page.

    Unfiltered, the count is the database's own estimate (``pg_class.reltuples`` on PostgreSQL,
    ``information_schema`` on MariaDB/MySQL) once the table is larger than :data:`COUNT_CAP`;
    filtered, or on SQLite, it is an exact count of at most ``COUNT_CAP + 1`` rows, reported as
    ``COUNT_CAP`` when there are more. ``count_label`` says which ("about 1,000,000", "1,000+").
    """

    count_kind = "exact"

    @cached_property
    def count(self) -> int:
        queryset = self.object_list
        if not isinstance(queryset, QuerySet):
            return len(queryset)
        if not queryset.query.where:
            estimate = _estimated_rows(queryset)
            if estimate is not None and estimate > COUNT_CAP:
                self.count_kind = "estimate"
                return estimate
        counted = queryset.order_by()[: COUNT_CAP + 1].count()
        if counted > COUNT_CAP:
            self.count_kind = "capped"
            return COUNT_CAP
        return counted

    @property
    def count_label(self) -> str:
        count = self.count
        if self.count_kind == "estimate":
            return f"about {count:,}"
        if self.count_kind == "capped":
            return f"{count:,}+"
        return f"{count:,}"


def _pop_param(params: dict[str, Any], name: str) -> str | None:
    """One query-string value a filter owns (Django passes lists; the last value wins)."""
    value = params.pop(name, None)
    if isinstance(value, list):
        value = value[-1] if value else None
    return value or None


class _ChoicesFilter(admin.SimpleListFilter):
    """A filter whose choices come from a cheap source, never from a scan of the job table.

    The active value is always offered, so a deep link to a value not in the source still shows.
    """

    field = ""

    def known_values(self) -> list[str]:
        raise NotImplementedError

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        values = set(self.known_values())
        if self.value():
            values.add(str(self.value()))
        return [(value, value) for value in sorted(values)]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        value = self.value()
        return queryset.filter(**{self.field: value}) if value else queryset


class QueueFilter(_ChoicesFilter):
    """Queues named by stored settings or by a registered job, and ``default``."""

    title = "queue"
    parameter_name = field = "queue"

    def known_values(self) -> list[str]:
        return [
            "default",
            *(definition.queue for definition in registry.definitions().values()),
            *QueueSettings.objects.values_list("queue", flat=True),
        ]


class WireNameFilter(_ChoicesFilter):
    """The registry's known wire names."""

    title = "wire name"
    parameter_name = field = "wire_name"

    def known_values(self) -> list[str]:
        return list(registry.definitions())


class ScheduleFilter(_ChoicesFilter):
    """The recurring schedules that exist (instances of removed ones: by deep link)."""

    title = "schedule"
    parameter_name = field = "schedule_id"

    def known_values(self) -> list[str]:
        return list(RecurringSchedule.objects.values_list("schedule_id", flat=True))


class TerminalClassFilter(admin.SimpleListFilter):
    title = "terminal class"
    parameter_name = "terminal_class"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [(str(c.value), str(c.label)) for c in TerminalStateClass]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        try:
            state_class = TerminalStateClass(int(self.value() or ""))
        except ValueError:
            return queryset
        return queryset.filter(state__in=state_class.states)


class TagFilter(admin.ListFilter):
    """Has a tag: ``?tl=<label>`` or ``?tk=<key>&tv=<value>``.

    Key and value travel as separate parameters, so a colon or ``=`` inside a tag round-trips
    (nothing is ever split). The choices are the most common tags among the newest
    :data:`TAG_SAMPLE` tag rows, so offering them costs the same on any table size.
    """

    title = "tag"
    LABEL, KEY, VALUE = "tl", "tk", "tv"

    def __init__(self, request: HttpRequest, params: dict[str, Any], model: Any, model_admin: Any) -> None:
        super().__init__(request, params, model, model_admin)
        self.label = _pop_param(params, self.LABEL)
        self.key = _pop_param(params, self.KEY)
        self.tag_value = _pop_param(params, self.VALUE)
        for name, value in ((self.LABEL, self.label), (self.KEY, self.key), (self.VALUE, self.tag_value)):
            if value is not None:
                self.used_parameters[name] = value

    @property
    def selected(self) -> tuple[str, str] | None:
        if self.label:
            return ("", self.label)
        if self.key and self.tag_value:
            return (self.key, self.tag_value)
        return None

    def has_output(self) -> bool:
        return True

    def expected_parameters(self) -> list[str | None]:
        return [self.LABEL, self.KEY, self.VALUE]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        if self.selected is None:
            return queryset
        key, value = self.selected
        return queryset.filter(pk__in=JobTag.objects.filter(key=key, value=value).values("job_id"))

    def choices(self, changelist: ChangeList) -> Iterator[dict[str, Any]]:
        everything = [self.LABEL, self.KEY, self.VALUE]
        yield {
            "selected": self.selected is None,
            "query_string": changelist.get_query_string(remove=everything),
            "display": "All",
        }
        recent = Counter(JobTag.objects.order_by("-id").values_list("key", "value")[:TAG_SAMPLE])
        offered = [pair for pair, _ in recent.most_common(TAG_CHOICES)]
        if self.selected is not None and self.selected not in offered:
            offered.append(self.selected)
        for key, value in offered:
            new = {self.KEY: key, self.VALUE: value} if key else {self.LABEL: value}
            yield {
                "selected": self.selected == (key, value),
                "query_string": changelist.get_query_string(new, remove=everything),
                "display": f"{key}:{value}" if key else value,
            }


# --- Jobs --------------------------------------------------------------------------------------


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
    labels=CANCEL_LABELS,
)
requeue_jobs = _operator_action(
    description="Requeue selected jobs",
    permission="requeue",
    run=lambda job, actor: operator.requeue(job.job_id, actor=actor),
    labels=REQUEUE_LABELS,
)

#: The facts table of the job detail page, in order.
JOB_FACTS = (
    "job_id_copy",
    "wire_name",
    "queue",
    "state_badge",
    "attempt_of",
    "due_at",
    "enqueued_at_utc",
    "lease_owner",
    "lease_expiry_utc",
    "cancel_requested",
    "terminal_at_utc",
    "terminal_cause",
    "parents_remaining",
    "mode",
    "minted_by",
    "tag_list",
    "sequence",
)
SENSITIVE_FIELDS = ("payload_view", "output_view")


@admin.register(JobRecord)
class JobRecordAdmin(_ReadOnlyAdmin):
    list_display = (
        "short_id",
        "wire",
        "queue_name",
        "state_badge",
        "attempt_of",
        "due_at",
        "terminal_at_utc",
        "tag_pills",
    )
    list_display_links = None  # the job id column links to the detail page itself
    # Only the primary key orders the list (newest first, or oldest first): sorting a large table
    # by any other column would be a full sort on every page load, so no other column has an
    # ordering (which also makes a hand-written ``?o=`` for them a no-op).
    sortable_by = ("short_id",)
    list_filter = (
        "state",
        TerminalClassFilter,
        QueueFilter,
        WireNameFilter,
        ScheduleFilter,
        TagFilter,
    )
    ordering = ("-sequence",)  # newest first, along the primary key
    list_per_page = 50
    paginator = EstimatedCountPaginator
    show_full_result_count = False  # no COUNT(*) over the whole table on every page
    show_facets = admin.ShowFacets.NEVER  # facet counts would scan the table per filter
    actions = (cancel_jobs, requeue_jobs)
    search_help_text = "A job id (exact), or part of a wire name or of a tag (or key:value)."
    search_fields = ("wire_name",)
    readonly_fields = (*JOB_FACTS, *SENSITIVE_FIELDS, "sensitive_hidden")

    def has_cancel_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm(CANCEL_PERMISSION)

    def has_requeue_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm(REQUEUE_PERMISSION)

    def get_queryset(self, request: HttpRequest) -> QuerySet[JobRecord]:
        # Payload and output load only when the detail page shows them (and the viewer may see them).
        return super().get_queryset(request).defer("payload", "output").prefetch_related("tags")

    def get_object(self, request: HttpRequest, object_id: str, from_field: str | None = None) -> Any:
        """A job by its primary key, or by its job id (so a copied job id works in the URL)."""
        try:
            job_id = uuid.UUID(object_id)
        except ValueError:
            return super().get_object(request, object_id, from_field)
        return self.get_queryset(request).filter(job_id=job_id).first()

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
        tags = Q(value__icontains=term)
        key, colon, value = term.partition(":")
        if colon and key and value:
            tags |= Q(key=key, value=value)
        matches = Q(wire_name__icontains=term) | Q(pk__in=JobTag.objects.filter(tags).values("job_id"))
        return queryset.filter(matches), False

    def get_list_display(self, request: HttpRequest) -> tuple[Any, ...]:
        columns = tuple(super().get_list_display(request))
        return (*columns, "cause") if _failure_tab(request) is not None else columns

    def changelist_view(self, request: HttpRequest, extra_context: dict[str, Any] | None = None) -> Any:
        active = _failure_tab(request)
        changelist_url = reverse("admin:backwave_django_jobrecord_changelist")
        tabs = [
            {
                "label": "All jobs",
                "url": changelist_url,
                "active": active is None,
                "testid": "bw-failures-all",
                "count": None,
                "blurb": "",
            }
        ]
        for label, state, blurb, testid in FAILURE_TABS:
            count = JobRecord.objects.filter(state=state)[: FAILURE_COUNT_CAP + 1].count()
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
        context = {
            "bw_tabs": tabs,
            "bw_active_tab": active,
            "bw_active_blurb": blurbs.get(active) if active is not None else None,
            **(extra_context or {}),
        }
        return super().changelist_view(request, context)

    # --- Columns and facts ---------------------------------------------------------------------

    # List cells link relative to the changelist they are drawn on: no reverse() per row.

    @admin.display(description="job id", ordering="sequence")
    def short_id(self, job: JobRecord) -> str:
        url = f"{job.pk}/change/"
        return format_html(
            '<a href="{}" title="{}"><code>{}…</code></a> '
            '<button type="button" class="bw-copy" data-bw-copy="{}" title="Copy the job id" '
            'aria-label="Copy the job id">{}</button>',
            url,
            job.job_id,
            str(job.job_id)[:8],
            job.job_id,
            COPY_ICON,
        )

    @admin.display(description="job id")
    def job_id_copy(self, job: JobRecord) -> str:
        return format_html(
            '<code id="bw-job-id">{}</code> <button type="button" class="bw-copy" data-bw-copy="{}" '
            'data-testid="bw-copy-job-id" aria-label="Copy the job id">copy</button>',
            job.job_id,
            job.job_id,
        )

    @admin.display(description="wire name")
    def wire(self, job: JobRecord) -> str:
        return job.wire_name

    @admin.display(description="queue")
    def queue_name(self, job: JobRecord) -> str:
        return job.queue

    @admin.display(description="state")
    def state_badge(self, job: JobRecord) -> str:
        return _badge(job.state)

    @admin.display(description="attempt")
    def attempt_of(self, job: JobRecord) -> str:
        definition = registry.get(job.wire_name)
        ceiling = (definition.retry if definition and definition.retry else get_settings().retry).max_attempts
        return f"{job.attempt} / {ceiling}"

    @admin.display(description="due time")
    def due_at(self, job: JobRecord) -> str:
        return format_instant(job.due_time)

    @admin.display(description="terminal at")
    def terminal_at_utc(self, job: JobRecord) -> str:
        return format_instant(job.terminal_at)

    @admin.display(description="enqueued at")
    def enqueued_at_utc(self, job: JobRecord) -> str:
        return format_instant(job.enqueued_at)

    @admin.display(description="lease expiry")
    def lease_expiry_utc(self, job: JobRecord) -> str:
        return format_instant(job.lease_expiry)

    @admin.display(description="tags")
    def tag_pills(self, job: JobRecord) -> str:
        return _tag_pills(job.tags.all())

    @admin.display(description="tags")
    def tag_list(self, job: JobRecord) -> str:
        return _tag_pills(job.tags.all(), reverse("admin:backwave_django_jobrecord_changelist"))

    @admin.display(description="cause")
    def cause(self, job: JobRecord) -> str:
        text = job.terminal_cause or "—"
        short = text if len(text) <= 120 else text[:119] + "…"
        return format_html('<span class="bw-cause" title="{}">{}</span>', text, short)

    @admin.display(description="minted by")
    def minted_by(self, job: JobRecord) -> str:
        if job.schedule_id is None:
            return "—"
        pk = (
            RecurringSchedule.objects.filter(schedule_id=job.schedule_id).values_list("pk", flat=True).first()
        )
        if pk is None:
            return format_html("{} (schedule removed)", job.schedule_id)
        url = reverse("admin:backwave_django_recurringschedule_change", args=[pk])
        return format_html('<a href="{}">{}</a>', url, job.schedule_id)

    @admin.display(description="payload")
    def payload_view(self, job: JobRecord) -> str:
        return _pretty_json(job.payload)

    @admin.display(description="output")
    def output_view(self, job: JobRecord) -> str:
        return "—" if job.output is None else _pretty_json(job.output)

    @admin.display(description="payload and output")
    def sensitive_hidden(self, job: JobRecord) -> str:
        return HIDDEN_TEXT

    # Which fields show is decided per request (ModelAdmin instances are shared between requests
    # and threads, so no request state is kept on ``self``).

    def get_fieldsets(self, request: HttpRequest, obj: Any = None) -> _FieldsetSpec:
        sensitive = SENSITIVE_FIELDS if can_view_sensitive(request) else ("sensitive_hidden",)
        return [(None, {"fields": JOB_FACTS}), ("Payload and output", {"fields": sensitive})]

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
            context = {**self._detail_context(request, obj), **context}
        return super().render_change_form(request, context, add, change, form_url, obj)

    def _detail_context(self, request: HttpRequest, job: JobRecord) -> dict[str, Any]:
        sensitive = can_view_sensitive(request)
        state = JobState(job.state)
        return {
            "bw_job": job,
            "bw_state_badge": SafeString(_badge(job.state)),
            "bw_sensitive": sensitive,
            "bw_hidden_text": HIDDEN_TEXT,
            "bw_history_off": get_settings().history is HistoryPolicy.OFF,
            "bw_timeline": _timeline(job, sensitive=sensitive),
            "bw_parents": _edges(JobDependency.objects.filter(child_id=job.pk), "parent"),
            "bw_children": _edges(JobDependency.objects.filter(parent_id=job.pk), "child"),
            "bw_can_cancel": not state.is_terminal and self.has_cancel_permission(request),
            "bw_can_requeue": state in (JobState.DEAD_LETTERED, JobState.QUARANTINED)
            and self.has_requeue_permission(request),
            "bw_cancel_url": reverse("admin:backwave_django_jobrecord_cancel", args=[job.pk]),
            "bw_requeue_url": reverse("admin:backwave_django_jobrecord_requeue", args=[job.pk]),
        }

    def get_urls(self) -> list[URLPattern]:
        return [
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
            *super().get_urls(),
        ]

    def cancel_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        """POST: cancel one job (the detail page's Cancel button)."""
        return self._job_button(
            request, object_id, self.has_cancel_permission, operator.cancel, "Cancel", CANCEL_LABELS
        )

    def requeue_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        """POST: requeue one Dead-Lettered or Quarantined job (the detail page's Requeue button)."""
        return self._job_button(
            request, object_id, self.has_requeue_permission, operator.requeue, "Requeue", REQUEUE_LABELS
        )

    def _job_button(
        self,
        request: HttpRequest,
        object_id: str,
        allowed: Callable[[HttpRequest], bool],
        run: Callable[..., Any],
        verb: str,
        labels: dict[str, str],
    ) -> HttpResponse:
        refused = _require_post(request)
        if refused is not None:
            return refused
        if not allowed(request):
            raise PermissionDenied
        job = self.get_object(request, unquote(object_id))
        if job is None:
            self.message_user(
                request, f"No job with id “{object_id}”; nothing was changed.", messages.WARNING
            )
            return SeeOther(reverse("admin:backwave_django_jobrecord_changelist"))
        label = labels[run(job.job_id, actor=request.user.get_username()).name]
        self.log_change(request, job, f"{verb}: {label}")
        _report(self, request, Counter({label: 1}))
        return SeeOther(reverse("admin:backwave_django_jobrecord_change", args=[job.pk]))


def _failure_tab(request: HttpRequest) -> JobState | None:
    """The failure tab the job list is showing (``?state__exact=5`` or ``6``), if any."""
    wanted = request.GET.get("state__exact")
    for _, state, _, _ in FAILURE_TABS:
        if wanted == str(int(state)):
            return state
    return None


def _timeline(job: JobRecord, *, sensitive: bool) -> list[dict[str, Any]]:
    """The transition log, newest first. Failure detail is read only for a viewer who may see it."""
    entries = JobTransition.objects.filter(job_id=job.pk).order_by("-ordinal")
    columns = ["ordinal", "state", "attempt", "actor", "recorded_at", "failed"]
    if sensitive:
        columns.append("failure_detail")
    rows = entries.annotate(
        failed=ExpressionWrapper(Q(failure_detail__isnull=False), output_field=BooleanField())
    ).values(*columns)
    return [
        {
            **row,
            "badge": SafeString(_badge(row["state"])),
            "when": format_instant(row["recorded_at"]),
            "detail": row.get("failure_detail"),
        }
        for row in rows
    ]


def _edges(edges: QuerySet[JobDependency], side: str) -> list[dict[str, Any]]:
    """The jobs on one side of some dependency edges, as link rows."""
    rows = edges.order_by(f"{side}_id").values_list(
        f"{side}__sequence", f"{side}__job_id", f"{side}__wire_name", f"{side}__state"
    )[:DETAIL_ROWS]
    return [
        {
            "url": reverse("admin:backwave_django_jobrecord_change", args=[pk]),
            "job_id": job_id,
            "wire_name": wire_name,
            "badge": SafeString(_badge(state)),
        }
        for pk, job_id, wire_name, state in rows
    ]


# --- Queues ------------------------------------------------------------------------------------


#: The largest limit the column holds on every supported database (a 32-bit signed integer).
MAX_CONCURRENCY_LIMIT = 2**31 - 1


class ConcurrencyLimitForm(forms.Form):
    """A queue's concurrency limit: a whole number ≥ 0 (0 blocks the queue), or empty for none."""

    limit = forms.IntegerField(
        min_value=0,
        max_value=MAX_CONCURRENCY_LIMIT,
        required=False,
        error_messages={
            "invalid": "The limit must be a whole number of 0 or more, or empty for no limit.",
            "min_value": "The limit must be 0 or more (0 blocks the queue); leave it empty for no limit.",
            "max_value": f"The limit must be at most {MAX_CONCURRENCY_LIMIT:,}; leave it empty for no limit.",
        },
    )


@admin.register(QueueSettings)
class QueueSettingsAdmin(_ReadOnlyAdmin):
    """Every queue: those with stored settings and those that only have jobs.

    The list is a page of its own rather than a changelist, because a queue that only has jobs has
    no row to select; its Pause/Resume/limit controls create the row through the operator (SPEC
    §10: resuming an unknown queue creates its settings).
    """

    def has_pause_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm(PAUSE_PERMISSION)

    def get_urls(self) -> list[URLPattern]:
        def view(function: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
            return self.admin_site.admin_view(function)

        return [
            path("bulk/", view(self.bulk_view), name="backwave_django_queuesettings_bulk"),
            path("<path:queue>/pause/", view(self.pause_view), name="backwave_django_queuesettings_pause"),
            path("<path:queue>/resume/", view(self.resume_view), name="backwave_django_queuesettings_resume"),
            path("<path:queue>/limit/", view(self.limit_view), name="backwave_django_queuesettings_limit"),
            *super().get_urls(),
        ]

    def changelist_view(self, request: HttpRequest, extra_context: dict[str, Any] | None = None) -> Any:
        if request.method not in ("GET", "HEAD"):
            return HttpResponseNotAllowed(["GET", "HEAD"])  # the controls post to their own URLs
        if not self.has_view_or_change_permission(request):
            raise PermissionDenied
        depths = {depth.queue: depth for depth in monitor.queue_depths()}
        statuses = monitor.queue_statuses(list(depths.values()))
        rows = [_queue_row(status, depths.get(status.queue)) for status in statuses]
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "title": "Queues",
            "subtitle": None,
            "bw_breadcrumbs_as_list": BREADCRUMBS_AS_LIST,
            "rows": rows,
            "states": [str(state.label) for state in monitor.STATE_ORDER],
            "can_pause": self.has_pause_permission(request),
            "bulk_url": reverse("admin:backwave_django_queuesettings_bulk"),
            **(extra_context or {}),
        }
        request.current_app = self.admin_site.name
        return TemplateResponse(request, "admin/backwave_django/queuesettings/queue_list.html", context)

    def pause_view(self, request: HttpRequest, queue: str) -> HttpResponse:
        """POST: pause one queue."""
        return self._queue_button(request, [queue], "pause")

    def resume_view(self, request: HttpRequest, queue: str) -> HttpResponse:
        """POST: resume one queue (creating its settings row if it had none)."""
        return self._queue_button(request, [queue], "resume")

    def bulk_view(self, request: HttpRequest) -> HttpResponse:
        """POST ``action=pause|resume`` with one ``queue`` value per selected queue."""
        return self._queue_button(request, request.POST.getlist("queue"), request.POST.get("action", ""))

    def _queue_button(self, request: HttpRequest, queues: list[str], action: str) -> HttpResponse:
        refused = _require_post(request)
        if refused is not None:
            return refused
        if not self.has_pause_permission(request):
            raise PermissionDenied
        back = SeeOther(reverse("admin:backwave_django_queuesettings_changelist"))
        if action not in ("pause", "resume"):
            self.message_user(request, "Choose Pause or Resume; nothing was changed.", messages.WARNING)
            return back
        queues = [queue for queue in dict.fromkeys(queues) if queue]
        if not queues:
            self.message_user(request, "No queues were selected; nothing was changed.", messages.WARNING)
            return back
        run, label = (
            (operator.pause_queue, "paused") if action == "pause" else (operator.resume_queue, "resumed")
        )
        actor = request.user.get_username()
        for queue in queues:
            try:
                run(queue, actor=actor)
            except (TypeError, ValueError) as exc:
                self.message_user(
                    request, f"Queue “{queue[:40]}”: {exc}; nothing was changed.", messages.ERROR
                )
                return back
            self._log(request, queue, f"{action.capitalize()} queue")
        _report(self, request, Counter({label: len(queues)}))
        return back

    def limit_view(self, request: HttpRequest, queue: str) -> HttpResponse:
        """POST ``limit=<n>`` (n ≥ 0) or an empty ``limit`` to clear it."""
        refused = _require_post(request)
        if refused is not None:
            return refused
        if not self.has_pause_permission(request):
            raise PermissionDenied
        back = SeeOther(reverse("admin:backwave_django_queuesettings_changelist"))
        if "limit" not in request.POST:
            # Only an empty field clears the limit: a POST without the field is malformed, not a clear.
            self.message_user(
                request, f"Queue “{queue[:40]}”: no limit was sent; nothing was changed.", messages.ERROR
            )
            return back
        form = ConcurrencyLimitForm(request.POST)
        if not form.is_valid():
            error = " ".join(str(message) for message in form.errors.get("limit", ["Invalid limit."]))
            self.message_user(request, f"Queue “{queue}”: {error} Nothing was changed.", messages.ERROR)
            return back
        limit = form.cleaned_data["limit"]
        try:
            operator.set_concurrency_limit(queue, limit, actor=request.user.get_username())
        except (TypeError, ValueError) as exc:
            self.message_user(request, f"Queue “{queue[:40]}”: {exc}; nothing was changed.", messages.ERROR)
            return back
        described = "no limit" if limit is None else f"a limit of {limit}"
        self._log(request, queue, f"Set concurrency limit: {described}")
        self.message_user(request, f"Queue “{queue}” now has {described}.", messages.INFO)
        return back

    def _log(self, request: HttpRequest, queue: str, message: str) -> None:
        row = QueueSettings.objects.filter(queue=queue).first()
        if row is not None:  # the operator call creates the row; absent only if removed meanwhile
            self.log_change(request, row, message)


def _queue_row(status: monitor.QueueStatus, depth: monitor.QueueDepth | None) -> dict[str, Any]:
    """One row of the Queues page: status, in-use / limit, depth by state, and the control URLs."""
    jobs_url = reverse("admin:backwave_django_jobrecord_changelist")
    counts = depth.counts if depth is not None else (0,) * len(monitor.STATE_ORDER)
    limit = "∞" if status.concurrency_limit is None else str(status.concurrency_limit)
    badge = _tone_badge("Paused", PAUSED_TONE) if status.paused else _tone_badge("Claiming", CLAIMING_TONE)
    return {
        "queue": status.queue,
        "paused": status.paused,
        "badge": SafeString(badge),
        "limit": status.concurrency_limit,
        "in_use": f"{status.leased} / {limit}",
        "at_limit": status.at_limit,
        "depths": [
            {
                "label": str(state.label),
                "count": count,
                "url": f"{jobs_url}?{urlencode({'queue': status.queue, 'state__exact': int(state)})}",
            }
            for state, count in zip(monitor.STATE_ORDER, counts, strict=True)
        ],
        "total": sum(counts),
        "jobs_url": f"{jobs_url}?{urlencode({'queue': status.queue})}",
        "pause_url": reverse("admin:backwave_django_queuesettings_pause", args=[status.queue]),
        "resume_url": reverse("admin:backwave_django_queuesettings_resume", args=[status.queue]),
        "limit_url": reverse("admin:backwave_django_queuesettings_limit", args=[status.queue]),
    }


# --- Recurring schedules -----------------------------------------------------------------------


class RecurringScheduleForm(forms.ModelForm):  # type: ignore[type-arg]
    """Create or redefine a schedule, validated exactly as ``store.upsert_schedule`` validates it.

    Cron and zone go through ``store.resolve_schedule`` (the function the upsert calls); the wire
    name and payload through ``registry.route`` (what a worker does with each instance), so a
    schedule whose every instance would be Quarantined is refused with the cause. Nothing is saved
    by the form: :meth:`RecurringScheduleAdmin.save_model` hands :attr:`spec` to the store.
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

    def clean(self) -> dict[str, Any]:
        data: dict[str, Any] = super().clean() or {}
        cron, zone = data.get("cron"), data.get("time_zone") or None
        if cron:
            try:
                store.resolve_schedule(cron, None)
            except ValueError as exc:
                self.add_error("cron", str(exc))
            else:
                if zone is not None:
                    try:
                        store.resolve_schedule(cron, zone)
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
            self.add_error(
                "wire_name",
                f"No job is registered with wire name “{wire_name}”: every instance would be Quarantined. "
                "Declare it with @job(...) in an app's jobs.py, or fix the name.",
            )
        elif wire_name and "payload" in data:
            routed = registry.route(wire_name, data["payload"])
            if isinstance(routed, registry.NotRoutable):
                self.add_error("payload", f"Every instance would be Quarantined: {routed.reason}.")
        if not self.errors:
            self._build_spec(data, zone)
        return data

    def _build_spec(self, data: dict[str, Any], zone: str | None) -> None:
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
            )
        except (TypeError, ValueError) as exc:
            self.add_error(None, str(exc))


trigger_schedules = _operator_action(
    description="Trigger selected schedules now",
    permission="trigger",
    run=lambda schedule, actor: operator.trigger_schedule(schedule.schedule_id, actor=actor),
    labels=TRIGGER_LABELS,
)

SCHEDULE_STATUS = (
    "cron_gloss",
    "next_due",
    "live_instance",
    "cursor_utc",
    "skipped_count",
    "error",
)


@admin.register(RecurringSchedule)
class RecurringScheduleAdmin(_ConsoleAdmin):
    """Schedules are created and redefined here, but written only by the store.

    A schedule declared in ``settings.BACKWAVE["SCHEDULES"]`` is read-only here: a worker start
    re-applies the settings, so an edit would not stick.
    """

    form = RecurringScheduleForm
    list_display = (
        "schedule_id",
        "cron_gloss",
        "wire_name",
        "queue",
        "zone",
        "catch_up",
        "no_overlap",
        "next_due",
        "live_instance",
        "skipped_count",
        "error",
    )
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
        live = JobRecord.objects.filter(
            schedule_id=OuterRef("schedule_id"), state__in=[s for s in JobState if not s.is_terminal]
        )
        schedules: QuerySet[RecurringSchedule] = super().get_queryset(request)
        return schedules.annotate(has_live_instance=Exists(live))

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> tuple[str, ...]:
        return () if obj is None else ("schedule_id", *SCHEDULE_STATUS)

    def get_fieldsets(self, request: HttpRequest, obj: Any = None) -> _FieldsetSpec:
        fields = RecurringScheduleForm.Meta.fields
        if obj is None:
            return [(None, {"fields": fields})]
        return [("Definition", {"fields": fields}), ("Status", {"fields": SCHEDULE_STATUS})]

    def save_model(self, request: HttpRequest, obj: RecurringSchedule, form: Any, change: bool) -> None:
        """Hand the validated definition to the store (only the store writes schedule rows)."""
        spec = form.spec
        assert spec is not None, "save_model runs only after the form validated"
        store.upsert_schedule(spec, now=clock.now())
        obj.pk = RecurringSchedule.objects.values_list("pk", flat=True).get(schedule_id=spec.schedule_id)

    def delete_model(self, request: HttpRequest, obj: RecurringSchedule) -> None:
        store.remove_schedule(obj.schedule_id)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[RecurringSchedule]) -> None:
        for schedule_id in queryset.values_list("schedule_id", flat=True):
            store.remove_schedule(schedule_id)

    # --- Columns -------------------------------------------------------------------------------

    @admin.display(description="cron", ordering="cron")
    def cron_gloss(self, row: RecurringSchedule) -> str:
        gloss = describe_cron(row.cron)
        if gloss == row.cron:
            return format_html("<code>{}</code>", row.cron)
        return format_html('{}<br><code class="bw-raw-cron">{}</code>', gloss, row.cron)

    @admin.display(description="zone", ordering="time_zone")
    def zone(self, row: RecurringSchedule) -> str:
        return row.time_zone or "UTC"

    @admin.display(description="next due")
    def next_due(self, row: RecurringSchedule) -> str:
        try:
            return format_instant(planner.resolve(row.cron, row.time_zone)(row.cursor))
        except ValueError:
            return "—"

    @admin.display(description="live instance", boolean=True)
    def live_instance(self, row: RecurringSchedule) -> bool:
        live = getattr(row, "has_live_instance", None)
        if live is None:
            states = [s for s in JobState if not s.is_terminal]
            live = JobRecord.objects.filter(schedule_id=row.schedule_id, state__in=states).exists()
        return bool(live)

    @admin.display(description="cursor")
    def cursor_utc(self, row: RecurringSchedule) -> str:
        return format_instant(row.cursor)

    @admin.display(description="skipped ticks")
    def skipped_count(self, row: RecurringSchedule) -> int:
        return len(row.skipped_ticks or [])

    @admin.display(description="error")
    def error(self, row: RecurringSchedule) -> str:
        problem = planner.schedule_error(row.cron, row.time_zone)
        if problem is None:
            return "—"
        return format_html(
            '<span class="bw-error" style="color:{}">{}</span>', STATE_TONES[JobState.QUARANTINED], problem
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
            jobs_url = reverse("admin:backwave_django_jobrecord_changelist")
            context.update(
                bw_schedule=schedule,
                bw_error=planner.schedule_error(schedule.cron, schedule.time_zone),
                bw_instances=_instances(schedule.schedule_id),
                bw_all_instances_url=f"{jobs_url}?{urlencode({'schedule_id': schedule.schedule_id})}",
                bw_skipped_ticks=list(reversed(schedule.skipped_ticks or [])),
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

    def trigger_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        """POST: mint one instance of the schedule now."""
        refused = _require_post(request)
        if refused is not None:
            return refused
        if not self.has_trigger_permission(request):
            raise PermissionDenied
        schedule = self.get_object(request, unquote(object_id))
        if schedule is None:
            self.message_user(
                request, f"No schedule with id “{object_id}”; nothing was triggered.", messages.WARNING
            )
            return SeeOther(reverse("admin:backwave_django_recurringschedule_changelist"))
        result = operator.trigger_schedule(schedule.schedule_id, actor=request.user.get_username())
        label = TRIGGER_LABELS[result.name]
        self.log_change(request, schedule, f"Trigger now: {label}")
        _report(self, request, Counter({label: 1}))
        return SeeOther(reverse("admin:backwave_django_recurringschedule_change", args=[schedule.pk]))


def _instances(schedule_id: str) -> list[dict[str, Any]]:
    """The newest minted instances of a schedule, for its detail page."""
    rows = (
        JobRecord.objects.filter(schedule_id=schedule_id)
        .order_by("-sequence")
        .values_list("sequence", "job_id", "state", "attempt", "due_time", "terminal_at")[:DETAIL_ROWS]
    )
    return [
        {
            "url": reverse("admin:backwave_django_jobrecord_change", args=[pk]),
            "job_id": job_id,
            "badge": SafeString(_badge(state)),
            "attempt": attempt,
            "due": format_instant(due),
            "terminal": format_instant(terminal),
        }
        for pk, job_id, state, attempt, due, terminal in rows
    ]


# --- Workers and the audit log ------------------------------------------------------------------


@admin.register(WorkerNode)
class WorkerNodeAdmin(_ReadOnlyAdmin):
    list_display = (
        "worker_id",
        "hostname",
        "pid",
        "queue_list",
        "concurrency",
        "started",
        "last_seen",
        "status",
    )
    ordering = ("-last_seen_at",)

    @admin.display(description="queues")
    def queue_list(self, row: WorkerNode) -> str:
        return ", ".join(str(q) for q in row.queues)

    @admin.display(description="started", ordering="started_at")
    def started(self, row: WorkerNode) -> str:
        return format_instant(row.started_at)

    @admin.display(description="last seen", ordering="last_seen_at")
    def last_seen(self, row: WorkerNode) -> str:
        return format_instant(row.last_seen_at)

    @admin.display(description="alive", boolean=True)
    def alive(self, row: WorkerNode) -> bool:
        return monitor.is_worker_live(row.last_seen_at, now=timezone.now())

    @admin.display(description="status")
    def status(self, row: WorkerNode) -> str:
        if self.alive(row):
            return _tone_badge("alive", CLAIMING_TONE)
        return _tone_badge("stale", STALE_TONE)


@admin.register(OperatorAudit)
class OperatorAuditAdmin(_ReadOnlyAdmin):
    list_display = ("recorded_at", "actor", "action", "target")
    list_filter = ("action",)
    search_fields = ("target", "actor")
    ordering = ("-id",)


# The Dashboard page (admin/backwave_django/dashboard/) registers itself; it reuses the helpers above.
from . import dashboard  # noqa: E402, F401
