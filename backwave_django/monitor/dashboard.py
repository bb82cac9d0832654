"""The dashboard's read models: counts, health, the throughput series and previews.

Every function here only reads, does a small fixed number of aggregate queries (never one per row
or per cell) and, where the answer depends on time, takes an explicit ``now``: the console passes
the real clock, tests pass a fixed instant. The results are plain frozen values, so templates stay
dumb and tests can assert on numbers rather than HTML.

Costs on a large table (see ``benchmarks/admin_scale.py``): the queue-by-state counts are one
``GROUP BY`` over the job table (a sequential scan; the only query here whose cost grows with the
retained rows); queue latency, the Executing-now preview and the running jobs per worker read the
Scheduled and Leased partial indexes (Leased rows are bounded by the workers' concurrency);
Needs-attention reads the terminal partial index; the throughput series, overall and per queue,
reads at most :data:`THROUGHPUT_SCAN_LIMIT` of the newest transition-log entries through the
primary key (per queue, each joined to its job through the job table's primary key).
"""

from __future__ import annotations

import uuid
from collections import defaultdict
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from django.db.models import BigIntegerField, Count, ExpressionWrapper, Min, Q, QuerySet, Subquery
from django.db.models.functions import TruncMinute

from ..conf import BackWaveSettings, get_settings
from ..core import planner
from ..core.liveness import stale_after
from ..core.states import HistoryPolicy, JobState
from ..core.validation import require_aware
from ..models import JobRecord, JobTransition, QueueSettings, RecurringSchedule, WorkerNode
from .jobs import count_jobs

#: States in lifecycle order: the columns of the queue-by-state table.
STATE_ORDER: tuple[JobState, ...] = tuple(JobState)
#: How many rows the previews (Executing now, Needs attention) show.
PREVIEW_ROWS = 5
#: Minutes in the throughput chart.
THROUGHPUT_MINUTES = 60
#: The throughput series reads at most this many of the newest transition-log entries. The log has
#: no index on ``recorded_at`` (one would tax every state change), so the newest entries are found
#: through the primary key instead; on a very busy system the oldest minutes of the hour are then
#: reported as not counted rather than paid for with a scan of the whole log.
THROUGHPUT_SCAN_LIMIT = 200_000


# --- Queue-by-state counts --------------------------------------------------------------------


@dataclass(frozen=True)
class QueueDepth:
    """One queue's job count in every state (``counts`` follows :data:`STATE_ORDER`)."""

    queue: str
    counts: tuple[int, ...]

    @property
    def total(self) -> int:
        return sum(self.counts)

    def count(self, state: JobState) -> int:
        return self.counts[STATE_ORDER.index(state)]


def queue_depths() -> list[QueueDepth]:
    """Jobs per queue and state, every state included (zeros too), queues sorted by name.

    One ``GROUP BY queue, state`` query (:func:`~.jobs.count_jobs`). Queues with no jobs do not
    appear here; the overview adds the queues that only have settings.
    """
    grouped: dict[str, list[int]] = defaultdict(lambda: [0] * len(STATE_ORDER))
    for queue, state, n in count_jobs():
        grouped[queue][STATE_ORDER.index(state)] = n
    return [QueueDepth(queue, tuple(counts)) for queue, counts in sorted(grouped.items())]


def state_totals(depths: list[QueueDepth]) -> tuple[int, ...]:
    """Column totals of the queue-by-state table, in :data:`STATE_ORDER`."""
    return tuple(sum(depth.counts[i] for depth in depths) for i in range(len(STATE_ORDER)))


# --- Health ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class QueueStatus:
    """A queue's settings and how busy it is: the Queues part of the health panel."""

    queue: str
    paused: bool
    concurrency_limit: int | None
    leased: int
    #: The queue has a stored settings row (which ``operator.remove_queue`` can remove).
    has_settings: bool = False

    @property
    def at_limit(self) -> bool:
        """Every slot taken (a limit of 0 blocks the queue, so it is always at its limit)."""
        return self.concurrency_limit is not None and self.leased >= self.concurrency_limit


def queue_statuses(depths: list[QueueDepth]) -> list[QueueStatus]:
    """Every queue that has jobs or stored settings, sorted by name (one query for the settings)."""
    leased = {depth.queue: depth.count(JobState.LEASED) for depth in depths}
    stored = {
        queue: (paused, limit)
        for queue, paused, limit in QueueSettings.objects.values_list("queue", "paused", "concurrency_limit")
    }
    return [
        QueueStatus(
            queue,
            *stored.get(queue, (False, None)),
            leased=leased.get(queue, 0),
            has_settings=queue in stored,
        )
        for queue in sorted(set(leased) | set(stored))
    ]


@dataclass(frozen=True)
class QueueLatency:
    """How long the oldest due-but-unclaimed job of a queue has been waiting."""

    queue: str
    oldest_due: datetime
    age: timedelta


def queue_latency(*, now: datetime) -> list[QueueLatency]:
    """Per queue with a Scheduled job due at or before ``now``: the age of the oldest one, worst first.

    One ``GROUP BY`` over the Scheduled partial index (``backwave_job_claim``), so terminal rows
    cost nothing. A paused queue keeps ageing; the console marks it.
    """
    require_aware("now", now)
    rows = (
        JobRecord.objects.filter(state=JobState.SCHEDULED, due_time__lte=now)
        .order_by()
        .values_list("queue")
        .annotate(oldest=Min("due_time"))
    )
    found = [QueueLatency(queue, oldest, now - oldest) for queue, oldest in rows]
    return sorted(found, key=lambda entry: (-entry.age, entry.queue))


@dataclass(frozen=True)
class ScheduleProblem:
    """A recurring schedule that needs a look: it no longer resolves, or it skipped ticks."""

    pk: int
    schedule_id: str
    error: str | None
    skipped_ticks: int
    last_skipped: str | None


@dataclass(frozen=True)
class ScheduleHealth:
    total: int
    problems: list[ScheduleProblem]

    @property
    def errored(self) -> int:
        return sum(1 for problem in self.problems if problem.error)

    @property
    def skipped_ticks(self) -> int:
        return sum(problem.skipped_ticks for problem in self.problems)


def schedule_health() -> ScheduleHealth:
    """Schedules whose cron or zone no longer resolves, and those with recorded skipped ticks.

    One query; the error is the planner's own message (the same one the schedules page shows).
    """
    rows = RecurringSchedule.objects.order_by("schedule_id").values_list(
        "pk", "schedule_id", "cron", "time_zone", "skipped_ticks"
    )
    total = 0
    problems = []
    for pk, schedule_id, cron, time_zone, skipped in rows:
        total += 1
        error = planner.schedule_error(cron, time_zone)
        ticks = list(skipped or [])
        if error or ticks:
            problems.append(ScheduleProblem(pk, schedule_id, error, len(ticks), ticks[-1] if ticks else None))
    return ScheduleHealth(total, problems)


def worker_stale_after(settings: BackWaveSettings | None = None) -> timedelta:
    """A worker row not refreshed for this long is stale: the worker's own pruning rule
    (``core.liveness.stale_after``), so console and worker agree."""
    return stale_after((settings or get_settings()).heartbeat_interval)


def is_worker_live(
    last_seen_at: datetime, *, now: datetime, settings: BackWaveSettings | None = None
) -> bool:
    """Whether a worker seen at ``last_seen_at`` still counts as running at ``now``."""
    return now - last_seen_at <= worker_stale_after(settings)


@dataclass(frozen=True)
class WorkerStatus:
    worker_id: str
    hostname: str
    queues: list[str]
    concurrency: int
    last_seen_at: datetime
    live: bool


def worker_ids() -> list[str]:
    """The id of every registered worker process, sorted."""
    return list(WorkerNode.objects.order_by("worker_id").values_list("worker_id", flat=True))


def worker_statuses(*, now: datetime) -> list[WorkerStatus]:
    """Every registered worker process, live ones first, each most recently seen first (one query)."""
    require_aware("now", now)
    stale_after = worker_stale_after()
    rows = WorkerNode.objects.order_by("-last_seen_at", "worker_id").values_list(
        "worker_id", "hostname", "queues", "concurrency", "last_seen_at"
    )
    workers = [
        WorkerStatus(
            worker_id, hostname, [str(q) for q in queues or []], concurrency, seen, now - seen <= stale_after
        )
        for worker_id, hostname, queues, concurrency, seen in rows
    ]
    return sorted(workers, key=lambda worker: not worker.live)


# --- Throughput ------------------------------------------------------------------------------


#: The series of the throughput chart, in drawing order.
SERIES = ("succeeded", "failed", "dead_lettered")
SERIES_LABELS = {"succeeded": "Succeeded", "failed": "Failed, retried", "dead_lettered": "Dead-Lettered"}


@dataclass(frozen=True)
class Throughput:
    """Per-minute counts over the last hour, oldest minute first.

    ``minutes`` are the UTC minute starts; ``series`` maps each name in :data:`SERIES` to one count
    per minute. Minutes before ``counted_from`` were not counted (the scan limit was reached):
    their counts are ``None``, never a made-up zero.
    """

    minutes: list[datetime]
    series: dict[str, list[int | None]]
    counted_from: datetime | None
    recording: bool

    @property
    def complete(self) -> bool:
        return self.counted_from is None

    @property
    def peak(self) -> int:
        return max((n for values in self.series.values() for n in values if n is not None), default=0)

    def total(self, name: str) -> int:
        return sum(n for n in self.series[name] if n is not None)


def _log_window(
    now: datetime, minutes: int, scan_limit: int
) -> tuple[list[datetime], QuerySet[JobTransition], datetime | None]:
    """The minute starts of the last ``minutes``, the log entries among the ``scan_limit`` newest ids
    that fall in them and count as throughput, and the first counted minute when the scan was cut
    short (None when the whole window was counted).

    Two queries, both bounded by the newest id (a primary-key probe): the newest entry left out of
    the scan, and the entries themselves (for the caller's ``GROUP BY``). Entries are assumed to be
    recorded roughly in id order (each is stamped with its transaction's ``now``).
    """
    require_aware("now", now)
    if minutes < 1 or scan_limit < 1:
        raise ValueError(f"minutes and scan_limit must be at least 1, got {minutes} and {scan_limit}")
    now = now.astimezone(UTC)
    last = now.replace(second=0, microsecond=0)
    starts = [last - timedelta(minutes=minutes - 1 - i) for i in range(minutes)]
    window_start = starts[0]

    # The scan covers the newest ``scan_limit`` ids: an index probe for the newest id bounds it.
    newest_id = JobTransition.objects.order_by("-id").values("id")[:1]
    bound = ExpressionWrapper(Subquery(newest_id) - (scan_limit - 1), output_field=BigIntegerField())
    entries = JobTransition.objects.filter(id__gte=bound, recorded_at__gte=window_start, recorded_at__lte=now)
    # The newest entry left out: if it falls inside the hour, minutes up to its own were cut short.
    left_out = (
        JobTransition.objects.filter(id__lt=bound)
        .order_by("-id")
        .values_list("recorded_at", flat=True)
        .first()
    )
    counted_from = None
    if left_out is not None and left_out >= window_start:
        counted_from = left_out.astimezone(UTC).replace(second=0, microsecond=0) + timedelta(minutes=1)
    counted = entries.filter(
        Q(state__in=[JobState.SUCCEEDED, JobState.DEAD_LETTERED]) | Q(state=JobState.SCHEDULED, attempt__gt=0)
    )
    return starts, counted, counted_from


#: Which series a counted log entry's state belongs to.
_SERIES_OF_STATE = {
    JobState.SUCCEEDED: "succeeded",
    JobState.SCHEDULED: "failed",
    JobState.DEAD_LETTERED: "dead_lettered",
}


def throughput(
    *, now: datetime, minutes: int = THROUGHPUT_MINUTES, scan_limit: int = THROUGHPUT_SCAN_LIMIT
) -> Throughput:
    """Succeeded, failed-and-retried and Dead-Lettered attempts per minute, from the transition log.

    What counts (each is one transition-log entry, stamped with the instant of the outcome):

    - **succeeded**: an entry into Succeeded;
    - **failed**: an entry into Scheduled with ``attempt > 0`` — a reported Failure with a retry
      left, or an expired lease with a retry left. Every other way into Scheduled (enqueue, a
      released dependency, a schedule tick, trigger-now, requeue) records attempt 0, because the
      job has not run yet or its attempt was just reset;
    - **dead_lettered**: an entry into Dead-Lettered (the final failure or lease expiry).

    Three queries, all bounded by the newest id (see :func:`_log_window`), the last a
    ``GROUP BY minute, state`` over the ``scan_limit`` newest ids.
    """
    starts, counted, counted_from = _log_window(now, minutes, scan_limit)
    recording = get_settings().history is not HistoryPolicy.OFF
    rows = (
        counted.annotate(minute=TruncMinute("recorded_at", tzinfo=UTC))
        .order_by()
        .values_list("minute", "state")
        .annotate(n=Count("*"))
    )
    counts: dict[tuple[datetime, str], int] = {}
    for minute, state, n in rows:
        key = (minute.astimezone(UTC), _SERIES_OF_STATE[JobState(state)])
        counts[key] = counts.get(key, 0) + n
    series: dict[str, list[int | None]] = {
        name: [
            None if counted_from is not None and start < counted_from else counts.get((start, name), 0)
            for start in starts
        ]
        for name in SERIES
    }
    return Throughput(starts, series, counted_from, recording)


@dataclass(frozen=True)
class QueueThroughput:
    """One queue's finished attempts over the window: succeeded, failed and retried, dead-lettered."""

    queue: str
    succeeded: int = 0
    failed: int = 0
    dead_lettered: int = 0

    @property
    def total(self) -> int:
        return self.succeeded + self.failed + self.dead_lettered


@dataclass(frozen=True)
class QueueThroughputs:
    """Throughput per queue over the last ``minutes`` (counted from ``counted_from`` when the scan
    limit cut the window short; nothing at all when the log is not recorded)."""

    minutes: int
    by_queue: dict[str, QueueThroughput]
    counted_from: datetime | None
    recording: bool

    def get(self, queue: str) -> QueueThroughput:
        return self.by_queue.get(queue) or QueueThroughput(queue)


def queue_throughput(
    *, now: datetime, minutes: int = THROUGHPUT_MINUTES, scan_limit: int = THROUGHPUT_SCAN_LIMIT
) -> QueueThroughputs:
    """Per queue, the attempts that finished in the last ``minutes``, counted as :func:`throughput`
    counts them: the same bounded scan of the log, each entry joined to its job for the queue
    (``GROUP BY queue, state``: three queries, none growing with the job table)."""
    _, counted, counted_from = _log_window(now, minutes, scan_limit)
    totals: dict[str, dict[str, int]] = defaultdict(lambda: dict.fromkeys(SERIES, 0))
    rows = counted.order_by().values_list("job__queue", "state").annotate(n=Count("*"))
    for queue, state, n in rows:
        totals[queue][_SERIES_OF_STATE[JobState(state)]] += n
    return QueueThroughputs(
        minutes,
        {queue: QueueThroughput(queue, **counts) for queue, counts in totals.items()},
        counted_from,
        get_settings().history is not HistoryPolicy.OFF,
    )


# --- Previews --------------------------------------------------------------------------------


@dataclass(frozen=True)
class ExecutingJob:
    sequence: int
    job_id: uuid.UUID
    wire_name: str
    queue: str
    attempt: int
    lease_owner: str | None
    lease_expiry: datetime | None
    cancel_requested: bool
    lease_left: timedelta | None


def executing(*, now: datetime, limit: int = PREVIEW_ROWS) -> list[ExecutingJob]:
    """Leased jobs, the lease that runs out first on top (one query on the Leased partial index)."""
    require_aware("now", now)
    rows = (
        JobRecord.objects.filter(state=JobState.LEASED)
        .order_by("lease_expiry", "sequence")
        .values_list(
            "sequence",
            "job_id",
            "wire_name",
            "queue",
            "attempt",
            "lease_owner",
            "lease_expiry",
            "cancel_requested",
        )[:limit]
    )
    return [ExecutingJob(*row, lease_left=None if row[6] is None else row[6] - now) for row in rows]


@dataclass(frozen=True)
class RunningJob:
    sequence: int
    job_id: uuid.UUID
    wire_name: str
    queue: str
    lease_expiry: datetime | None
    cancel_requested: bool


@dataclass(frozen=True)
class WorkerJobs:
    """What one worker is running: how many jobs, and the first ``limit`` (the lease ending first)."""

    count: int
    jobs: list[RunningJob]


def running_by_worker(*, limit: int = PREVIEW_ROWS) -> dict[str, WorkerJobs]:
    """The Leased jobs of every worker, by lease owner (the worker's id): one query on the Leased
    partial index, whose rows are bounded by the workers' combined concurrency."""
    found: dict[str, list[RunningJob]] = defaultdict(list)
    rows = (
        JobRecord.objects.filter(state=JobState.LEASED)
        .order_by("lease_owner", "lease_expiry", "sequence")
        .values_list(
            "lease_owner", "sequence", "job_id", "wire_name", "queue", "lease_expiry", "cancel_requested"
        )
    )
    for owner, sequence, job_id, wire_name, queue, expiry, cancel_requested in rows:
        found[owner or ""].append(RunningJob(sequence, job_id, wire_name, queue, expiry, cancel_requested))
    return {owner: WorkerJobs(len(jobs), jobs[:limit]) for owner, jobs in found.items()}


@dataclass(frozen=True)
class FailedJob:
    sequence: int
    job_id: uuid.UUID
    wire_name: str
    queue: str
    state: JobState
    attempt: int
    terminal_at: datetime | None
    terminal_cause: str | None


def needs_attention(*, limit: int = PREVIEW_ROWS) -> list[FailedJob]:
    """The newest Dead-Lettered and Quarantined jobs together, most recently ended first.

    One query per state, each a backward read of the terminal partial index
    (``state, terminal_at, sequence``), merged here.
    """
    found: list[FailedJob] = []
    for state in (JobState.DEAD_LETTERED, JobState.QUARANTINED):
        rows = (
            JobRecord.objects.filter(state=state)
            .order_by("-terminal_at", "-sequence")
            .values_list(
                "sequence", "job_id", "wire_name", "queue", "attempt", "terminal_at", "terminal_cause"
            )[:limit]
        )
        found.extend(
            FailedJob(seq, job_id, wire, queue, state, attempt, at, cause)
            for seq, job_id, wire, queue, attempt, at, cause in rows
        )
    epoch = datetime.min.replace(tzinfo=UTC)
    found.sort(key=lambda job: (job.terminal_at or epoch, job.sequence), reverse=True)
    return found[:limit]


# --- Everything the dashboard shows ----------------------------------------------------------


@dataclass(frozen=True)
class Overview:
    now: datetime
    depths: list[QueueDepth]
    totals: tuple[int, ...]
    queues: list[QueueStatus]
    latency: list[QueueLatency]
    schedules: ScheduleHealth
    workers: list[WorkerStatus]
    throughput: Throughput
    executing: list[ExecutingJob]
    needs_attention: list[FailedJob]

    @property
    def total_jobs(self) -> int:
        return sum(self.totals)

    @property
    def paused_queues(self) -> list[QueueStatus]:
        return [queue for queue in self.queues if queue.paused]

    @property
    def queues_at_limit(self) -> list[QueueStatus]:
        return [queue for queue in self.queues if queue.at_limit]

    @property
    def live_workers(self) -> list[WorkerStatus]:
        return [worker for worker in self.workers if worker.live]

    @property
    def stale_workers(self) -> list[WorkerStatus]:
        return [worker for worker in self.workers if not worker.live]

    def total(self, state: JobState) -> int:
        return self.totals[STATE_ORDER.index(state)]


def overview(*, now: datetime) -> Overview:
    """The whole dashboard in ten queries, whatever the number of jobs, queues or workers."""
    require_aware("now", now)
    depths = queue_depths()
    return Overview(
        now=now,
        depths=depths,
        totals=state_totals(depths),
        queues=queue_statuses(depths),
        latency=queue_latency(now=now),
        schedules=schedule_health(),
        workers=worker_statuses(now=now),
        throughput=throughput(now=now),
        executing=executing(now=now),
        needs_attention=needs_attention(),
    )
