"""The console kit every admin page shares: permissions, job facts, result messages, base admins, buttons.

The pages (``jobs``, ``queues``, ``schedules``, ``workers``, ``audit``, ``dashboard``) import from
here and from :mod:`.display` (how instants, ids, badges, JSON and tags look) and never the other
way round, so neither module knows a page. This one holds what must behave the same on every
page: the permission codenames and the sensitive-data switch (``docs/admin.md``, "Permissions"
and "Sensitive content"), a job's attempt ceiling, the one rule that calls a Dead-Lettered job
"Discarded", progress bars, the one message that names what an action did to what, the base
admins that refuse a malformed bulk selection, and :func:`console_button`, the gate in front of
every operator button (POST only, then the button's permission).
"""

from __future__ import annotations

import functools
import math
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar, cast

from django.contrib import admin, messages
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.contrib.admin.utils import quote
from django.contrib.admin.views.main import ChangeList
from django.core.exceptions import PermissionDenied, ValidationError
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseNotAllowed, HttpResponseRedirect
from django.urls import reverse
from django.utils.html import format_html, format_html_join
from django.utils.text import capfirst

from .. import clock
from ..conf import DISABLE_SENSITIVE_ENV, env_flag, get_settings
from ..core import actors
from ..core.states import JobState
from ..models import JobRecord
from ..monitor import LEASE_EXPIRED_ATTRIBUTE, dead_lettered_by_lease_expiry, workflow_header
from .display import format_instant, timestamp

CANCEL_PERMISSION = "backwave_django.cancel_jobrecord"
REQUEUE_PERMISSION = "backwave_django.requeue_jobrecord"
SENSITIVE_PERMISSION = "backwave_django.view_sensitive_jobrecord"
TRIGGER_PERMISSION = "backwave_django.trigger_recurringschedule"
PAUSE_PERMISSION = "backwave_django.pause_queuesettings"
HIDDEN_TEXT = "Hidden: needs the “view sensitive” permission."

#: How many rows a detail page lists (a job's gating parents and waiting children, a schedule's
#: minted instances).
DETAIL_ROWS = 50


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


# --- Live refresh --------------------------------------------------------------------------------

#: How often a live page refreshes itself (``live.js`` reads it from a data attribute) ...
REFRESH_SECONDS = 5
#: ... unless building it is slow (a very large job table): then at most this share of the time
#: goes into rebuilding it, up to one refresh a minute.
REFRESH_BUSY_SHARE = 0.05
MAX_REFRESH_SECONDS = 60


def refresh_interval_ms(build_seconds: float) -> int:
    """The pause before the next refresh: 5 s, stretched so a slow build stays under 5 % of the time."""
    stretched = build_seconds / REFRESH_BUSY_SHARE
    return int(min(max(REFRESH_SECONDS, stretched), MAX_REFRESH_SECONDS) * 1000)


def live_context(name: str, regions: str, refresh_ms: int, url: str = "") -> dict[str, Any]:
    """``bw_live`` for ``live_toolbar.html``: which page, the ids it swaps, the interval, the fragment."""
    return {
        "name": name,
        "regions": regions,
        "refresh_ms": refresh_ms,
        "url": url,
        "now": format_instant(clock.now()),
    }


# --- Permissions ---------------------------------------------------------------------------------


def can_view_sensitive(request: HttpRequest) -> bool:
    """Payload, output and failure detail: the permission, and the environment kill-switch off."""
    return not env_flag(DISABLE_SENSITIVE_ENV) and request.user.has_perm(SENSITIVE_PERMISSION)


#: A view method of a ModelAdmin behind an operator button: ``(self, request, *url arguments)``.
ButtonView = TypeVar("ButtonView", bound=Callable[..., HttpResponse])


def console_button(*, permission: str) -> Callable[[ButtonView], ButtonView]:
    """Gate an operator button's view: POST only, by a user who holds ``permission``.

    Buttons change state, so any other method answers 405 (and a POST is CSRF-checked by
    ``admin_view``); a POST without the permission answers 403 before the view reads anything,
    so a forged button changes nothing. Only then does the decorated view run.
    """

    def decorate(view: ButtonView) -> ButtonView:
        @functools.wraps(view)
        def checked(model_admin: Any, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            if request.method != "POST":
                return HttpResponseNotAllowed(["POST"])
            if not request.user.has_perm(permission):
                raise PermissionDenied
            return view(model_admin, request, *args, **kwargs)

        return cast(ButtonView, checked)

    return decorate


# --- Jobs: the attempt ceiling, the Discarded marker, progress ------------------------------------


def attempt_ceiling(job: JobRecord) -> int:
    """The job's attempt ceiling: stored on the row, or the settings' RETRY for rows older than the column."""
    return job.max_attempts if job.max_attempts is not None else get_settings().retry.max_attempts


def is_discarded(job: JobRecord) -> bool:
    """Dead-Lettered before its attempt ceiling, and not by an expired lease: the handler gave up on
    it (``Discard(reason)``, or an exception its ``discard_on`` names), so retries were never spent.

    The one rule behind every "Discarded" marker in the console (``docs/admin.md``, "Failures").
    """
    return (
        job.state == JobState.DEAD_LETTERED and job.attempt < attempt_ceiling(job) and not lease_expired(job)
    )


def lease_expired(job: JobRecord) -> bool:
    """Whether the lease sweep dead-lettered ``job``, as its transition log records it: read off
    the page's query where the queryset was annotated (``monitor.with_lease_expiry``), else one
    read (``monitor.dead_lettered_by_lease_expiry``)."""
    known = getattr(job, LEASE_EXPIRED_ATTRIBUTE, None)
    if known is not None:
        return bool(known)
    return job.pk is not None and dead_lettered_by_lease_expiry(job.job_id)


def discarded_marker(job: JobRecord) -> str:
    """The small "Discarded" marker for a job :func:`is_discarded` calls so, else ""."""
    if not is_discarded(job):
        return ""
    return format_html(
        '<span class="bw-marker" data-testid="bw-discarded" title="{}">Discarded</span>',
        f"Dead-lettered on attempt {job.attempt} of {attempt_ceiling(job)}: "
        "the job gave up, its remaining retries were not used.",
    )


def seconds_text(value: Any) -> str:
    """A stored number of seconds as ``30 s`` / ``1.5 s`` (anything else shown as given)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return str(value)
    return f"{value:g} s"


def max_attempts_text(job: JobRecord) -> str:
    """The job's stored attempt ceiling, or ``settings default: N`` on a row older than the column."""
    if job.max_attempts is None:
        return f"settings default: {get_settings().retry.max_attempts}"
    return str(job.max_attempts)


def backoff_text(job: JobRecord) -> str:
    """The job's stored backoff (``1 s, 5 s (the last repeats)``), or ``settings default``."""
    if job.backoff is None:
        return "settings default"
    if isinstance(job.backoff, list) and job.backoff:
        return ", ".join(seconds_text(entry) for entry in job.backoff) + " (the last repeats)"
    return str(job.backoff)


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return float(value)


def _count_text(value: float) -> str:
    return f"{int(value):,}" if value.is_integer() else f"{value:,.2f}".rstrip("0").rstrip(".")


@dataclass(frozen=True)
class Progress:
    """A job's stored progress, read defensively (the column is JSON a handler's values went into)."""

    done: float
    total: float | None
    note: str
    at: str
    #: ``at`` read as an instant, when it is one.
    recorded_at: datetime | None = None

    @property
    def percent(self) -> float | None:
        """``done`` of ``total`` in percent, within 0 to 100; None without a total."""
        if self.total is None:
            return None
        if self.total <= 0:
            return 100.0
        return min(max(self.done / self.total * 100, 0.0), 100.0)

    @property
    def text(self) -> str:
        """``30 / 100 (30%)``, or ``42 done`` without a total."""
        percent = self.percent
        if self.total is None or percent is None:
            return f"{_count_text(self.done)} done"
        return f"{_count_text(self.done)} / {_count_text(self.total)} ({percent:.0f}%)"


def read_progress(value: Any) -> Progress | None:
    """The progress stored on a job (``{"done", "total", "note", "at"}``), or None when there is none."""
    if not isinstance(value, dict):
        return None
    done = _number(value.get("done"))
    if done is None:
        return None
    note = value.get("note")
    at = value.get("at")
    when, recorded_at = "—", None
    if isinstance(at, str):
        try:
            parsed = datetime.fromisoformat(at)
        except ValueError:
            when = at
        else:
            recorded_at = parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
            when = format_instant(recorded_at)
    note_text = note if isinstance(note, str) else ""
    return Progress(done, _number(value.get("total")), note_text, when, recorded_at)


def progress_bar(value: Any, *, detail: bool = False, sensitive: bool = False) -> str:
    """A job's progress: a bar with ``done / total (n%)``, or ``n done`` without a total; "—" for none.

    ``detail`` adds when it was recorded and the note, which is sensitive: shown only when
    ``sensitive`` (see :func:`can_view_sensitive`), otherwise said to be hidden.
    """
    progress = read_progress(value)
    if progress is None:
        return "—"
    percent = progress.percent
    bar = (
        format_html(
            '<progress class="bw-progress-bar" max="100" value="{}" aria-label="Progress: {}">'
            "{}%</progress> ",
            f"{percent:.1f}",
            progress.text,
            f"{percent:.0f}",
        )
        if percent is not None
        else ""
    )
    extra = ""
    if detail:
        note = ""
        if progress.note and sensitive:
            note = format_html(
                '<span class="bw-progress-note" data-testid="bw-progress-note">{}</span>', progress.note
            )
        elif progress.note:
            note = format_html('<span class="bw-progress-note"><em>Note — {}</em></span>', HIDDEN_TEXT)
        at = timestamp(progress.recorded_at) if progress.recorded_at else progress.at
        extra = format_html(' <small class="bw-quiet">at {}</small>{}', at, note)
    return format_html(
        '<span class="bw-progress{}" data-testid="bw-progress">{}'
        '<span class="bw-progress-text">{}</span>{}</span>',
        "" if detail else " bw-progress--compact",
        bar,
        progress.text,
        extra,
    )


def worker_url(worker_id: str) -> str:
    """The page of the worker ``worker_id`` (the Workers admin opens a worker by its id)."""
    return reverse("admin:backwave_django_workernode_change", args=[quote(worker_id)])


def workflow_link(workflow_id: uuid.UUID | None) -> str:
    """A job's workflow: a link to the workflow's page, by name; "—" for a job outside workflows."""
    if workflow_id is None:
        return "—"
    row = workflow_header(workflow_id)
    if row is None:
        return format_html("<code>{}</code> (workflow no longer stored)", workflow_id)
    url = reverse("admin:backwave_django_workflow_change", args=[row.row_id])
    return format_html(
        '<a href="{}" data-testid="bw-workflow-link">{}</a> <code class="bw-quiet">{}</code>',
        url,
        row.name or "(unnamed workflow)",
        workflow_id,
    )


# --- Answering an action -------------------------------------------------------------------------


#: Operator results that changed nothing (the rest acted, and were audited).
NO_EFFECT = frozenset({"NOT_CANCELLABLE", "NOT_REQUEUEABLE", "NOT_RETRYING", "SCHEDULE_NOT_FOUND"})
#: How many objects a result message names per result; the rest are counted.
NAMED_PER_RESULT = 5


@dataclass(frozen=True)
class Acted:
    """What an action did to one object: the operator's result (``REQUEUED``), its words
    (``requeued``) and the object's name as HTML, usually a link to it."""

    result: str
    label: str
    name: str


def result_message(
    model_admin: admin.ModelAdmin[Any],
    request: HttpRequest,
    results: Iterable[Acted],
    order: list[str],
    earlier: Iterable[tuple[str, str, int]] = (),
) -> None:
    """One message that names, and links, what the action did to what, grouped by result:
    "Requeued (2): charge-order …3f9a12bc, charge-order …0b7c44e1. Not requeueable (1): …".

    ``earlier`` adds ``(result, label, count)`` done by earlier requests of the same action (an
    action over a whole filter that went on over several requests): counted, not named. A success
    when everything acted, a warning when nothing did, information for a mix.
    """
    grouped: dict[str, list[Acted]] = {}
    counted: dict[str, int] = {}
    outcomes: set[str] = set()
    for acted in results:
        grouped.setdefault(acted.label, []).append(acted)
        counted[acted.label] = counted.get(acted.label, 0) + 1
        outcomes.add(acted.result)
    for result, label, count in earlier:
        counted[label] = counted.get(label, 0) + count
        outcomes.add(result)
    labels = sorted(counted, key=lambda label: order.index(label) if label in order else len(order))
    sentences = []
    for label in labels:
        named = grouped.get(label, [])[:NAMED_PER_RESULT]
        names = format_html_join(", ", "{}", ((acted.name,) for acted in named))
        rest = counted[label] - len(named)
        more = (f", and {rest:,} more" if named else "") if rest else ""
        heading = label[:1].upper() + label[1:]
        if named:
            sentences.append(format_html("{} ({}): {}{}.", heading, f"{counted[label]:,}", names, more))
        else:
            sentences.append(format_html("{} ({}).", heading, f"{counted[label]:,}"))
    if not sentences:
        model_admin.message_user(request, "Nothing was selected; nothing was changed.", messages.WARNING)
        return
    effects = {result not in NO_EFFECT for result in outcomes}
    level = {frozenset({True}): messages.SUCCESS, frozenset({False}): messages.WARNING}.get(
        frozenset(effects), messages.INFO
    )
    model_admin.message_user(request, format_html_join(" ", "{}", ((text,) for text in sentences)), level)


class SeeOther(HttpResponseRedirect):
    """POST/redirect/GET: the answer to every operator button."""

    status_code = 303


def bulk_operator_action(
    *,
    description: str,
    permission: str,
    run: Callable[[Any, str], Any],
    labels: dict[str, str],
    name: Callable[[Any], str],
    confirm: Callable[[Any, HttpRequest, QuerySet[Any]], HttpResponse | None] | None = None,
) -> Callable[..., HttpResponse | None]:
    """A bulk admin action: one operator call per selected row, answered with one message that
    names each row (``name(row)``, HTML) under its result.

    ``permission`` names the admin's ``has_<permission>_permission`` method (Django hides the
    action without it); ``run(row, actor)`` makes the operator call, and ``labels`` words its result.
    ``confirm(model_admin, request, queryset)`` may answer with a confirmation page instead (the
    action then runs when that page posts again), or None to go ahead.
    """

    @admin.action(description=description, permissions=[permission])
    def action(
        model_admin: admin.ModelAdmin[Any], request: HttpRequest, queryset: QuerySet[Any]
    ) -> HttpResponse | None:
        if confirm is not None and (page := confirm(model_admin, request, queryset)) is not None:
            return page
        done = []
        actor = actors.admin_user(request.user)
        for row in queryset:
            result = getattr(run(row, actor), "name", "")
            label = labels.get(result, "done")
            done.append(Acted(result, label, name(row)))
            model_admin.log_change(request, row, f"{description}: {label}")
        result_message(model_admin, request, done, list(labels.values()))
        return None

    action.__name__ = description.lower().replace(" ", "_")
    return action


# --- Base admins ---------------------------------------------------------------------------------


class ConsoleAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    """A console page: titles that name the page, an empty list that says what to do, and bulk
    actions that refuse a malformed selection.

    Titles: the list is titled by what it lists ("Workflows"), an object's page by what it is
    ("Workflow nightly import"), never Django's "Select workflow to view" or "View workflow"
    (a page may set its own). An empty list shows :meth:`empty_state`: what lands in it and how
    (``empty_text``), or, when a search or filter emptied it, that nothing matches.

    Django filters ``pk__in=<the posted _selected_action values>`` as given, so a value that is not
    a primary key of this model (``abc``, a job's UUID, ``1;DROP TABLE x``, a number out of range)
    would raise inside the action: a server error. Each value is checked first; one bad value
    refuses the whole request with a message, and nothing is changed.
    """

    #: What an empty, unfiltered list says: what lands in it, and how.
    empty_text = ""
    #: What a list emptied by a search or a filter says.
    EMPTY_FILTERED = "Nothing matches this search or filter. Clear it to see everything listed here."

    def empty_state(self, request: HttpRequest, changelist: ChangeList) -> str:
        """The sentence an empty list shows instead of a bare count of 0."""
        if changelist.query or changelist.has_active_filters:
            return self.EMPTY_FILTERED
        return self.empty_text or f"No {self.opts.verbose_name_plural} yet."

    def changelist_view(self, request: HttpRequest, extra_context: dict[str, Any] | None = None) -> Any:
        context = {"title": capfirst(str(self.opts.verbose_name_plural)), **(extra_context or {})}
        response = super().changelist_view(request, context)
        data = getattr(response, "context_data", None)
        changelist = data.get("cl") if data else None
        # The rows shown, not the count: a large table's count is an estimate that can be stale.
        if data is not None and isinstance(changelist, ChangeList) and not changelist.result_list:
            data["bw_empty"] = self.empty_state(request, changelist)
        return response

    def render_change_form(
        self,
        request: HttpRequest,
        context: dict[str, Any],
        add: bool = False,
        change: bool = False,
        form_url: str = "",
        obj: Any = None,
    ) -> Any:
        name = str(self.opts.verbose_name)
        if obj is not None and str(context.get("title")) in (f"View {name}", f"Change {name}"):
            context = {**context, "title": f"{capfirst(name)} {obj}", "subtitle": None}
        return super().render_change_form(request, context, add, change, form_url, obj)

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


class ReadOnlyAdmin(ConsoleAdmin):
    """Rows are never added, edited or deleted here; only viewed."""

    #: A UUID column a row can also be opened by in its page's URL (a copied job or workflow id).
    uuid_lookup: str | None = None

    def get_object(self, request: HttpRequest, object_id: str, from_field: str | None = None) -> Any:
        """A row by its primary key, or by its ``uuid_lookup`` column when the URL holds a UUID."""
        if self.uuid_lookup is not None:
            try:
                value = uuid.UUID(object_id)
            except ValueError:
                pass
            else:
                return self.get_queryset(request).filter(**{self.uuid_lookup: value}).first()
        return super().get_object(request, object_id, from_field)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
