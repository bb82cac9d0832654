"""The monitor: read-only queries over the job tables, for the console, for tests and for code.

Nothing here writes. Every function reads the jobs' database (``jobs_database()``), does a small
fixed number of queries (never one per row) and returns plain frozen values. docs/monitor.md
describes each read, its ordering and its cost at scale.

- :mod:`.jobs`: :class:`JobSnapshot` (the one read model of a job), :func:`get_job`,
  :func:`job_content`, :func:`list_jobs` (a :class:`JobQuery`, with the tag predicates
  :class:`HasLabel`, :class:`HasKey` and :class:`HasKeyValue`; keyset pages by ``sequence``),
  :func:`find_jobs` (unpaged, for tests) and :func:`count_jobs`;
- :mod:`.history`: :func:`job_history` (the transition log), :func:`transition_log` (the log as
  stored, with or without failure detail), :func:`transition_logs` (many jobs' logs in bulk) and
  :func:`dependency_edges`;
- :mod:`.attempts`: :func:`job_attempts` (one row per attempt, read off the transition log) and
  whether the lease sweep dead-lettered a job (:func:`with_lease_expiry` for a page of jobs,
  :func:`dead_lettered_by_lease_expiry` for one);
- :mod:`.queues`: :func:`is_queue_in_use` and :func:`queue_use` (does a declared job, a schedule, the
  settings or a stored job use a queue?) and :func:`similar_queues` (close matches of a typo);
- :mod:`.search`: :func:`search_jobs` (the search box's needles: ids, short ids, sequence numbers,
  arguments, error text), :func:`resolve_job` (what ``backwave show`` was given) and :func:`search_notes`;
- :mod:`.schedules`: :class:`ScheduleSnapshot` and :func:`list_schedules`, each schedule with its
  next tick and error;
- :mod:`.tags`: :func:`tag_facet` (jobs per value of a key) and :func:`suggest_tags` (prefix
  completion over labels, keys and values);
- :mod:`.counts`: :func:`read_counts`, the counts behind the metrics' gauges;
- :mod:`.workflows`: :func:`workflow_status`, :func:`workflow_graph`, :func:`list_workflows`,
  :func:`member_counts` and the console's workflow page (:func:`workflow_header`,
  :func:`workflow_members`);
- :mod:`.observers`: an observer's cursor, lag and dead letters, and :func:`transition_event`;
- :mod:`.dashboard`: the console dashboard's read models (queue depths, health, throughput,
  previews), importable from here as before.
"""

from __future__ import annotations

from .attempts import (
    LEASE_EXPIRED_ATTRIBUTE,
    Attempt,
    AttemptOutcome,
    attempts_from_log,
    dead_lettered_by_lease_expiry,
    job_attempts,
    lease_expired_condition,
    with_lease_expiry,
)
from .counts import Counts, ObserverPosition, read_counts
from .dashboard import (
    PREVIEW_ROWS,
    SERIES,
    SERIES_LABELS,
    STATE_ORDER,
    THROUGHPUT_MINUTES,
    THROUGHPUT_SCAN_LIMIT,
    ExecutingJob,
    FailedJob,
    Overview,
    QueueDepth,
    QueueLatency,
    QueueStatus,
    QueueThroughput,
    QueueThroughputs,
    RunningJob,
    ScheduleHealth,
    ScheduleProblem,
    Throughput,
    WorkerJobs,
    WorkerStatus,
    executing,
    is_worker_live,
    needs_attention,
    overview,
    queue_depths,
    queue_latency,
    queue_statuses,
    queue_throughput,
    running_by_worker,
    schedule_health,
    state_totals,
    throughput,
    worker_stale_after,
    worker_statuses,
)
from .history import HistoryEntry, dependency_edges, job_history, transition_log, transition_logs
from .jobs import (
    MAX_PAGE,
    HasKey,
    HasKeyValue,
    HasLabel,
    JobContent,
    JobQuery,
    JobSnapshot,
    MonitorJob,
    TagPredicate,
    count_jobs,
    find_jobs,
    get_job,
    job_content,
    job_sequences,
    list_jobs,
    with_tags,
)
from .observers import (
    observer_cursor,
    observer_dead_letter_count,
    observer_dead_letters,
    observer_lag,
    recent_dead_letters,
    transition_event,
)
from .queues import QueueUse, declared_queues, is_queue_in_use, queue_use, queues_in_use, similar_queues
from .schedules import ScheduleRow, ScheduleSnapshot, list_schedules
from .search import SCAN_LIMIT, Resolved, Search, resolve_job, search_jobs, search_notes
from .tags import MAX_SUGGESTIONS, facet_sample, suggest_tags, tag_facet
from .workflows import (
    WorkflowHeader,
    WorkflowMember,
    WorkflowMembers,
    list_workflows,
    member_counts,
    workflow_graph,
    workflow_header,
    workflow_members,
    workflow_status,
)

__all__ = [
    "LEASE_EXPIRED_ATTRIBUTE",
    "MAX_PAGE",
    "MAX_SUGGESTIONS",
    "PREVIEW_ROWS",
    "SCAN_LIMIT",
    "SERIES",
    "SERIES_LABELS",
    "STATE_ORDER",
    "THROUGHPUT_MINUTES",
    "THROUGHPUT_SCAN_LIMIT",
    "Attempt",
    "AttemptOutcome",
    "Counts",
    "ExecutingJob",
    "FailedJob",
    "HasKey",
    "HasKeyValue",
    "HasLabel",
    "HistoryEntry",
    "JobContent",
    "JobQuery",
    "JobSnapshot",
    "MonitorJob",
    "ObserverPosition",
    "Overview",
    "QueueDepth",
    "QueueLatency",
    "QueueStatus",
    "QueueThroughput",
    "QueueThroughputs",
    "QueueUse",
    "Resolved",
    "RunningJob",
    "ScheduleHealth",
    "ScheduleProblem",
    "ScheduleRow",
    "ScheduleSnapshot",
    "Search",
    "TagPredicate",
    "Throughput",
    "WorkerJobs",
    "WorkerStatus",
    "WorkflowHeader",
    "WorkflowMember",
    "WorkflowMembers",
    "attempts_from_log",
    "count_jobs",
    "dead_lettered_by_lease_expiry",
    "declared_queues",
    "dependency_edges",
    "executing",
    "facet_sample",
    "find_jobs",
    "get_job",
    "is_queue_in_use",
    "is_worker_live",
    "job_attempts",
    "job_content",
    "job_history",
    "job_sequences",
    "lease_expired_condition",
    "list_jobs",
    "list_schedules",
    "list_workflows",
    "member_counts",
    "needs_attention",
    "observer_cursor",
    "observer_dead_letter_count",
    "observer_dead_letters",
    "observer_lag",
    "overview",
    "queue_depths",
    "queue_latency",
    "queue_statuses",
    "queue_throughput",
    "queue_use",
    "queues_in_use",
    "read_counts",
    "recent_dead_letters",
    "resolve_job",
    "running_by_worker",
    "schedule_health",
    "search_jobs",
    "search_notes",
    "similar_queues",
    "state_totals",
    "suggest_tags",
    "tag_facet",
    "throughput",
    "transition_event",
    "transition_log",
    "transition_logs",
    "with_lease_expiry",
    "with_tags",
    "worker_stale_after",
    "worker_statuses",
    "workflow_graph",
    "workflow_header",
    "workflow_members",
    "workflow_status",
]
