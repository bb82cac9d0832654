"""The job list's machinery: a paginator that never counts the whole table, its filters and cells.

The job table can hold millions of rows, so nothing here scans it to draw a page
(``docs/admin.md``, "Jobs"): the count is the database's estimate when the list is unfiltered and
a capped count otherwise, and every filter takes its choices from a cheap source (the registry,
the queue settings, the schedules, the workers) rather than from the jobs; the tag filter (capped
facets and a search box over the tags) is in :mod:`.job_tags`. The Retrying view (``?retrying=1``)
is a filter too, with the last failure of each row it shows read in the same query.

The cells keep each row to one line, so 15 and more jobs fit in a 1280 x 800 window: each puts
what belongs together side by side (a job's wire name, short id and queue; its state, attempt,
priority and progress; its tags), cut short where the column ends with the whole text as its
tooltip (the console's styles, ``.bw-line``). Times are never cut. The text an operator opened a
failure list for, a terminal cause or a last failure, is a line of its own under its row
(:class:`JobChangeList`), wrapped at words across the table's whole width.
"""

from __future__ import annotations

import time
from datetime import datetime
from typing import Any

from django.contrib import admin
from django.contrib.admin.views.main import ChangeList
from django.core.paginator import Paginator
from django.db import connections
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.functional import cached_property
from django.utils.html import format_html

from .. import registry
from ..core.job_filter import (
    PAGE,
    PRIORITY_RANGES,
    FilterError,
    JobFilter,
    ParsedFilter,
    parse,
    read_priority,
)
from ..core.states import JobState, TerminalStateClass
from ..models import JobRecord
from ..monitor import configured_queues, schedule_ids, with_last_failure as monitor_last_failure, worker_ids
from .console import HIDDEN_TEXT, attempt_ceiling, discarded_marker, progress_bar
from .display import copy_button, job_state_badge, short_job_id, tag_pills, timestamp

#: Filtered job lists are counted exactly up to this many rows and shown as "1,000+" beyond: a
#: count that stops early costs the same on any table size (20 pages of 50; narrow the filter for more).
COUNT_CAP = 1_000
#: The Retrying view reads this much of each shown job's last failure detail (for its first line) ...
FAILURE_HEAD_CHARS = 300
#: ... and shows at most this much of that line.
FAILURE_LINE_CHARS = 240
#: A failure list shows this much of each terminal cause (the whole cause is its tooltip).
CAUSE_CHARS = 600
#: The failure tabs, each a state never merged with the other.
FAILURE_STATES = (JobState.DEAD_LETTERED, JobState.QUARANTINED)


# --- Counting ------------------------------------------------------------------------------------


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
        # Only the keys: annotations made for the rows shown (the Retrying view's last failure)
        # are not computed for the rows counted.
        counted = queryset.order_by().values("pk")[: COUNT_CAP + 1].count()
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


# --- Filters -------------------------------------------------------------------------------------


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
            *configured_queues(),
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
        return schedule_ids()


class LeaseOwnerFilter(_ChoicesFilter):
    """``?lease_owner=<worker id>``: the jobs a worker is running (Leased, so the Leased partial
    index serves it); the registered workers are the choices, the Workers page links here."""

    title = "running on worker"
    parameter_name = field = "lease_owner"

    def known_values(self) -> list[str]:
        return worker_ids()

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        value = self.value()
        return queryset.filter(state=JobState.LEASED, lease_owner=value) if value else queryset


class TerminalClassFilter(admin.SimpleListFilter):
    """Jobs in one terminal class: Succeeded or Cancelled, or Dead-Lettered or Quarantined."""

    title = "terminal class"
    parameter_name = "terminal_class"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [(str(state_class.value), str(state_class.label)) for state_class in TerminalStateClass]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        try:
            state_class = TerminalStateClass(int(self.value() or ""))
        except ValueError:
            return queryset
        return queryset.filter(state__in=state_class.states)


class PriorityFilter(admin.SimpleListFilter):
    """Jobs above, at or below the normal priority (0): three ranges, never a scan for values; a
    deep link may name one priority (``?priority=5``). Values are read by ``core/job_filter.py``."""

    title = "priority"
    parameter_name = "priority"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        choices = [(value, label[:1].upper() + label[1:]) for value, (label, _, _) in PRIORITY_RANGES.items()]
        value = self.value()
        if value and value not in PRIORITY_RANGES:
            choices.append((str(value), str(value)))
        return choices

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        value = self.value()
        if not value:
            return queryset
        bounds = JobFilter(priority=read_priority(str(value))).priority_bounds()
        assert bounds is not None
        return queryset.filter(priority__gte=bounds[0], priority__lte=bounds[1])


class RetryingFilter(admin.SimpleListFilter):
    """``?retrying=1``: jobs waiting for their next try, Scheduled with attempt >= 1 (the Retrying view).

    Scheduled rows are the partial index ``backwave_job_claim``, so the view reads those alone (next
    try first, ``JobRecordAdmin.get_ordering``), never the ended jobs that make up most of a table.
    """

    title = "retry"
    parameter_name = "retrying"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [("1", "waiting for a retry")]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        return retrying(queryset) if self.value() == "1" else queryset


def retrying(queryset: QuerySet[Any]) -> QuerySet[Any]:
    """The jobs of ``queryset`` waiting for a retry: Scheduled, having run at least once."""
    return queryset.filter(state=JobState.SCHEDULED, attempt__gte=1)


def with_last_failure(queryset: QuerySet[Any], *, detail: bool) -> QuerySet[Any]:
    """Annotate each job with its newest recorded failure: ``bw_failed_at`` (when), and with
    ``detail`` (a viewer who may see it) ``bw_failure_head``, the start of its failure detail.

    Each is a subquery on the transition log's (job, ordinal) index, newest entry first, so a page
    costs one query however many rows it shows; without ``detail`` the detail is never read.
    """
    return monitor_last_failure(queryset, detail_chars=FAILURE_HEAD_CHARS if detail else None)


def last_failure_cell(job: JobRecord) -> str:
    """A Retrying row's last failure (:func:`with_last_failure`): the first line of its detail for a
    viewer who may see it, otherwise only that it failed and when."""
    failed_at = getattr(job, "bw_failed_at", None)
    if failed_at is None:
        return format_html(
            '<span class="bw-quiet" title="{}">Last failure: none recorded.</span>',
            "No failure detail logged.",
        )
    when = timestamp(failed_at)
    head = getattr(job, "bw_failure_head", None)
    if head is None:
        return format_html(
            '<span class="bw-quiet">Last failure:</span> '
            '<span class="bw-last-failure" title="{}">failed at</span> {}',
            HIDDEN_TEXT,
            when,
        )
    line = head.split("\n", 1)[0].strip()
    short = line if len(line) <= FAILURE_LINE_CHARS else line[: FAILURE_LINE_CHARS - 1] + "…"
    return format_html(
        '<span class="bw-quiet">Last failure:</span> '
        '<span class="bw-last-failure" data-testid="bw-last-failure" title="{}">{}</span> {}',
        line,
        short,
        when,
    )


def cause_cell(job: JobRecord) -> str:
    """A failed job's terminal cause, for the line under its row in a failure list."""
    text = job.terminal_cause or "—"
    short = text if len(text) <= CAUSE_CHARS else text[: CAUSE_CHARS - 1] + "…"
    return format_html(
        '<span class="bw-quiet">Cause:</span> '
        '<span class="bw-cause" data-testid="bw-cause" title="{}">{}</span>',
        text,
        short,
    )


# --- Cells ---------------------------------------------------------------------------------------

# List cells link relative to the changelist they are drawn on: no reverse() per row.


def job_cell(job: JobRecord) -> str:
    """The job on one line: its wire name (the link to it, cut short with the whole name as its
    tooltip), its short id with a copy button, and its queue."""
    return format_html(
        '<span class="bw-line bw-job-line"><a href="{}/change/" class="bw-job-link" title="{}">{}</a>'
        '<span class="bw-job-meta"><code title="{}">{}</code> {} '
        '<span class="bw-quiet bw-job-queue" title="queue {}">{}</span></span></span>',
        job.pk,
        f"{job.wire_name} {job.job_id}",
        job.wire_name,
        job.job_id,
        short_job_id(job.job_id),
        copy_button(str(job.job_id)),
        job.queue,
        job.queue,
    )


def status_cell(job: JobRecord) -> str:
    """On one line: the state badge (and the Discarded marker), attempt / ceiling, a priority
    other than 0 and the progress bar."""
    facts = [f"attempt {job.attempt} / {attempt_ceiling(job)}"]
    if job.priority:
        facts.append(f"priority {job.priority:+d}")
    marker = discarded_marker(job)
    text = " · ".join(facts)
    return format_html(
        '<span class="bw-line bw-status-line" title="{}"><span class="bw-status">{}{}</span> '
        '<small class="bw-facts bw-quiet">{}</small>{}</span>',
        text,
        job_state_badge(job.state),
        format_html(" {}", marker) if marker else "",
        text,
        format_html(' <span class="bw-status-progress">{}</span>', progress_bar(job.progress))
        if job.progress
        else "",
    )


def when_cell(job: JobRecord, now: datetime) -> str:
    """When an ended job ended, otherwise when it is (or was) due; how long ago beside it."""
    if job.terminal_at is not None:
        return timestamp(job.terminal_at, now=now, label="ended")
    return timestamp(job.due_time, now=now, label="due")


def tags_cell(tags: Any) -> str:
    """A job's tags on one line, cut short with every tag in the tooltip; "—" for none."""
    tags = list(tags)
    if not tags:
        return "—"
    return format_html(
        '<span class="bw-line bw-tag-line" title="{}">{}</span>',
        ", ".join(str(tag) for tag in tags),
        tag_pills(tags),
    )


# --- The list's views ----------------------------------------------------------------------------


def retrying_view(request: HttpRequest) -> bool:
    """Whether the job list is the Retrying view (``?retrying=1``)."""
    return request.GET.get(RetryingFilter.parameter_name) == "1"


def failure_tab(request: HttpRequest) -> JobState | None:
    """The failure tab the job list is showing (``?state__exact=5`` or ``6``), if any."""
    if retrying_view(request):
        return None
    wanted = request.GET.get("state__exact")
    return next((state for state in FAILURE_STATES if wanted == str(int(state))), None)


def failure_list(request: HttpRequest) -> bool:
    """A list of failed jobs only: a failure tab, or the Dead-Lettered-or-Quarantined class."""
    wanted = str(int(TerminalStateClass.DEAD_LETTERED_OR_QUARANTINED))
    return failure_tab(request) is not None or (
        not retrying_view(request) and request.GET.get(TerminalClassFilter.parameter_name) == wanted
    )


class JobChangeList(ChangeList):
    """The job list, which knows the line it draws under each row: the terminal cause in a failure
    list, the last failure in the Retrying view, nothing otherwise (read by the ``job_results`` tag).

    Its filter is read by ``core/job_filter.py`` first: a parameter that does not read is left out
    of what Django's filters see and the list shows no jobs (``bw_errors`` says why; the page
    reports them), as does a page beyond the last (``docs/admin.md``, "A filter is exact or refused").
    """

    def __init__(self, request: HttpRequest, *args: Any, **kwargs: Any) -> None:
        self.bw_detail = (
            last_failure_cell if retrying_view(request) else cause_cell if failure_list(request) else None
        )
        self.bw_parsed: ParsedFilter = parse(request.GET.lists())
        self.bw_errors: list[FilterError] = list(self.bw_parsed.errors)
        started = time.perf_counter()
        super().__init__(request, *args, **kwargs)
        #: What building the list (its filters, search and count) cost: live refresh stretches by it.
        self.bw_build_seconds = time.perf_counter() - started
        #: What the search says about itself (a scan that stopped at the newest jobs).
        self.bw_search_notes: tuple[str, ...] = getattr(request, SEARCH_NOTES, ())

    def get_filters_params(self, params: Any = None) -> dict[str, Any]:
        lookup: dict[str, Any] = super().get_filters_params(params)
        lookup.pop("_changelist_filters", None)
        for error in self.bw_errors:
            lookup.pop(error.parameter, None)
        return lookup

    def get_queryset(self, request: HttpRequest, exclude_parameters: Any = None) -> QuerySet[Any]:
        queryset = super().get_queryset(request, exclude_parameters)
        return queryset.none() if self.bw_errors else queryset

    def get_results(self, request: HttpRequest) -> None:
        if not self.bw_errors and self.page_num > 1:
            pages = self.model_admin.get_paginator(request, self.queryset, self.list_per_page).num_pages
            if self.page_num > pages:
                self.bw_errors.append(
                    FilterError(PAGE, str(self.page_num), f"a page from 1 to {max(pages, 1)}")
                )
                self.queryset = self.queryset.none()
                self.page_num = 1
        super().get_results(request)

    @property
    def bw_filter_ok(self) -> bool:
        """Whether every parameter was read (a whole-filter action is offered only then)."""
        return not self.bw_errors


#: The request attribute the job admin's search leaves its notes on for the changelist (the
#: ModelAdmin is shared between requests, so nothing per request is kept on it).
SEARCH_NOTES = "_bw_search_notes"
