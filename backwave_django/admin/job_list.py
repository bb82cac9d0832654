"""The job list's machinery: a paginator that never counts the whole table, and its filters.

The job table can hold millions of rows, so nothing here scans it to draw a page
(``docs/admin.md``, "Jobs"): the count is the database's estimate when the list is unfiltered and
a capped count otherwise, and every filter takes its choices from a cheap source (the registry,
the queue settings, the schedules, a sample of the newest tags) rather than from the jobs.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any

from django.contrib import admin
from django.contrib.admin.views.main import ChangeList
from django.core.paginator import Paginator
from django.db import connections
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.functional import cached_property

from .. import registry
from ..core.states import TerminalStateClass
from ..models import JobTag, QueueSettings, RecurringSchedule

#: Filtered job lists are counted exactly up to this many rows and shown as "1,000+" beyond: a
#: count that stops early costs the same on any table size (20 pages of 50; narrow the filter for more).
COUNT_CAP = 1_000
#: The tag filter offers the most common tags among this many of the newest tag rows.
TAG_SAMPLE = 2_000
#: How many tags the tag filter offers.
TAG_CHOICES = 20


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


# --- Filters -------------------------------------------------------------------------------------


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
