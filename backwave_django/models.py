"""The tables. No behaviour lives here beyond display helpers: every write goes through ``store``.

The foreign keys to the job use ``DO_NOTHING``: the store deletes a job's tags and edges itself in
the same transaction (one statement per table), which is both faster than Django's collector and
keeps purge from ever tripping over a dangling edge. The transition log's relation is the
exception: it has no constraint in the database (see :class:`JobTransition`), so its ``CASCADE``
is what deletes a job's entries with it.
"""

from __future__ import annotations

from django.db import models
from django.db.models import Q

from .conf import WIRE_NAME_COLUMN_LENGTH
from .core.limits import MAX_BUCKET_LENGTH, PLAIN_LANE, LimitValues, in_force
from .core.states import CatchUp, DependencyMode, JobState, OperatorAction
from .core.tags import MAX_TAG_PART_LENGTH
from .core.validation import MAX_QUEUE_NAME_LENGTH

_TERMINAL = Q(state__in=[s.value for s in JobState if s.is_terminal])


class JobRecord(models.Model):
    """One job. ``sequence`` is the insertion order: the claim tiebreak and the paging cursor."""

    sequence = models.BigAutoField(primary_key=True)
    job_id = models.UUIDField(unique=True, editable=False)
    wire_name = models.CharField(max_length=WIRE_NAME_COLUMN_LENGTH)
    queue = models.CharField(max_length=MAX_QUEUE_NAME_LENGTH, default="default")
    payload = models.JSONField()
    state = models.PositiveSmallIntegerField(choices=JobState.choices, default=JobState.SCHEDULED)
    due_time = models.DateTimeField()
    attempt = models.PositiveIntegerField(default=0)
    lease_owner = models.CharField(max_length=255, null=True, blank=True)
    lease_expiry = models.DateTimeField(null=True, blank=True)
    cancel_requested = models.BooleanField(default=False)
    terminal_at = models.DateTimeField(null=True, blank=True)
    terminal_cause = models.TextField(null=True, blank=True)
    parents_remaining = models.PositiveIntegerField(default=0)
    mode = models.PositiveSmallIntegerField(choices=DependencyMode.choices, default=DependencyMode.ON_SUCCESS)
    output = models.JSONField(null=True, blank=True)
    schedule_id = models.CharField(max_length=WIRE_NAME_COLUMN_LENGTH, null=True, blank=True)
    enqueued_at = models.DateTimeField()
    #: Ordinal the next transition-log entry gets; keeps climbing when old entries age out.
    next_ordinal = models.PositiveIntegerField(default=0)
    #: The job's own retry ceiling, resolved at enqueue (null on rows older than the column: the
    #: settings' RETRY). Raised by one when an attempt is given back (a snooze, a graceful release).
    #: A plain integer column: a CHECK constraint would make adding it scan a large table.
    max_attempts = models.IntegerField(null=True, blank=True)
    #: The job's backoff in seconds (the last entry repeats); null: the settings' RETRY backoff.
    backoff = models.JSONField(null=True, blank=True)
    #: Seconds a handler may run before it is stopped; null: no limit.
    timeout = models.FloatField(null=True, blank=True)
    #: The last progress a handler recorded: ``{"done", "total", "note", "at"}``.
    progress = models.JSONField(null=True, blank=True)
    #: Claim order within a queue: higher first (-100…100). A database default, so rows inserted
    #: by an older release get 0 and adding the column rewrites nothing.
    priority = models.SmallIntegerField(default=0, db_default=0)
    #: The identity of a unique job (a digest of its wire name and chosen arguments), or null.
    unique_key = models.CharField(max_length=64, null=True, blank=True)
    #: The workflow this job is a member of, or null (see docs/workflows.md).
    workflow_id = models.UUIDField(null=True, blank=True)
    #: The W3C ``traceparent`` of the span that enqueued the job, stored verbatim, or null: enqueued
    #: outside a span, minted by a schedule, or without OpenTelemetry (see docs/tracing.md).
    trace_context = models.TextField(null=True, blank=True)
    #: Flow control (docs/flow-control.md): the job's partition (fair dispatch) or null, its
    #: buckets (``[[limit name, bucket], ...]``, sorted by name) or null, and its lane, which
    #: ``core.limits.lane_of`` works out from the two: 0 for a job with neither. Database defaults,
    #: so rows inserted by an older release are plain jobs and adding the columns rewrites nothing.
    partition = models.CharField(max_length=MAX_BUCKET_LENGTH, null=True, blank=True)
    limit_keys = models.JSONField(null=True, blank=True)
    lane = models.BigIntegerField(default=PLAIN_LANE, db_default=PLAIN_LANE)

    class Meta:
        verbose_name = "job"
        verbose_name_plural = "jobs"
        indexes = [
            # The claim index, keyed by lane for every Scheduled job. A plain queue's claim walks its
            # lane 0 prefix one priority at a time (highest first), by due time, then sequence; flow
            # control's claim steps from lane to lane (lanes above 0, one probe each) and reads a
            # lane's due jobs in claim order, so held jobs of other lanes are never stepped over.
            models.Index(
                fields=["queue", "lane", "-priority", "due_time", "sequence"],
                condition=Q(state=JobState.SCHEDULED),
                name="backwave_job_claim",
            ),
            models.Index(
                fields=["queue", "lease_expiry"],
                condition=Q(state=JobState.LEASED),
                name="backwave_job_leased",
            ),
            # Jobs waiting for their parents, per queue: what the metrics count (docs/operations.md,
            # "Metrics") without reading the retained terminal rows.
            models.Index(
                fields=["queue"],
                condition=Q(state=JobState.AWAITING_PARENT),
                name="backwave_job_awaiting",
            ),
            models.Index(
                fields=["state", "terminal_at", "sequence"],
                condition=_TERMINAL,
                name="backwave_job_purge",
            ),
            models.Index(
                fields=["schedule_id"],
                condition=Q(schedule_id__isnull=False),
                name="backwave_job_schedule",
            ),
            models.Index(
                fields=["workflow_id", "sequence"],
                condition=Q(workflow_id__isnull=False),
                name="backwave_job_workflow",
            ),
            # Unique jobs: the jobs that already hold a key, newest last.
            models.Index(
                fields=["unique_key", "enqueued_at"],
                condition=Q(unique_key__isnull=False),
                name="backwave_job_unique",
            ),
            # The console's failure tabs: newest first among Dead-Lettered or Quarantined jobs, a
            # small slice of a large table, so the tab pages without scanning the rest.
            models.Index(
                fields=["state", "-sequence"],
                condition=Q(state__in=[JobState.DEAD_LETTERED, JobState.QUARANTINED]),
                name="backwave_job_failures",
            ),
        ]
        permissions = [
            ("cancel_jobrecord", "Can cancel jobs"),
            ("requeue_jobrecord", "Can requeue jobs"),
            ("view_sensitive_jobrecord", "Can view job payload, output and failure detail"),
        ]

    def __str__(self) -> str:
        return f"{self.wire_name} {self.job_id}"

    @property
    def job_state(self) -> JobState:
        return JobState(self.state)


class JobTransition(models.Model):
    """The transition log: one entry per state change.

    ``position`` is the global delivery order that observers walk: null until the log sequencer
    numbers the entry, after its transaction committed, so that a later commit always gets a
    higher position (see docs/observers.md). Its indexes are created per database by migration
    0011 (not declared here).
    """

    id = models.BigAutoField(primary_key=True)
    # Indexed by the (job, ordinal) unique constraint. No constraint in the database (SQLite keeps
    # the one it had; migration 0016): the store writes an entry only in the statement that
    # inserts or updates its job row, taking the job's key from that statement's own rows, and a
    # deferred check per entry cost about a fifth of PostgreSQL's work per processed job
    # (docs/performance.md, "The transition log's foreign key"). Django's CASCADE deletes a job's
    # entries with it, in the purge as anywhere else.
    job = models.ForeignKey(
        JobRecord,
        on_delete=models.CASCADE,
        related_name="transitions",
        db_index=False,
        db_constraint=False,
    )
    ordinal = models.PositiveIntegerField()
    recorded_at = models.DateTimeField()
    state = models.PositiveSmallIntegerField(choices=JobState.choices)
    attempt = models.PositiveIntegerField()
    failure_detail = models.TextField(null=True, blank=True)
    actor = models.CharField(max_length=255)
    position = models.BigIntegerField(null=True, blank=True)

    class Meta:
        verbose_name = "transition"
        constraints = [
            models.UniqueConstraint(fields=["job", "ordinal"], name="backwave_transition_ordinal"),
        ]
        ordering = ["job", "ordinal"]

    def __str__(self) -> str:
        return f"#{self.ordinal} {JobState(self.state).label}"


class JobDependency(models.Model):
    """A still-gating edge parent → child; deleted as the parent resolves."""

    id = models.BigAutoField(primary_key=True)
    # Indexed by the (parent, child) unique constraint.
    parent = models.ForeignKey(
        JobRecord, on_delete=models.DO_NOTHING, related_name="child_edges", db_index=False
    )
    child = models.ForeignKey(JobRecord, on_delete=models.DO_NOTHING, related_name="parent_edges")

    class Meta:
        verbose_name = "dependency"
        verbose_name_plural = "dependencies"
        constraints = [
            models.UniqueConstraint(fields=["parent", "child"], name="backwave_dependency_edge"),
        ]

    def __str__(self) -> str:
        return f"{self.parent_id} -> {self.child_id}"


class JobTag(models.Model):
    """One tag of a job: a Label has ``key == ""``. A set per job."""

    id = models.BigAutoField(primary_key=True)
    # Indexed by the (job, key, value) unique constraint.
    job = models.ForeignKey(JobRecord, on_delete=models.DO_NOTHING, related_name="tags", db_index=False)
    key = models.CharField(max_length=MAX_TAG_PART_LENGTH, blank=True, default="")
    value = models.CharField(max_length=MAX_TAG_PART_LENGTH)

    class Meta:
        verbose_name = "tag"
        constraints = [
            models.UniqueConstraint(fields=["job", "key", "value"], name="backwave_tag_unique"),
        ]
        indexes = [models.Index(fields=["key", "value"], name="backwave_tag_key_value")]

    def __str__(self) -> str:
        return self.value if not self.key else f"{self.key}:{self.value}"


class Workflow(models.Model):
    """A named group of jobs enqueued together with their dependency graph (docs/workflows.md).

    Its status is not stored: it is a projection of its members' states.
    """

    workflow_id = models.UUIDField(unique=True)
    name = models.CharField(max_length=255, null=True, blank=True)
    created_at = models.DateTimeField()
    restarted_from = models.UUIDField(null=True, blank=True)

    class Meta:
        verbose_name = "workflow"
        ordering = ["created_at", "workflow_id"]
        indexes = [models.Index(fields=["created_at", "workflow_id"], name="backwave_workflow_created")]

    def __str__(self) -> str:
        return self.name or str(self.workflow_id)


class WorkflowEdge(models.Model):
    """An immutable structural edge of a workflow's graph (by job id): kept after the gating edge
    (``JobDependency``) is resolved, so the graph can still be drawn; deleted with the workflow."""

    id = models.BigAutoField(primary_key=True)
    workflow_id = models.UUIDField()
    parent_id = models.UUIDField()
    child_id = models.UUIDField()

    class Meta:
        verbose_name = "workflow edge"
        default_permissions = ()
        constraints = [
            models.UniqueConstraint(
                fields=["workflow_id", "parent_id", "child_id"], name="backwave_workflow_edge"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.parent_id} -> {self.child_id}"


class Observer(models.Model):
    """A transition observer's durable state: its cursor (the last log position it has passed),
    its lease, and the subscription it last claimed with (docs/observers.md)."""

    observer_id = models.CharField(max_length=255, unique=True)
    cursor = models.BigIntegerField(default=-1)
    lease_owner = models.CharField(max_length=255, null=True, blank=True)
    lease_expiry = models.DateTimeField(null=True, blank=True)
    #: The latest claim not reported yet: its last position and how many deliveries it holds.
    #: Attempts are written only when a claim is lost (claimed again, or left out of the report).
    claimed_through = models.BigIntegerField(null=True, blank=True)
    claimed_count = models.PositiveIntegerField(default=0)
    #: The subscription: state values (a JSON list), and an exact wire name and queue (null: any).
    states = models.JSONField(default=list)
    wire_name = models.CharField(max_length=WIRE_NAME_COLUMN_LENGTH, null=True, blank=True)
    queue = models.CharField(max_length=MAX_QUEUE_NAME_LENGTH, null=True, blank=True)

    class Meta:
        verbose_name = "observer"

    def __str__(self) -> str:
        return self.observer_id

    def matching_entries(self) -> Q:
        """The subscription as a filter on transition-log entries: the one rule a claim delivers by
        (``store/observers.py``) and the lag is read by (``monitor/observers.py``)."""
        match = Q(state__in=self.states)
        if self.wire_name is not None:
            match &= Q(job__wire_name=self.wire_name)
        if self.queue is not None:
            match &= Q(job__queue=self.queue)
        return match


class ObserverDelivery(models.Model):
    """A delivery of one log entry to one observer that needs remembering until the cursor
    passes it: one that failed (its attempts and when it is due again), one whose claim was lost,
    or one settled while an earlier entry is still pending."""

    PENDING, DELIVERED, DEAD_LETTERED = 0, 1, 2

    id = models.BigAutoField(primary_key=True)
    observer_id = models.CharField(max_length=255)
    position = models.BigIntegerField()
    delivery_attempt = models.PositiveIntegerField(default=0)
    resolution = models.PositiveSmallIntegerField(default=0)
    next_attempt_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name = "observer delivery"
        default_permissions = ()
        constraints = [
            models.UniqueConstraint(fields=["observer_id", "position"], name="backwave_delivery_position"),
        ]

    def __str__(self) -> str:
        return f"{self.observer_id} @{self.position}"


class ObserverDeadLetter(models.Model):
    """A delivery an observer gave up on: metadata only, no foreign key, so it outlives the job."""

    id = models.BigAutoField(primary_key=True)
    observer_id = models.CharField(max_length=255)
    position = models.BigIntegerField()
    job_id = models.UUIDField()
    ordinal = models.PositiveIntegerField()
    state = models.PositiveSmallIntegerField(choices=JobState.choices)
    attempt = models.PositiveIntegerField()
    delivery_attempts = models.PositiveIntegerField()
    dead_lettered_at = models.DateTimeField()

    class Meta:
        verbose_name = "observer dead letter"
        constraints = [
            models.UniqueConstraint(fields=["observer_id", "position"], name="backwave_dead_letter_position"),
        ]

    def __str__(self) -> str:
        return f"{self.observer_id} @{self.position}"


class LogSequencer(models.Model):
    """The transition-log sequencer's state: one row. ``last_position`` is the highest position
    handed out; ``horizon`` (PostgreSQL) the transaction horizon below which every entry is
    numbered. Locked while the sequencer runs, so one process numbers at a time."""

    last_position = models.BigIntegerField(default=-1)
    horizon = models.BigIntegerField(default=0)

    class Meta:
        verbose_name = "log sequencer"
        default_permissions = ()

    def __str__(self) -> str:
        return f"log sequencer at {self.last_position}"


class UniqueKeyLock(models.Model):
    """A row per unique-job key, locked while an enqueue of that key checks for an existing job.

    Used only where the database has no transaction-scoped advisory lock (MariaDB and MySQL);
    PostgreSQL takes an advisory lock instead, and SQLite serializes writers anyway.
    """

    key = models.CharField(max_length=64, unique=True)

    class Meta:
        verbose_name = "unique-key lock"
        default_permissions = ()

    def __str__(self) -> str:
        return self.key


class QueueSettings(models.Model):
    """Per-queue pause flag and concurrency limit. In-use slots are never stored: they are counted."""

    queue = models.CharField(max_length=MAX_QUEUE_NAME_LENGTH, unique=True)
    paused = models.BooleanField(default=False)
    concurrency_limit = models.PositiveIntegerField(null=True, blank=True)

    class Meta:
        verbose_name = "queue"
        verbose_name_plural = "queues"
        permissions = [("pause_queuesettings", "Can pause and resume queues and set their limits")]

    def __str__(self) -> str:
        return self.queue


class OperatorAudit(models.Model):
    """One row per operator action that acted; append-only."""

    id = models.BigAutoField(primary_key=True)
    actor = models.CharField(max_length=255)
    action = models.CharField(max_length=32, choices=OperatorAction.choices)
    target = models.CharField(max_length=255)
    recorded_at = models.DateTimeField()

    class Meta:
        verbose_name = "operator audit entry"
        verbose_name_plural = "operator audit"
        indexes = [models.Index(fields=["target", "id"], name="backwave_audit_target")]

    def __str__(self) -> str:
        return f"{self.actor} {self.action} {self.target}"


class WorkerNode(models.Model):
    """One running worker process, for the console; rows not seen for a while are pruned."""

    worker_id = models.CharField(max_length=255, unique=True)
    hostname = models.CharField(max_length=255)
    pid = models.PositiveIntegerField()
    queues = models.JSONField(default=list)
    concurrency = models.PositiveIntegerField()
    started_at = models.DateTimeField()
    last_seen_at = models.DateTimeField()

    class Meta:
        verbose_name = "worker"
        verbose_name_plural = "workers"

    def __str__(self) -> str:
        return self.worker_id


class RecurringSchedule(models.Model):
    """A cron schedule that mints jobs. ``cursor`` is the instant up to which ticks are resolved."""

    schedule_id = models.CharField(max_length=WIRE_NAME_COLUMN_LENGTH, unique=True)
    cron = models.CharField(max_length=255, help_text="Canonical 6-field form, seconds first.")
    wire_name = models.CharField(max_length=WIRE_NAME_COLUMN_LENGTH)
    payload = models.JSONField()
    queue = models.CharField(max_length=MAX_QUEUE_NAME_LENGTH, default="default")
    time_zone = models.CharField(
        max_length=64, null=True, blank=True, help_text="IANA name; empty means UTC."
    )
    catch_up = models.PositiveSmallIntegerField(choices=CatchUp.choices, default=CatchUp.SKIP)
    no_overlap = models.BooleanField(default=False)
    cursor = models.DateTimeField()
    #: ISO-8601 UTC strings of the most recent skipped ticks, oldest first.
    skipped_ticks = models.JSONField(default=list, blank=True)
    #: Declared in BACKWAVE["SCHEDULES"]: workers remove it once it is no longer declared there.
    declared_in_settings = models.BooleanField(default=False)
    #: The policy every minted instance is stored with (null: the settings' at each mint).
    max_attempts = models.IntegerField(null=True, blank=True)
    backoff = models.JSONField(null=True, blank=True)
    timeout = models.FloatField(null=True, blank=True)
    #: The flow control every minted instance is stored with (see :class:`JobRecord`).
    partition = models.CharField(max_length=MAX_BUCKET_LENGTH, null=True, blank=True)
    limit_keys = models.JSONField(null=True, blank=True)
    lane = models.BigIntegerField(default=PLAIN_LANE, db_default=PLAIN_LANE)

    class Meta:
        verbose_name = "recurring schedule"
        ordering = ["schedule_id"]
        permissions = [("trigger_recurringschedule", "Can trigger recurring schedules now")]

    def __str__(self) -> str:
        return self.schedule_id


class LimitSettings(models.Model):
    """One flow-control limit (docs/flow-control.md): the bounds its workers declare, and an
    operator's override of them, which wins while it is set. Usage is never stored here: it is
    counted from :class:`LimitLease` and :class:`LimitStart` in the claim's own transaction."""

    name = models.CharField(max_length=MAX_QUEUE_NAME_LENGTH, unique=True)
    #: As the job definitions declare it (written by each worker at start); null until declared.
    declared_concurrency = models.PositiveIntegerField(null=True, blank=True)
    declared_rate = models.PositiveIntegerField(null=True, blank=True)
    declared_period = models.FloatField(null=True, blank=True)
    declared_at = models.DateTimeField(null=True, blank=True)
    #: An operator's override (``operator.set_limit``), in force while ``overridden``.
    overridden = models.BooleanField(default=False)
    override_concurrency = models.PositiveIntegerField(null=True, blank=True)
    override_rate = models.PositiveIntegerField(null=True, blank=True)
    override_period = models.FloatField(null=True, blank=True)
    overridden_by = models.CharField(max_length=255, null=True, blank=True)
    overridden_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name = "limit"
        verbose_name_plural = "limits"
        permissions = [("change_limits", "Can override and clear flow-control limits")]

    def __str__(self) -> str:
        return self.name

    def declared_values(self) -> LimitValues | None:
        """The bounds the workers declared; None before any worker did."""
        if self.declared_at is None or self.declared_period is None:
            return None
        return LimitValues(self.declared_concurrency, self.declared_rate, self.declared_period)

    def override_values(self) -> LimitValues | None:
        """The operator's override; None while none is set."""
        if not self.overridden or self.override_period is None:
            return None
        return LimitValues(self.override_concurrency, self.override_rate, self.override_period)

    def values_in_force(self) -> LimitValues | None:
        """What a claim obeys (``core.limits.in_force``): the override, else the declaration."""
        return in_force(self.declared_values(), self.override_values())


class LimitBucket(models.Model):
    """A bucket of a limit that a claim has used: the row claims of the bucket lock in turn (on
    the databases without advisory locks), so that the counts they read are exact."""

    name = models.CharField(max_length=MAX_QUEUE_NAME_LENGTH)
    bucket = models.CharField(max_length=MAX_BUCKET_LENGTH)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["name", "bucket"], name="backwave_limit_bucket_unique")
        ]

    def __str__(self) -> str:
        return f"{self.name} {self.bucket!r}"


class LimitLease(models.Model):
    """A concurrency slot in use: one row per limit of a Leased job with a concurrency bound,
    written by the claim and deleted in the same transaction as the lease ends."""

    id = models.BigAutoField(primary_key=True)
    name = models.CharField(max_length=MAX_QUEUE_NAME_LENGTH)
    bucket = models.CharField(max_length=MAX_BUCKET_LENGTH)
    #: The Leased job's ``sequence`` (no constraint: the store deletes these rows itself).
    job = models.BigIntegerField()
    acquired_at = models.DateTimeField()

    class Meta:
        indexes = [
            models.Index(fields=["name", "bucket"], name="backwave_limit_lease_bucket"),
            models.Index(fields=["job"], name="backwave_limit_lease_job"),
        ]

    def __str__(self) -> str:
        return f"{self.name} {self.bucket!r} job {self.job}"


class LimitStart(models.Model):
    """A claim counted by a rate bound: one row per limit with a rate of each claimed job, kept
    while it is inside the longest window that can count it."""

    id = models.BigAutoField(primary_key=True)
    name = models.CharField(max_length=MAX_QUEUE_NAME_LENGTH)
    bucket = models.CharField(max_length=MAX_BUCKET_LENGTH)
    started_at = models.DateTimeField()

    class Meta:
        indexes = [models.Index(fields=["name", "bucket", "started_at"], name="backwave_limit_start_window")]

    def __str__(self) -> str:
        return f"{self.name} {self.bucket!r} at {self.started_at}"


class Dashboard(QueueSettings):
    """The console's Dashboard page (counts, health, throughput), listed in the admin's app index.

    A proxy with no table and no permissions of its own: the admin needs a model to hang a page on,
    and viewing it needs ``view_jobrecord``, like the jobs it summarises.
    """

    class Meta:
        proxy = True
        default_permissions = ()
        verbose_name = "Dashboard"
        verbose_name_plural = "Dashboard"
