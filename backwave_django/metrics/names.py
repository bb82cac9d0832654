"""Every metric backwave_django exports: name, type, labels and help text, in one place.

The collectors build their families from these entries, and the tests check that the docs, the
alert rules and the sample Grafana dashboard name only metrics listed here.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class MetricSpec:
    name: str
    kind: str  # "gauge", "counter" or "histogram"
    labels: tuple[str, ...]
    help: str


# --- From the periodic count (the view and every worker endpoint) ------------------------------

JOBS = MetricSpec(
    "backwave_jobs",
    "gauge",
    ("queue", "state"),
    "Jobs in a live state (scheduled, awaiting_parent, leased) per queue: an exact count.",
)
JOBS_ENDED = MetricSpec(
    "backwave_jobs_ended",
    "gauge",
    ("state",),
    "Retained jobs in an ended state (succeeded, cancelled, dead_lettered, quarantined): "
    "the query planner's estimate on PostgreSQL, an exact count elsewhere.",
)
QUEUE_OLDEST_DUE_AGE = MetricSpec(
    "backwave_queue_oldest_due_age_seconds",
    "gauge",
    ("queue",),
    "How long the oldest due, unclaimed (Scheduled) job of the queue has been due; 0 when none is.",
)
WORKERS_LIVE = MetricSpec(
    "backwave_workers_live",
    "gauge",
    (),
    "Worker processes whose heartbeat is fresh (the console's rule: seen within 5 heartbeat intervals).",
)
OBSERVER_POSITIONS_BEHIND = MetricSpec(
    "backwave_observer_positions_behind",
    "gauge",
    ("observer",),
    "Numbered transition-log entries after the observer's cursor (an upper bound on its backlog).",
)
OBSERVER_LAG = MetricSpec(
    "backwave_observer_lag_seconds",
    "gauge",
    ("observer",),
    "Age of the oldest transition-log entry the observer has not passed; 0 when it is caught up.",
)
DATABASE_HORIZON_AGE = MetricSpec(
    "backwave_database_horizon_age_seconds",
    "gauge",
    (),
    "PostgreSQL: how long the oldest transaction or snapshot holding back vacuum of the job "
    "tables has been open; 0 when none does, no sample when the oldest is a replication slot.",
)
DATABASE_HORIZON_AGE_TRANSACTIONS = MetricSpec(
    "backwave_database_horizon_age_transactions",
    "gauge",
    (),
    "PostgreSQL: how many transactions old the oldest horizon holder (session, prepared "
    "transaction or replication slot) of the jobs database is; 0 when none holds one.",
)
LIMIT_LEASED = MetricSpec(
    "backwave_limit_leased",
    "gauge",
    ("limit",),
    "Leased jobs under the flow-control limit (its concurrency slots in use, all buckets).",
)
LIMIT_HELD_BACK = MetricSpec(
    "backwave_limit_held_back",
    "gauge",
    ("limit",),
    "Due Scheduled jobs the flow-control limit holds back: their bucket of it is full (or the "
    "limit is declared by no worker).",
)
LIMIT_STARTED_PER_SECOND = MetricSpec(
    "backwave_limit_started_per_second",
    "gauge",
    ("limit",),
    "Claims under the flow-control limit in its current rate window, over the window's length "
    "(0 for a limit without a rate).",
)
COUNTS_READ_AT = MetricSpec(
    "backwave_counts_read_timestamp_seconds",
    "gauge",
    (),
    "When the counts above were read (Unix time); they are cached for METRICS_COUNT_INTERVAL.",
)

# --- From a worker process (backwave_worker --metrics-port) -------------------------------------

JOB_OUTCOMES = MetricSpec(
    "backwave_job_outcomes_total",
    "counter",
    ("wire_name", "queue", "result"),
    "Attempt outcomes written by this worker, by result: succeeded, retried, dead_lettered, "
    "snoozed, cancelled, quarantined, fenced (the lease was lost, the outcome was not applied).",
)
JOB_TIMEOUTS = MetricSpec(
    "backwave_job_timeouts_total",
    "counter",
    ("wire_name", "queue"),
    "Attempts stopped at their time limit (also counted as retried or dead_lettered).",
)
JOB_RUN = MetricSpec(
    "backwave_job_run_seconds",
    "histogram",
    ("wire_name",),
    "Handler run time: from the handler's start to its return (or to its timeout's abandonment).",
)
JOB_START_LATENCY = MetricSpec(
    "backwave_job_start_latency_seconds",
    "histogram",
    ("queue",),
    "From the attempt's due time (the enqueue instant for a job due at once, the retry instant "
    "for a retry) to its handler's start.",
)
WORKER_UP = MetricSpec("backwave_worker_up", "gauge", (), "1 while this worker process runs.")
WORKER_LAST_HEARTBEAT = MetricSpec(
    "backwave_worker_last_heartbeat_timestamp_seconds",
    "gauge",
    (),
    "When this worker last refreshed its worker row (Unix time); 0 before the first heartbeat.",
)
WORKER_RUNNING = MetricSpec(
    "backwave_worker_running_jobs", "gauge", (), "Jobs this worker holds a lease on and is running."
)
WORKER_SLOTS = MetricSpec(
    "backwave_worker_slots", "gauge", (), "This worker's execution slots (its concurrency)."
)

#: From the periodic count.
COUNT_METRICS = (JOBS, JOBS_ENDED, QUEUE_OLDEST_DUE_AGE, WORKERS_LIVE, OBSERVER_POSITIONS_BEHIND,
                 OBSERVER_LAG, DATABASE_HORIZON_AGE, DATABASE_HORIZON_AGE_TRANSACTIONS, LIMIT_LEASED,
                 LIMIT_HELD_BACK, LIMIT_STARTED_PER_SECOND, COUNTS_READ_AT)
#: From a worker process.
WORKER_METRICS = (JOB_OUTCOMES, JOB_TIMEOUTS, JOB_RUN, JOB_START_LATENCY, WORKER_UP,
                  WORKER_LAST_HEARTBEAT, WORKER_RUNNING, WORKER_SLOTS)
ALL_METRICS = COUNT_METRICS + WORKER_METRICS


def exposed_names() -> frozenset[str]:
    """Every sample name a scrape can show (a histogram's ``_bucket``, ``_sum`` and ``_count``,
    a counter's ``_total`` and ``_created``), for checking references in rules and dashboards."""
    names: set[str] = set()
    for spec in ALL_METRICS:
        if spec.kind == "histogram":
            names.update(f"{spec.name}{suffix}" for suffix in ("_bucket", "_sum", "_count", "_created"))
        elif spec.kind == "counter":
            names.update((spec.name, spec.name.removesuffix("_total") + "_created"))
        else:
            names.add(spec.name)
    return frozenset(names)
