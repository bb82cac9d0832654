"""The Queues page: every queue with its status, in-use / limit, latency, throughput and depth,
and its controls.

A page of its own rather than a changelist, because a queue that only has jobs has no settings
row to select. Pause, Resume (one queue or the selected ones) and Set limit are operator buttons
behind ``pause_queuesettings`` that go through :mod:`backwave_django.operator`; see
``docs/admin.md`` ("Queues"). The page refreshes itself like the Dashboard (``live.js``), at an
interval stretched by how long it took to build (its job counts are one ``GROUP BY`` over the
job table).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any
from urllib.parse import urlencode

from django import forms
from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, HttpResponseNotAllowed
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString

from .. import clock, monitor, operator
from ..core import actors
from ..core.states import JobState, RemoveQueueResult
from ..models import QueueSettings
from .console import (
    BREADCRUMBS_AS_LIST,
    PAUSE_PERMISSION,
    Acted,
    ReadOnlyAdmin,
    SeeOther,
    console_button,
    live_context,
    refresh_interval_ms,
    result_message,
)
from .display import (
    BLOCKED_TONE,
    CLAIMING_TONE,
    PAUSED_TONE,
    STATE_TONES,
    short_duration,
    timestamp,
    tone_badge,
)
from .job_actions import confirmation_page

#: The confirmation page's explanation, before settings are stored for a queue nothing uses.
UNUSED_QUEUE_TEXT = (
    "Confirming stores settings for a queue that no declared job, schedule or stored job uses; they "
    "apply once jobs arrive in it. If the name is a typo, go back: a settings row that holds no jobs "
    "can be removed from the Queues page."
)

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


class QueueSettingsAdmin(ReadOnlyAdmin):
    """Every queue: those with stored settings and those that only have jobs.

    The list is a page of its own rather than a changelist, because a queue that only has jobs has
    no row to select; its Pause/Resume/limit controls create the row through the operator (acting
    on a queue that has no settings row creates it: ``docs/admin.md``, "Queues").
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
            path("<path:queue>/remove/", view(self.remove_view), name="backwave_django_queuesettings_remove"),
            *super().get_urls(),
        ]

    def changelist_view(self, request: HttpRequest, extra_context: dict[str, Any] | None = None) -> Any:
        if request.method not in ("GET", "HEAD"):
            return HttpResponseNotAllowed(["GET", "HEAD"])  # the controls post to their own URLs
        if not self.has_view_or_change_permission(request):
            raise PermissionDenied
        started = time.perf_counter()
        now = clock.now()
        depths = {depth.queue: depth for depth in monitor.queue_depths()}
        statuses = monitor.queue_statuses(list(depths.values()))
        latency = {entry.queue: entry for entry in monitor.queue_latency(now=now)}
        throughput = monitor.queue_throughput(now=now)
        declared = monitor.declared_queues()
        rows = [
            _queue_row(status, depths.get(status.queue), latency.get(status.queue), throughput)
            | {"unused": status.queue not in declared and status.queue not in depths}
            for status in statuses
        ]
        refresh_ms = refresh_interval_ms(time.perf_counter() - started)
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "title": "Queues",
            "subtitle": None,
            "bw_breadcrumbs_as_list": BREADCRUMBS_AS_LIST,
            "bw_live": live_context("queues", "bw-queues", refresh_ms),
            "rows": rows,
            "throughput": throughput,
            "can_pause": self.has_pause_permission(request),
            "bulk_url": reverse("admin:backwave_django_queuesettings_bulk"),
            **(extra_context or {}),
        }
        request.current_app = self.admin_site.name
        return TemplateResponse(request, "admin/backwave_django/queuesettings/queue_list.html", context)

    @console_button(permission=PAUSE_PERMISSION)
    def pause_view(self, request: HttpRequest, queue: str) -> HttpResponse:
        """POST: pause one queue."""
        return self._pause_or_resume(request, [queue], "pause")

    @console_button(permission=PAUSE_PERMISSION)
    def resume_view(self, request: HttpRequest, queue: str) -> HttpResponse:
        """POST: resume one queue (creating its settings row if it had none)."""
        return self._pause_or_resume(request, [queue], "resume")

    @console_button(permission=PAUSE_PERMISSION)
    def bulk_view(self, request: HttpRequest) -> HttpResponse:
        """POST ``action=pause|resume`` with one ``queue`` value per selected queue."""
        return self._pause_or_resume(request, request.POST.getlist("queue"), request.POST.get("action", ""))

    def _pause_or_resume(self, request: HttpRequest, queues: list[str], action: str) -> HttpResponse:
        """Pause or resume each named queue, log each and count them in one message.

        Every queue is checked first (the queue-name rule, and that something uses it), so one bad
        name changes nothing. A single queue nothing uses gets a confirmation page; confirming
        posts ``create=yes``. Among several, such a queue is refused with a message.
        """
        back = SeeOther(reverse("admin:backwave_django_queuesettings_changelist"))
        if action not in ("pause", "resume"):
            self.message_user(request, "Choose Pause or Resume; nothing was changed.", messages.WARNING)
            return back
        queues = [queue for queue in dict.fromkeys(queues) if queue]
        if not queues:
            self.message_user(request, "No queues were selected; nothing was changed.", messages.WARNING)
            return back
        create = request.POST.get("create") == "yes"
        for queue in queues:
            refused = self._refusal(request, queue, action, create=create, alone=len(queues) == 1)
            if refused is not None:
                return refused
        run, label = (
            (operator.pause_queue, "paused") if action == "pause" else (operator.resume_queue, "resumed")
        )
        actor = actors.admin_user(request.user)
        done = []
        for queue in queues:
            run(queue, actor=actor, create=create)
            self._log_queue_change(request, queue, f"{action.capitalize()} queue")
            done.append(Acted(action.upper(), label, _queue_name(queue)))
        result_message(self, request, done, [label])
        return back

    def _refusal(
        self,
        request: HttpRequest,
        queue: str,
        action: str,
        *,
        create: bool,
        alone: bool = True,
        fields: tuple[tuple[str, str], ...] = (),
    ) -> HttpResponse | None:
        """None when ``queue`` may be acted on; else the answer: a message for a name that breaks the
        rule (or an unused queue among several), a confirmation page for one unused queue."""
        back = SeeOther(reverse("admin:backwave_django_queuesettings_changelist"))
        try:
            operator.require_queue_in_use(queue, create=create)
        except operator.UnknownQueueError as exc:
            if alone:
                return self._confirm_unused(request, queue, action, exc, fields)
            text = (
                f"Queue “{queue}”: {exc}; nothing was changed. "
                f"Use its own {action.capitalize()} button to confirm."
            )
            self.message_user(request, text, messages.ERROR)
            return back
        except (TypeError, ValueError) as exc:
            self.message_user(request, f"Queue “{queue[:40]}”: {exc}; nothing was changed.", messages.ERROR)
            return back
        return None

    def _confirm_unused(
        self,
        request: HttpRequest,
        queue: str,
        action: str,
        refusal: operator.UnknownQueueError,
        fields: tuple[tuple[str, str], ...],
    ) -> HttpResponse:
        """Ask before storing settings for a queue nothing uses (a typo, most of the time)."""
        verb = {"pause": "Pause", "resume": "Resume", "limit": "Set the limit of"}[action]
        return confirmation_page(
            self,
            request,
            {
                "title": f"{verb} a queue nothing uses?",
                "bw_lead": _sentence(str(refusal)),
                "bw_explanation": UNUSED_QUEUE_TEXT,
                "bw_action_url": request.path,
                "bw_fields": [*fields, ("create", "yes")],
                "bw_submit": f"Yes, {verb.lower()} “{queue}” anyway",
                "bw_back_url": reverse("admin:backwave_django_queuesettings_changelist"),
                "bw_testid": "bw-confirm-unused-queue",
            },
        )

    @console_button(permission=PAUSE_PERMISSION)
    def remove_view(self, request: HttpRequest, queue: str) -> HttpResponse:
        """POST: remove the queue's settings row (refused while the queue holds jobs); audited."""
        back = SeeOther(reverse("admin:backwave_django_queuesettings_changelist"))
        try:
            result = operator.remove_queue(queue, actor=actors.admin_user(request.user))
        except (TypeError, ValueError) as exc:
            self.message_user(request, f"Queue “{queue[:40]}”: {exc}; nothing was changed.", messages.ERROR)
            return back
        if result is RemoveQueueResult.HOLDS_JOBS:
            text = format_html(
                "Queue “{}” holds jobs, so its settings stay: remove them once it holds none.",
                _queue_name(queue),
            )
            self.message_user(request, text, messages.ERROR)
        elif result is RemoveQueueResult.NO_SETTINGS:
            self.message_user(
                request, f"Queue “{queue}” has no stored settings; nothing was removed.", messages.WARNING
            )
        else:
            self.message_user(
                request,
                f"Removed the settings of queue “{queue}”: no pause flag, no limit.",
                messages.SUCCESS,
            )
        return back

    @console_button(permission=PAUSE_PERMISSION)
    def limit_view(self, request: HttpRequest, queue: str) -> HttpResponse:
        """POST ``limit=<n>`` (n ≥ 0) or an empty ``limit`` to clear it."""
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
        create = request.POST.get("create") == "yes"
        posted = (("limit", request.POST["limit"]),)
        refused = self._refusal(request, queue, "limit", create=create, fields=posted)
        if refused is not None:
            return refused
        operator.set_concurrency_limit(queue, limit, actor=actors.admin_user(request.user), create=create)
        described = "no limit" if limit is None else f"a limit of {limit}"
        if limit == 0:
            described += ": it is blocked, nothing is claimed from it"
        self._log_queue_change(request, queue, f"Set concurrency limit: {described}")
        self.message_user(
            request, format_html("Queue “{}” now has {}.", _queue_name(queue), described), messages.SUCCESS
        )
        return back

    def _log_queue_change(self, request: HttpRequest, queue: str, message: str) -> None:
        """A ``LogEntry`` on the queue's settings row, for its History page."""
        row = QueueSettings.objects.filter(queue=queue).first()
        if row is not None:  # the operator call creates the row; absent only if removed meanwhile
            self.log_change(request, row, message)


def _sentence(text: str) -> str:
    """``text`` as a sentence: a capital first, a full stop last unless it ends a question."""
    text = text[:1].upper() + text[1:]
    return text if text.endswith(("?", ".")) else f"{text}."


def _queue_name(queue: str) -> str:
    """A queue as messages name it: a link to its jobs."""
    url = reverse("admin:backwave_django_jobrecord_changelist")
    return format_html('<a href="{}?{}">{}</a>', url, urlencode({"queue": queue}), queue)


def _rate(per_minute: float) -> str:
    """Finished attempts per minute, ``7.2``, ``< 0.1`` for a trickle (never a misleading 0)."""
    if per_minute == 0:
        return "0"
    if per_minute < 0.1:
        return "< 0.1"
    return f"{per_minute:.1f}".removesuffix(".0")


def queue_badge(status: monitor.QueueStatus) -> str:
    """Paused (amber), Blocked by a limit of 0 (red: nothing is claimed), or Claiming (green)."""
    if status.paused:
        return tone_badge("Paused", PAUSED_TONE, status="paused")
    if status.concurrency_limit == 0:
        return tone_badge("Blocked (limit 0)", BLOCKED_TONE, status="blocked")
    return tone_badge("Claiming", CLAIMING_TONE, status="claiming")


def _queue_row(
    status: monitor.QueueStatus,
    depth: monitor.QueueDepth | None,
    latency: monitor.QueueLatency | None,
    throughput: monitor.QueueThroughputs,
) -> dict[str, Any]:
    """One row of the Queues page: status, in-use / limit, latency, throughput, depth by state, and
    the control URLs."""
    jobs_url = reverse("admin:backwave_django_jobrecord_changelist")
    counts = depth.counts if depth is not None else (0,) * len(monitor.STATE_ORDER)
    limit = "∞" if status.concurrency_limit is None else str(status.concurrency_limit)
    done = throughput.get(status.queue)

    def filtered(**params: Any) -> str:
        return f"{jobs_url}?{urlencode({'queue': status.queue, **params})}"

    return {
        "queue": status.queue,
        "paused": status.paused,
        "badge": SafeString(queue_badge(status)),
        "limit": status.concurrency_limit,
        "in_use": f"{status.leased} / {limit}",
        "at_limit": status.at_limit,
        "latency": short_duration(latency.age) if latency is not None else None,
        "latency_since": SafeString(timestamp(latency.oldest_due, relative=False)) if latency else "",
        "latency_url": filtered(state__exact=int(JobState.SCHEDULED)),
        "done": done,
        "per_minute": _rate(done.total / throughput.minutes),
        "depths": [
            {
                "label": str(state.label),
                "count": count,
                "tone": STATE_TONES[state],
                "url": filtered(state__exact=int(state)),
            }
            for state, count in zip(monitor.STATE_ORDER, counts, strict=True)
            if count
        ],
        "total": sum(counts),
        "jobs_url": filtered(),
        "pause_url": reverse("admin:backwave_django_queuesettings_pause", args=[status.queue]),
        "resume_url": reverse("admin:backwave_django_queuesettings_resume", args=[status.queue]),
        "limit_url": reverse("admin:backwave_django_queuesettings_limit", args=[status.queue]),
        # Only a settings row of a queue that holds no jobs can be removed.
        "remove_url": (
            reverse("admin:backwave_django_queuesettings_remove", args=[status.queue])
            if status.has_settings and not sum(counts)
            else None
        ),
    }
