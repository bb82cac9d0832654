"""Jobs as operators read them: one job, a filtered page of jobs, and the counts by queue and state.

:class:`JobQuery` says which jobs: the scalar filters (queue, state, wire name) and the tag
predicates (:class:`HasLabel`, :class:`HasKey`, :class:`HasKeyValue`), all ANDed; no predicate
matches every job. :func:`scoped_jobs` turns it into the one queryset every read that takes a
query uses (:func:`list_jobs` here, ``tag_facet`` in :mod:`.tags`), so a filter means the same
everywhere. Text is matched exactly, on MariaDB too (:class:`._sql.SameText`).

Costs: :func:`get_job` is two primary-key or unique-index reads. :func:`list_jobs` walks the job
table's primary key from the cursor (``sequence``) in the page's direction, each tag predicate a
probe of the tag table's ``(job, key, value)`` unique index per row walked, and reads the tags of
the rows shown in one more query; a page never costs more than one read of its rows and one of
their tags. :func:`count_jobs` is one ``GROUP BY`` over the job table (a sequential scan).
See docs/monitor.md.
"""

from __future__ import annotations

import uuid
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TypeAlias

from django.db.models import Count, Exists, F, OuterRef, QuerySet, Value

from ..core.limits import LimitKeys, stored_limit_keys
from ..core.states import DependencyMode, JobState
from ..core.tags import Tag, TagPair, tag_from_pair
from ..core.validation import require_count, require_uuid
from ..database import jobs_database
from ..models import JobRecord, JobTag
from ._sql import Ordinal, SameText, text
from .history import HistoryEntry, chunks, transition_logs
from .search import search_jobs

#: A page of :func:`list_jobs` holds at most this many jobs, whatever ``max_results`` asks for.
MAX_PAGE = 200


def _tag_part(owner: str, name: str, value: object) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{owner}: {name} must be a str, got {type(value).__name__}")
    if not value:
        raise ValueError(
            f"{owner}: {name} must be non-empty (tags never have an empty value, and a label is "
            'HasLabel(value), not a key of "")'
        )
    return value


@dataclass(frozen=True)
class HasLabel:
    """The job carries the label ``value`` (a tag with no key)."""

    value: str

    def __post_init__(self) -> None:
        _tag_part("HasLabel", "value", self.value)


@dataclass(frozen=True)
class HasKey:
    """The job carries some tag under ``key``, whatever its value (a label has no key)."""

    key: str

    def __post_init__(self) -> None:
        _tag_part("HasKey", "key", self.key)


@dataclass(frozen=True)
class HasKeyValue:
    """The job carries the keyed tag ``key`` = ``value``."""

    key: str
    value: str

    def __post_init__(self) -> None:
        _tag_part("HasKeyValue", "key", self.key)
        _tag_part("HasKeyValue", "value", self.value)


TagPredicate: TypeAlias = HasLabel | HasKey | HasKeyValue


def _state(value: object) -> JobState | None:
    if value is None or isinstance(value, JobState):
        return value
    if isinstance(value, int) and not isinstance(value, bool) and value in JobState.values:
        return JobState(value)
    known = ", ".join(f"{int(state)} ({state.label})" for state in JobState)
    raise ValueError(f"JobQuery: unknown job state {value!r}; a JobState or one of {known}")


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _optional_str(name: str, value: object) -> str | None:
    if value is not None and not isinstance(value, str):
        raise TypeError(f"JobQuery: {name} must be a str or None, got {type(value).__name__}")
    return value


@dataclass(frozen=True)
class JobQuery:
    """Which jobs to read: every filter given, ANDed (None, or no tag predicates, matches all).

    ``after_sequence`` is the paging cursor, relative to the direction: oldest first reads the
    jobs with a ``sequence`` above it, newest first those below it. ``max_results`` is capped at
    :data:`MAX_PAGE`; zero or less reads nothing. :func:`tag_facet <.tags.tag_facet>` takes a
    query for its filters only and ignores the paging fields.
    """

    queue: str | None = None
    state: JobState | int | None = None
    wire_name: str | None = None
    tags: tuple[TagPredicate, ...] = ()
    after_sequence: int | None = None
    newest_first: bool = False
    max_results: int = 50
    #: A search term, read as :mod:`.search` reads the console's search box (None: no search) ...
    search: str | None = None
    #: ... which searches failure detail only when this says the reader may see it.
    search_failure_detail: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "state", _state(self.state))
        _optional_str("queue", self.queue)
        _optional_str("wire_name", self.wire_name)
        _optional_str("search", self.search)
        tags = self.tags
        if isinstance(tags, HasLabel | HasKey | HasKeyValue | str) or not isinstance(tags, tuple | list):
            raise TypeError(f"JobQuery: tags is a tuple of HasLabel, HasKey or HasKeyValue, not {tags!r}")
        for predicate in tags:
            if not isinstance(predicate, HasLabel | HasKey | HasKeyValue):
                raise TypeError(
                    f"JobQuery: each tag predicate is a HasLabel, HasKey or HasKeyValue, got {predicate!r}"
                )
        object.__setattr__(self, "tags", tuple(tags))
        if self.after_sequence is not None and not _is_int(self.after_sequence):
            raise TypeError(f"JobQuery: after_sequence must be an int or None, got {self.after_sequence!r}")
        if not _is_int(self.max_results):
            raise TypeError(f"JobQuery: max_results must be an int, got {self.max_results!r}")
        if not isinstance(self.newest_first, bool):
            raise TypeError(f"JobQuery: newest_first must be a bool, got {self.newest_first!r}")

    @property
    def filters_anything(self) -> bool:
        """Whether any filter narrows the jobs (the paging fields are not filters)."""
        scalars = (self.queue, self.state, self.wire_name, self.search)
        return any(value is not None for value in scalars) or bool(self.tags)


def tag_condition(predicate: TagPredicate, job: str = "pk") -> Exists:
    """The job (``OuterRef(job)``) carries a tag matching ``predicate``: a probe of the tag table's
    ``(job, key, value)`` unique index."""
    tags = JobTag.objects.filter(job_id=OuterRef(job))
    if isinstance(predicate, HasLabel):
        key, value = "", predicate.value
    elif isinstance(predicate, HasKeyValue):
        key, value = predicate.key, predicate.value
    else:
        return Exists(tags.filter(SameText(F("key"), Value(predicate.key))))
    return Exists(tags.filter(SameText(F("key"), Value(key)), SameText(F("value"), Value(value))))


def with_tags(jobs: QuerySet[Any], predicates: Iterable[TagPredicate]) -> QuerySet[Any]:
    """``jobs`` narrowed to those matching every tag predicate (the console's tag filter uses it too)."""
    for predicate in predicates:
        jobs = jobs.filter(tag_condition(predicate))
    return jobs


def scoped_jobs(query: JobQuery | None) -> QuerySet[JobRecord]:
    """The jobs a query's filters select (its paging fields ignored); every job for None."""
    jobs = JobRecord.objects.using(jobs_database()).all()
    if query is None:
        return jobs
    if not isinstance(query, JobQuery):
        raise TypeError(f"expected a JobQuery, got {type(query).__name__}")
    for name in ("queue", "wire_name"):
        wanted = getattr(query, name)
        if wanted is not None:
            jobs = jobs.filter(SameText(F(name), Value(wanted)))
    if query.state is not None:
        jobs = jobs.filter(state=query.state)
    jobs = with_tags(jobs, query.tags)
    if query.search is not None:
        jobs = search_jobs(jobs, query.search, failure_detail=query.search_failure_detail).jobs
    return jobs


# --- Rows ------------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class JobSnapshot:
    """A job as stored when it was read: the one read model of a job (docs/monitor.md).

    Every column of the job row and the job's tags. The payload and the output (which can be large
    and are sensitive) are read only when asked for (``content=True``), and the transition log only
    with ``history=True``; otherwise they are None and empty. ``backwave_django.results`` hands
    users a documented subset of it, and the testing harness reads its snapshots through it.
    """

    sequence: int
    job_id: uuid.UUID
    wire_name: str
    queue: str
    state: JobState
    priority: int
    attempt: int
    max_attempts: int | None
    backoff: Any
    timeout: float | None
    due_time: datetime
    enqueued_at: datetime
    lease_owner: str | None
    lease_expiry: datetime | None
    cancel_requested: bool
    terminal_at: datetime | None
    terminal_cause: str | None
    parents_remaining: int
    mode: DependencyMode
    schedule_id: str | None
    workflow_id: uuid.UUID | None
    unique_key: str | None
    next_ordinal: int
    #: The last progress its handler recorded (``{"done", "total", "note", "at"}``), or None.
    progress: Any
    #: The W3C ``traceparent`` the job was enqueued under, or None (docs/tracing.md).
    trace_context: str | None = None
    #: Flow control (docs/flow-control.md): its partition, or None, and its buckets
    #: (``((limit name, bucket), ...)``, sorted by name; empty for a job under no limit).
    partition: str | None = None
    limit_keys: LimitKeys = ()
    #: The lane it is claimed from (``core.limits.lane_of``; 0 for a plain job).
    lane: int = 0
    #: ``(key, value)`` pairs, a label's key being ``""``, in code-point order.
    tags: tuple[TagPair, ...] = field(default=())
    #: Whether ``payload`` and ``output`` were read (``content=True``).
    content_read: bool = False
    #: The payload it was enqueued with (None unless ``content_read``).
    payload: Any = None
    #: What its handler returned, set once it Succeeded (None unless ``content_read``).
    output: Any = None
    #: The transition log, oldest first (read only with ``history=True``; empty when ``HISTORY``
    #: is off, the log then not being kept).
    transitions: tuple[HistoryEntry, ...] = ()

    @property
    def is_terminal(self) -> bool:
        return self.state.is_terminal

    @property
    def labels_and_tags(self) -> tuple[Tag, ...]:
        """The tags as users write them: labels as strings, keyed tags as ``(key, value)``."""
        return tuple(tag_from_pair(pair) for pair in self.tags)


#: The former name of :class:`JobSnapshot` (deprecated; docs/upgrading.md).
MonitorJob = JobSnapshot

#: The columns every :class:`JobSnapshot` is read from, in field order (all but the content).
COLUMNS = tuple(
    name
    for name in JobSnapshot.__dataclass_fields__
    if name not in ("tags", "content_read", "payload", "output", "transitions")
)
#: The columns read besides with ``content=True``.
CONTENT_COLUMNS = ("payload", "output")


def _tags_of(sequences: list[int]) -> dict[int, tuple[TagPair, ...]]:
    """The tags of these jobs, in one query (one per 500 jobs)."""
    found: dict[int, list[TagPair]] = defaultdict(list)
    for chunk in chunks(sequences):
        rows = JobTag.objects.using(jobs_database()).filter(job_id__in=chunk)
        for job, key, value in rows.values_list("job_id", "key", "value"):
            found[job].append((key, value))
    return {job: tuple(sorted(pairs)) for job, pairs in found.items()}


def _rows(
    values: list[tuple[Any, ...]], *, content: bool = False, history: bool = False
) -> list[JobSnapshot]:
    sequences = [row[0] for row in values]
    tags = _tags_of(sequences)
    logs = transition_logs(sequences) if history else {}
    jobs = []
    for row in values:
        fields: dict[str, Any] = dict(zip(COLUMNS, row[: len(COLUMNS)], strict=True))
        fields["state"] = JobState(fields["state"])
        fields["mode"] = DependencyMode(fields["mode"])
        fields["limit_keys"] = stored_limit_keys(fields["limit_keys"])
        if content:
            fields.update(zip(CONTENT_COLUMNS, row[len(COLUMNS) :], strict=True), content_read=True)
        sequence = row[0]
        jobs.append(
            JobSnapshot(**fields, tags=tags.get(sequence, ()), transitions=tuple(logs.get(sequence, ())))
        )
    return jobs


def _columns(content: bool) -> tuple[str, ...]:
    return COLUMNS + CONTENT_COLUMNS if content else COLUMNS


def get_job(job_id: uuid.UUID, *, content: bool = False, history: bool = False) -> JobSnapshot | None:
    """The committed job with this id and its tags, or None (never enqueued, or purged); with its
    payload and output when ``content``, and its transition log when ``history``."""
    require_uuid("job_id", job_id)
    jobs = JobRecord.objects.using(jobs_database()).filter(job_id=job_id)
    found = _rows(list(jobs.values_list(*_columns(content))), content=content, history=history)
    return found[0] if found else None


def find_jobs(
    *,
    job_id: uuid.UUID | None = None,
    wire_name: str | None = None,
    queue: str | None = None,
    states: Iterable[JobState] | None = None,
    schedule_id: str | None = None,
    content: bool = False,
    history: bool = False,
) -> list[JobSnapshot]:
    """Every job matching all the filters given, oldest first, unpaged (for tests and small stores:
    the testing harness reads through it; operators page with :func:`list_jobs`). Its tags, and its
    content and transition log when asked, are read in bulk (a query per 500 jobs)."""
    jobs = JobRecord.objects.using(jobs_database()).all()
    if job_id is not None:
        require_uuid("job_id", job_id)
        jobs = jobs.filter(job_id=job_id)
    for name, wanted in (("wire_name", wire_name), ("queue", queue), ("schedule_id", schedule_id)):
        if wanted is not None:
            jobs = jobs.filter(**{name: wanted})
    if states is not None:
        jobs = jobs.filter(state__in=[JobState(state) for state in states])
    rows = list(jobs.order_by("sequence").values_list(*_columns(content)))
    return _rows(rows, content=content, history=history)


def job_sequences(job_ids: Iterable[uuid.UUID]) -> dict[uuid.UUID, int]:
    """The ``sequence`` (the row id the console's pages name a job by) of each of these jobs that
    still exists, in one unique-index read."""
    wanted = list(job_ids)
    for job_id in wanted:
        require_uuid("job_id", job_id)
    rows = JobRecord.objects.using(jobs_database()).filter(job_id__in=wanted)
    return dict(rows.values_list("job_id", "sequence"))


@dataclass(frozen=True)
class JobContent:
    """A job's sensitive content: the payload it was enqueued with and what its handler returned
    (None until it Succeeded). Shown only to those allowed to see it (docs/admin.md, docs/cli.md)."""

    payload: Any
    output: Any


def job_content(job_id: uuid.UUID) -> JobContent | None:
    """The payload and output of the job with this id, or None (one unique-index read)."""
    require_uuid("job_id", job_id)
    rows = JobRecord.objects.using(jobs_database()).filter(job_id=job_id)
    row = rows.values_list("payload", "output").first()
    return None if row is None else JobContent(*row)


def list_jobs(query: JobQuery | None = None) -> list[JobSnapshot]:
    """One page of the jobs ``query`` selects, in ``sequence`` order (oldest first by default).

    The next page: the same query with ``after_sequence`` set to the last row's ``sequence``.
    Rows inserted behind the cursor while paging are not seen; rows are never seen twice.
    """
    query = JobQuery() if query is None else query
    jobs = scoped_jobs(query)
    limit = min(query.max_results, MAX_PAGE)
    if limit <= 0:
        return []
    after = query.after_sequence
    if query.newest_first:
        jobs = jobs if after is None else jobs.filter(sequence__lt=after)
        jobs = jobs.order_by("-sequence")
    else:
        jobs = jobs if after is None else jobs.filter(sequence__gt=after)
        jobs = jobs.order_by("sequence")
    return _rows(list(jobs.values_list(*COLUMNS)[:limit]))


def count_in_state(state: JobState, *, up_to: int) -> int:
    """The jobs in ``state``, counted up to ``up_to`` (reading at most that many index entries; a
    caller shows ``up_to`` as "that many or more")."""
    require_count("up_to", up_to)
    jobs = JobRecord.objects.using(jobs_database()).filter(state=JobState(state))
    return jobs[:up_to].count()


def count_jobs() -> list[tuple[str, JobState, int]]:
    """``(queue, state, count)`` for every queue and state holding at least one job, by queue
    (in code-point order) then state. One ``GROUP BY`` over the job table."""
    rows = (
        JobRecord.objects.using(jobs_database())
        .order_by()
        .values_list(Ordinal("queue"), "state")
        .annotate(n=Count("*"))
    )
    return sorted((text(queue), JobState(state), n) for queue, state, n in rows)
