"""The console's Dashboard page: counts by queue and state, health, throughput, previews.

It lives at ``admin/backwave_django/dashboard/`` and is listed in the app index through the
:class:`~backwave_django.models.Dashboard` proxy model, so it needs no custom ``AdminSite``.
Viewing it needs ``backwave_django.view_jobrecord``. It only reads, through
:mod:`backwave_django.monitor`; this module turns those read models into rows, links and chart
geometry so the templates stay dumb (and Django's autoescaping covers every name shown).

Live refresh: ``dashboard.js`` fetches ``dashboard/fragment/`` every few seconds and swaps the
``#bw-dashboard-live`` container; without JavaScript the page is complete and has a reload link.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urlencode

from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils import timezone
from django.utils.safestring import SafeString
from django.utils.text import Truncator

from .. import clock, monitor
from ..core.states import JobState, TerminalStateClass
from .console import (
    BREADCRUMBS_AS_LIST,
    live_context,
    refresh_interval_ms as refresh_interval_ms,  # re-exported: tests pin it here
    worker_url,
)
from .display import (
    STATE_TONES,
    format_instant,
    job_state_badge,
    short_duration,
    short_job_id,
    stored_timestamp,
    timestamp,
)

VIEW_PERMISSION = "backwave_django.view_jobrecord"
#: Terminal causes are cut to this many characters in the Needs-attention preview.
CAUSE_PREVIEW_CHARS = 140
#: Chart colours and dash patterns (distinct without colour, too), keyed by series.
SERIES_STYLE = {
    "succeeded": (STATE_TONES[JobState.SUCCEEDED], ""),
    "failed": ("#c77700", "6 3"),
    "dead_lettered": (STATE_TONES[JobState.DEAD_LETTERED], "2 3"),
}


def jobs_url(**params: Any) -> str:
    """The jobs changelist filtered by ``params`` (the admin's own list-filter parameters)."""
    base = reverse("admin:backwave_django_jobrecord_changelist")
    return f"{base}?{urlencode(params)}" if params else base


def job_url(sequence: int) -> str:
    return reverse("admin:backwave_django_jobrecord_change", args=[sequence])


def countdown(left: timedelta | None) -> str:
    """A lease's time left: ``42 s left``, ``expired`` (awaiting the sweep), or ``—`` without a lease."""
    if left is None:
        return "—"
    if left <= timedelta(0):
        return "expired"
    return f"{short_duration(left)} left"


# --- The throughput chart --------------------------------------------------------------------


@dataclass(frozen=True)
class ChartLine:
    name: str
    label: str
    colour: str
    dash: str
    total: int
    segments: list[str]  # SVG polyline ``points``, one per run of counted minutes


@dataclass(frozen=True)
class ChartTick:
    position: float
    label: str


@dataclass(frozen=True)
class ChartMinute:
    x: float
    label: str
    values: list[int | None]
    title: str


@dataclass(frozen=True)
class Chart:
    """Geometry of the throughput SVG (viewBox ``0 0 WIDTH HEIGHT``), computed here, drawn by the template."""

    width: int
    height: int
    left: float
    right: float
    top: float
    bottom: float
    column: float
    plot_height: float
    y_label_x: float
    lines: list[ChartLine]
    y_ticks: list[ChartTick]
    x_ticks: list[ChartTick]
    minutes: list[ChartMinute]
    uncounted_until: float | None
    uncounted_width: float
    counted_from: datetime | None
    recording: bool
    summary: str
    timezone: str


def _nice_ceiling(value: int) -> int:
    """A readable axis maximum: the smallest 1, 2 or 5 times a power of ten, at or above ``value``."""
    if value <= 1:
        return 1
    magnitude = int(10 ** math.floor(math.log10(value)))
    for step in (1, 2, 5, 10):
        if value <= step * magnitude:
            return step * magnitude
    return 10 * magnitude  # pragma: no cover - the loop always returns


def build_chart(series: monitor.Throughput) -> Chart:
    width, height = 640, 220
    left, right, top, bottom = 48.0, 628.0, 12.0, 184.0
    count = len(series.minutes)
    column = (right - left) / count
    ceiling = _nice_ceiling(series.peak)

    def x_of(minute: int) -> float:
        """The horizontal centre of the ``minute``-th column."""
        return round(left + (minute + 0.5) * column, 1)

    def y_of(value: int) -> float:
        """The height of ``value`` on the axis from 0 (bottom) to ``ceiling`` (top)."""
        return round(bottom - (bottom - top) * value / ceiling, 1)

    lines = []
    for name in monitor.SERIES:
        segments: list[str] = []
        run: list[str] = []
        for minute, value in enumerate(series.series[name]):
            if value is None:
                if run:
                    segments.append(" ".join(run))
                run = []
                continue
            run.append(f"{x_of(minute)},{y_of(value)}")
        if run:
            segments.append(" ".join(run))
        colour, dash = SERIES_STYLE[name]
        lines.append(ChartLine(name, monitor.SERIES_LABELS[name], colour, dash, series.total(name), segments))

    local = [timezone.localtime(minute) for minute in series.minutes]
    y_ticks = [ChartTick(y_of(tick), f"{tick:,}") for tick in sorted({0, ceiling // 2, ceiling})]
    x_ticks = [ChartTick(x_of(minute), local[minute].strftime("%H:%M")) for minute in range(0, count, 15)]
    if count - 1 not in range(0, count, 15):
        x_ticks.append(ChartTick(x_of(count - 1), local[-1].strftime("%H:%M")))
    minutes = []
    for minute in range(count):
        values = [series.series[name][minute] for name in monitor.SERIES]
        label = local[minute].strftime("%H:%M")
        parts = [
            f"{'not counted' if value is None else f'{value:,}'} {monitor.SERIES_LABELS[name].lower()}"
            for name, value in zip(monitor.SERIES, values, strict=True)
        ]
        minutes.append(
            ChartMinute(round(left + minute * column, 1), label, values, f"{label}: {', '.join(parts)}")
        )
    uncounted_until = None
    if series.counted_from is not None:
        first = next(
            (index for index, start in enumerate(series.minutes) if start >= series.counted_from), count
        )
        uncounted_until = round(left + first * column, 1)
    summary = ", ".join(f"{line.total:,} {line.label.lower()}" for line in lines)
    return Chart(
        width,
        height,
        left,
        right,
        top,
        bottom,
        round(column, 2),
        bottom - top,
        left - 6,
        lines,
        y_ticks,
        x_ticks,
        minutes,
        uncounted_until,
        0.0 if uncounted_until is None else round(uncounted_until - left, 1),
        series.counted_from,
        series.recording,
        f"Last {count} minutes, per minute: {summary}.",
        timezone.get_current_timezone_name(),
    )


# --- The page --------------------------------------------------------------------------------


def dashboard_context(now: datetime) -> dict[str, Any]:
    """Everything the dashboard templates render, as plain rows with their links precomputed."""
    view = monitor.overview(now=now)
    states = monitor.STATE_ORDER
    return {
        "view": view,
        "now_text": format_instant(view.now),
        "workers": _worker_rows(view, now),
        "states": [{"state": state, "badge": SafeString(job_state_badge(state))} for state in states],
        "depth_rows": _depth_rows(view),
        "totals": _total_cells(view),
        "all_jobs_url": jobs_url(),
        "executing": _executing_rows(view),
        "executing_url": jobs_url(state__exact=int(JobState.LEASED)),
        "leased_total": view.total(JobState.LEASED),
        "attention": _attention_rows(view, now),
        "dead_lettered_total": view.total(JobState.DEAD_LETTERED),
        "quarantined_total": view.total(JobState.QUARANTINED),
        "dead_lettered_url": jobs_url(state__exact=int(JobState.DEAD_LETTERED)),
        "quarantined_url": jobs_url(state__exact=int(JobState.QUARANTINED)),
        "latency": _latency_rows(view),
        "paused": [{"name": s.queue, "url": jobs_url(queue=s.queue)} for s in view.paused_queues],
        "at_limit": _at_limit_rows(view),
        "stale_after": short_duration(monitor.worker_stale_after()),
        "failures_url": jobs_url(terminal_class=int(TerminalStateClass.DEAD_LETTERED_OR_QUARANTINED)),
        "retrying_url": jobs_url(retrying=1),
        "scan_limit": monitor.THROUGHPUT_SCAN_LIMIT,
        "schedule_problems": _schedule_problem_rows(view, now),
        "schedules_url": reverse("admin:backwave_django_recurringschedule_changelist"),
        "workers_url": reverse("admin:backwave_django_workernode_changelist"),
        "queues_url": reverse("admin:backwave_django_queuesettings_changelist"),
        "chart": build_chart(view.throughput),
    }


def _depth_rows(view: monitor.Overview) -> list[dict[str, Any]]:
    """One row per queue: its total and one linked cell per state."""
    return [
        {
            "queue": depth.queue,
            "url": jobs_url(queue=depth.queue),
            "total": depth.total,
            "cells": [
                {
                    "state": state,
                    "count": count,
                    "url": jobs_url(queue=depth.queue, state__exact=int(state)),
                }
                for state, count in zip(monitor.STATE_ORDER, depth.counts, strict=True)
            ],
        }
        for depth in view.depths
    ]


def _total_cells(view: monitor.Overview) -> list[dict[str, Any]]:
    """The jobs in each state over every queue, each linked to the job list."""
    return [
        {"state": state, "count": count, "url": jobs_url(state__exact=int(state)), "tone": STATE_TONES[state]}
        for state, count in zip(monitor.STATE_ORDER, view.totals, strict=True)
    ]


def _at_limit_rows(view: monitor.Overview) -> list[dict[str, Any]]:
    """The queues running as many jobs as their concurrency limit allows."""
    return [
        {
            "name": status.queue,
            "url": jobs_url(queue=status.queue, state__exact=int(JobState.LEASED)),
            "leased": status.leased,
            "limit": status.concurrency_limit,
        }
        for status in view.queues_at_limit
    ]


def _executing_rows(view: monitor.Overview) -> list[dict[str, Any]]:
    """The jobs running now, with their lease's end and the worker holding it."""
    return [
        {
            "job": job,
            "short_id": short_job_id(job.job_id),
            "url": job_url(job.sequence),
            "expiry": SafeString(timestamp(job.lease_expiry, relative=False)),
            "countdown": countdown(job.lease_left),
            "worker_url": worker_url(job.lease_owner) if job.lease_owner else "",
        }
        for job in view.executing
    ]


def _attention_rows(view: monitor.Overview, now: datetime) -> list[dict[str, Any]]:
    """The jobs that need an operator's attention, with a preview of their cause."""
    return [
        {
            "job": job,
            "short_id": short_job_id(job.job_id),
            "url": job_url(job.sequence),
            "badge": SafeString(job_state_badge(job.state)),
            "ended": SafeString(timestamp(job.terminal_at, now=now, label="ended")),
            "cause": Truncator(job.terminal_cause or "").chars(CAUSE_PREVIEW_CHARS),
        }
        for job in view.needs_attention
    ]


def _latency_rows(view: monitor.Overview) -> list[dict[str, Any]]:
    """Each queue's oldest due job, and whether the queue is paused."""
    paused_names = {status.queue for status in view.paused_queues}
    return [
        {
            "entry": entry,
            "url": jobs_url(queue=entry.queue, state__exact=int(JobState.SCHEDULED)),
            "age": short_duration(entry.age),
            "due": SafeString(timestamp(entry.oldest_due, relative=False)),
            "paused": entry.queue in paused_names,
        }
        for entry in view.latency
    ]


def _worker_rows(view: monitor.Overview, now: datetime) -> list[dict[str, Any]]:
    """The workers (live ones first), each with when it was last seen."""
    return [
        {
            "worker": worker,
            "seen": SafeString(timestamp(worker.last_seen_at, now=now, label="seen")),
            "url": worker_url(worker.worker_id),
        }
        for worker in view.workers
    ]


def _schedule_problem_rows(view: monitor.Overview, now: datetime) -> list[dict[str, Any]]:
    """The schedule problems the overview found, each linked to its schedule's page."""
    return [
        {
            "problem": problem,
            "last_skipped": SafeString(stored_timestamp(problem.last_skipped, now=now)),
            "url": reverse("admin:backwave_django_recurringschedule_change", args=[problem.pk]),
        }
        for problem in view.schedules.problems
    ]


class DashboardAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    """The Dashboard page in place of a changelist; nothing to add, change or delete."""

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return bool(request.user.has_perm(VIEW_PERMISSION))

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def get_urls(self) -> list[URLPattern]:
        # Only the page and its fragment: no add, change, delete or history views for a page.
        wrap = self.admin_site.admin_view
        return [
            path("", wrap(self.changelist_view), name="backwave_django_dashboard_changelist"),
            path("fragment/", wrap(self.fragment_view), name="backwave_django_dashboard_fragment"),
        ]

    def _context(self, request: HttpRequest) -> dict[str, Any]:
        if not self.has_view_permission(request):
            raise PermissionDenied
        started = time.perf_counter()
        context = dashboard_context(clock.now())
        refresh_ms = refresh_interval_ms(time.perf_counter() - started)
        fragment_url = reverse("admin:backwave_django_dashboard_fragment")
        return {
            **context,
            "fragment_url": fragment_url,
            "refresh_ms": refresh_ms,
            "bw_live": live_context("dashboard", "bw-dashboard-live", refresh_ms, fragment_url),
        }

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        context = {
            **self.admin_site.each_context(request),
            "title": "Dashboard",
            "opts": self.opts,
            "app_label": self.opts.app_label,
            "bw_breadcrumbs_as_list": BREADCRUMBS_AS_LIST,
            **self._context(request),
            **(extra_context or {}),
        }
        request.current_app = self.admin_site.name
        return TemplateResponse(request, "admin/backwave_django/dashboard.html", context)

    def fragment_view(self, request: HttpRequest) -> HttpResponse:
        """The live part of the page alone, for the refresh script (``admin_view`` marks it uncacheable)."""
        return TemplateResponse(
            request, "admin/backwave_django/dashboard_fragment.html", self._context(request)
        )
