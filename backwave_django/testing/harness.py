"""The virtual-time harness: run your jobs, their retries and your schedules inside a test.

The store never reads a clock (every operation takes ``now``), so a harness that owns ``now`` can
drive the real store, on the test database, through a week of schedules in milliseconds:

* while a harness is active, ``clock.now`` (which ``.enqueue()`` and ``operator`` read) is the
  harness's virtual clock;
* its pump claims due jobs one at a time as worker ``test-node`` and runs them on the calling
  thread with :func:`backwave_django.worker.execution.run_inline`, the worker's own routing and
  outcome rules, then reports each outcome through the fenced ``store.report_outcome``;
* moving the clock steps through every instant at which something happens (a job or a retry comes
  due, a schedule ticks, a lease expires), running maintenance and the due jobs at each one, so
  every tick is minted fresh, exactly as a worker that never slept would have minted it.

Handlers run synchronously, one at a time, in the order they come due. ``timezone.now()`` inside
your own code is not moved; only backwave's clock is.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Mapping, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, fields
from datetime import UTC, datetime, timedelta
from typing import Any

from django.db import DatabaseError, transaction

from .. import clock, monitor, store
from ..conf import BackWaveSettings, get_settings
from ..context import JobContext
from ..core.outcomes import ClaimedJob, ScheduleSpec, Snoozed, outcome_effect
from ..core.states import CatchUp, JobState, OutcomeResult
from ..core.validation import require_aware
from ..database import jobs_database
from ..registry import JobDefinition
from ..worker.execution import Finished, Running, run_inline, settle, timed_out
from ..worker.maintenance import apply_queue_settings, maintenance_tick, sync_schedules
from .assertions import JobAssertions, definition_of, listing
from .snapshots import JobSnapshot, ScheduleSnapshot, read_jobs, read_schedules

#: Where virtual time starts unless told otherwise: a fixed instant, so that a test sees the same
#: dates on every run, and midnight UTC on 1 January, months away from any daylight-saving change.
DEFAULT_START = datetime(2026, 1, 1, tzinfo=UTC)
#: The worker id the harness claims as; it appears as the actor of claims and outcomes.
WORKER_ID = "test-node"
#: Default bound on the jobs one call may run, so a job that re-enqueues itself cannot hang a test.
DEFAULT_MAX_JOBS = 10_000
#: At most this many pump passes at one instant (schedules resolve at most 32 ticks per pass).
MAX_PASSES_PER_INSTANT = 1_000

_NON_TERMINAL = [s for s in JobState if not s.is_terminal]


class HarnessLimitExceeded(RuntimeError):
    """A harness call hit its bound: too many jobs, or work still pending when ``drain`` gave up."""


@dataclass(frozen=True)
class RunSummary:
    """What a harness call did: attempts by outcome, and instances minted by schedules."""

    succeeded: int = 0
    #: Attempts that failed with a retry left (the job is Scheduled again, due after its backoff).
    retried: int = 0
    dead_lettered: int = 0
    cancelled: int = 0
    quarantined: int = 0
    #: Attempts that raised ``Snooze`` (Scheduled again, the attempt given back).
    snoozed: int = 0
    minted: int = 0

    @property
    def ran(self) -> int:
        """Attempts run (every outcome counted above except ``minted``)."""
        return (
            self.succeeded
            + self.retried
            + self.dead_lettered
            + self.cancelled
            + self.quarantined
            + self.snoozed
        )

    def __add__(self, other: RunSummary) -> RunSummary:
        return RunSummary(**{f.name: getattr(self, f.name) + getattr(other, f.name) for f in fields(self)})


#: The ``RunSummary`` field that counts an attempt ending in each state.
_SUMMARY_FIELD = {
    JobState.SUCCEEDED: "succeeded",
    JobState.SCHEDULED: "retried",
    JobState.DEAD_LETTERED: "dead_lettered",
    JobState.CANCELLED: "cancelled",
    JobState.QUARANTINED: "quarantined",
}

_active: BackWaveHarness | None = None


class _HarnessContext(JobContext):
    """A :class:`JobContext` whose every cancel check is a heartbeat at virtual ``now``.

    A worker delivers cancel requests with its periodic heartbeats; the harness has no periods, so
    it makes the round trip whenever the handler looks. From inside an ``async def`` handler the
    database cannot be reached synchronously, so there the last delivered flag is all it sees.
    """

    def __init__(self, harness: BackWaveHarness, claimed: ClaimedJob) -> None:
        super().__init__(
            job_id=claimed.job_id, attempt=claimed.attempt, wire_name=claimed.wire_name, queue=claimed.queue
        )
        self._harness = harness

    @property
    def cancel_requested(self) -> bool:
        self._deliver_cancel()
        return super().cancel_requested

    def raise_if_cancelled(self) -> None:
        self._deliver_cancel()
        super().raise_if_cancelled()

    def _deliver_cancel(self) -> None:
        if super().cancel_requested or _in_event_loop():
            return
        beats = store.heartbeat(
            worker_id=WORKER_ID,
            job_ids=[self.job_id],
            lease_duration=get_settings().lease_duration,
            now=self._harness.now,
        )
        if beats and beats[0].cancel_requested:
            self.request_cancel()


def _in_event_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


class BackWaveHarness(JobAssertions):
    """Virtual time and a synchronous pump over the real store, for testing your own jobs.

    Use it as a context manager (or through the ``backwave`` pytest fixture)::

        with BackWaveHarness(start=datetime(2026, 3, 1, tzinfo=UTC)) as bw:
            send_invoice.enqueue("o-1")
            bw.run_until_idle()
            bw.assert_enqueued(send_invoice, args=["o-1"], state=JobState.SUCCEEDED)

    ``queues`` limits the queues served (default: every queue). ``retention=True`` purges terminal
    jobs by the ``RETENTION`` settings as time passes; it is off by default so that assertions can
    see every job. ``max_jobs`` bounds the attempts one call may run.
    """

    def __init__(
        self,
        *,
        start: datetime = DEFAULT_START,
        queues: Sequence[str] | None = None,
        retention: bool = False,
        max_jobs: int = DEFAULT_MAX_JOBS,
    ) -> None:
        require_aware("start", start)
        if queues is not None and (isinstance(queues, str) or not all(isinstance(q, str) for q in queues)):
            raise TypeError(f"queues must be a list of queue names, got {queues!r}")
        if isinstance(max_jobs, bool) or not isinstance(max_jobs, int) or max_jobs < 1:
            raise ValueError(f"max_jobs must be a positive int, got {max_jobs!r}")
        self._now = start
        self._queues = None if queues is None else list(dict.fromkeys(queues))
        self._retention = retention
        self._max_jobs = max_jobs
        self._saved_clock: Callable[[], datetime] | None = None
        self._applied_settings: BackWaveSettings | None = None
        self._running: JobContext | None = None
        #: Attempts still to time out, by wire name (see :meth:`time_out`).
        self._timeouts: dict[str, int] = {}

    # --- Lifecycle ------------------------------------------------------------------------------

    def __enter__(self) -> BackWaveHarness:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def start(self) -> None:
        """Put application code on the virtual clock and apply the settings, as a worker start does."""
        global _active
        if _active is not None:
            raise RuntimeError(
                "Another BackWaveHarness is active; the clock it installs is process-wide, so use one "
                "harness at a time (stop the other first)."
            )
        _active = self
        self._saved_clock = clock.now
        clock.now = self._read_clock
        try:
            self._apply_settings()
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        """Give application code the real clock back."""
        global _active
        if _active is self:
            if self._saved_clock is not None:
                clock.now = self._saved_clock
            self._saved_clock = None
            _active = None

    def _read_clock(self) -> datetime:
        return self._now

    @property
    def now(self) -> datetime:
        """The virtual instant: what ``.enqueue()``, ``operator`` actions and the pump use as now."""
        return self._now

    # --- Moving time and running jobs -----------------------------------------------------------

    def run_until_idle(self, *, max_jobs: int | None = None) -> RunSummary:
        """Run maintenance and every job due at ``now`` (and what they make due), without moving time.

        Jobs enqueued by running jobs, released dependents and immediate retries run too; retries
        with a backoff wait for the clock. Raises ``HarnessLimitExceeded`` past ``max_jobs``.
        """
        self._require_idle_pump("run_until_idle")
        return self._pump_instant(self._budget(max_jobs))[0]

    def run_next(self) -> JobSnapshot | None:
        """Run the one job due first (after maintenance at ``now``); its snapshot, or None if none is due."""
        self._require_idle_pump("run_next")
        self._apply_settings()
        self._maintenance()
        ran = self._run_one()
        return None if ran is None else self.job(ran[0])

    def advance(self, delta: timedelta) -> RunSummary:
        """Move the clock forward by ``delta``, stopping at every instant where something happens.

        At each instant (a job or retry due, a schedule tick, a lease expiry) it runs maintenance and
        every due job, so schedule ticks are minted on time and retries run at their backoff instants.
        Finally the clock is set to exactly ``now + delta`` and pumped once more.
        """
        if not isinstance(delta, timedelta):
            raise TypeError(f"advance takes a timedelta, got {delta!r}")
        if delta < timedelta(0):
            raise ValueError(f"virtual time only moves forward; advance got {delta}")
        return self.advance_to(self._now + delta)

    def advance_to(self, instant: datetime) -> RunSummary:
        """Move the clock forward to ``instant`` (an aware datetime), as :meth:`advance` does."""
        self._require_idle_pump("advance_to")
        require_aware("instant", instant)
        if instant < self._now:
            raise ValueError(
                f"virtual time only moves forward: now is {self._now.isoformat()}, got {instant.isoformat()}"
            )
        budget = self._budget(None)
        summary, upcoming = self._pump_instant(budget)
        while upcoming is not None and upcoming <= instant:
            self._now = upcoming
            more, upcoming = self._pump_instant(budget - summary.ran)
            summary += more
        if self._now != instant:
            self._now = instant
            summary += self._pump_instant(budget - summary.ran)[0]
        return summary

    def drain(self, *, within: timedelta = timedelta(days=1), max_jobs: int | None = None) -> RunSummary:
        """Run until no job is pending, jumping the clock to each next due instant (retries, delays).

        Stops at the first instant where every job is terminal, so future schedule ticks do not
        keep it going. Raises ``HarnessLimitExceeded`` if work is still pending ``within`` from now
        (say, a paused queue, or a job delayed for longer) or past ``max_jobs``.
        """
        self._require_idle_pump("drain")
        if not isinstance(within, timedelta) or within < timedelta(0):
            raise ValueError(f"within must be a non-negative timedelta, got {within!r}")
        deadline = self._now + within
        budget = self._budget(max_jobs)
        summary, upcoming = self._pump_instant(budget)
        while monitor.has_pending_jobs(queues=self._queues):
            if upcoming is None or upcoming > deadline:
                pending = [j for j in read_jobs(states=_NON_TERMINAL) if self._serves(j.queue)]
                raise HarnessLimitExceeded(
                    f"drain gave up at {self._now.isoformat()}: {len(pending)} job(s) still pending and "
                    + (
                        "nothing will happen by itself (a paused or unserved queue, or a full one?)"
                        if upcoming is None
                        else f"the next activity is at {upcoming.isoformat()}, past {deadline.isoformat()}"
                    )
                    + f" (within={within}).\n"
                    + listing(pending)
                )
            self._now = upcoming
            more, upcoming = self._pump_instant(budget - summary.ran)
            summary += more
        return summary

    def next_activity(self) -> datetime | None:
        """The next instant after ``now`` at which something happens by itself, or None.

        That is the earliest of: a Scheduled job coming due (in a served queue), a lease expiring, a
        schedule's next tick. A schedule with ticks still unresolved at ``now`` counts as ``now``.
        """
        due = monitor.next_due_time(self._now, queues=self._queues)
        expiry = monitor.next_lease_expiry(self._now)
        candidates = [t for t in (due, expiry) if t is not None]
        # A poisoned schedule (its error set) never mints: it has no next tick.
        ticks = (schedule.next_due for schedule in monitor.list_schedules())
        candidates.extend(max(tick, self._now) for tick in ticks if tick is not None)
        later = [t for t in candidates if t >= self._now]
        return min(later) if later else None

    # --- Making attempts time out -------------------------------------------------------------

    def time_out(self, job: JobDefinition[Any, Any] | str, *, attempts: int = 1) -> None:
        """Make the next ``attempts`` attempts of ``job`` run past their time limit, without waiting.

        Each such attempt ends as a worker ends one whose handler is stopped at its ``timeout``:
        a failure whose detail starts ``backwave_django.JobTimeout: timed out after {seconds}s``,
        retried by the job's own policy (or dead-lettered at its ceiling). The handler is not run.
        The job must have a timeout (``@job(timeout=...)``, ``.using(timeout=...)`` or
        ``JOB_TIMEOUT``).
        """
        if isinstance(attempts, bool) or not isinstance(attempts, int) or attempts < 1:
            raise ValueError(f"attempts must be an int >= 1, got {attempts!r}")
        wire_name = definition_of(job).wire_name
        self._timeouts[wire_name] = self._timeouts.get(wire_name, 0) + attempts

    # --- Schedules ------------------------------------------------------------------------------

    def upsert_schedule(
        self,
        schedule_id: str,
        job: JobDefinition[Any, Any] | str,
        cron: str,
        *,
        args: Sequence[Any] = (),
        kwargs: Mapping[str, Any] | None = None,
        queue: str | None = None,
        time_zone: str | None = None,
        catch_up: CatchUp = CatchUp.SKIP,
        no_overlap: bool = False,
    ) -> ScheduleSnapshot:
        """Create or redefine a schedule at virtual ``now``: only ticks after it mint.

        This is ``store.upsert_schedule`` with the payload built from ``args`` and ``kwargs``, which
        are checked against the job's signature as an enqueue would check them.
        """
        definition = definition_of(job)
        payload = definition.encode(tuple(args), dict(kwargs or {}))
        policy = definition.policy
        store.upsert_schedule(
            ScheduleSpec(
                schedule_id=schedule_id,
                cron=cron,
                wire_name=definition.wire_name,
                payload=payload,
                queue=queue or definition.queue,
                time_zone=time_zone,
                catch_up=catch_up,
                no_overlap=no_overlap,
                max_attempts=policy.max_attempts,
                backoff=policy.backoff,
                timeout=policy.timeout,
                **definition.schedule_flow(payload),
            ),
            now=self._now,
        )
        return next(s for s in self.schedules() if s.schedule_id == schedule_id)

    def schedules(self) -> list[ScheduleSnapshot]:
        """Every recurring schedule (declared in settings or upserted), with its cursor and next tick."""
        return read_schedules()

    # --- The pump -------------------------------------------------------------------------------

    def _require_idle_pump(self, verb: str) -> None:
        if self._running is not None:
            raise RuntimeError(
                f"{verb}() was called from inside a running job ({self._running!r}); the harness runs "
                "jobs one at a time on the test's thread, so move time from the test, not from a handler."
            )
        if _in_event_loop():
            raise RuntimeError(
                f"{verb}() was called from a running event loop; the harness is synchronous (it uses "
                "the ORM and runs async handlers with asyncio.run), so call it from synchronous test code."
            )

    def _budget(self, max_jobs: int | None) -> int:
        if max_jobs is None:
            return self._max_jobs
        if isinstance(max_jobs, bool) or not isinstance(max_jobs, int) or max_jobs < 1:
            raise ValueError(f"max_jobs must be a positive int, got {max_jobs!r}")
        return max_jobs

    def _pump_instant(self, budget: int) -> tuple[RunSummary, datetime | None]:
        """Everything that happens at ``now``: settings, maintenance, then due jobs until none is due.

        Returns what it did and the next activity after ``now`` (see :meth:`next_activity`).
        """
        summary = RunSummary()
        for _ in range(MAX_PASSES_PER_INSTANT):
            self._apply_settings()
            summary += RunSummary(minted=self._maintenance())
            while (ran := self._run_one(budget - summary.ran)) is not None:
                summary += ran[1]
            upcoming = self.next_activity()
            if upcoming != self._now:
                return summary, upcoming
        raise HarnessLimitExceeded(
            f"still busy after {MAX_PASSES_PER_INSTANT} passes at {self._now.isoformat()}: a schedule "
            "keeps producing ticks at this instant"
        )

    def _run_one(self, budget: int | None = None) -> tuple[uuid.UUID, RunSummary] | None:
        """Claim the job due first (across the served queues) and run it; None when nothing is due.

        With ``budget`` (attempts this call may still run) at 0, a due job raises instead.
        """
        if budget is not None and budget <= 0:
            if not monitor.has_due_jobs(self._now, queues=self._queues):
                return None
            raise HarnessLimitExceeded(
                f"the job budget (max_jobs) ran out at {self._now.isoformat()} with jobs still due; a job "
                "may be re-enqueuing itself. Raise max_jobs if this much work is expected.\n"
                + listing(read_jobs(states=_NON_TERMINAL))
            )
        claimed = self._claim()
        if claimed is None:
            return None
        context = _HarnessContext(self, claimed)
        running = Running(claimed=claimed, context=context, started=self._now)
        finished = self._execute(running)
        result = store.report_outcome(finished.report(WORKER_ID), now=self._now)
        if result is not OutcomeResult.APPLIED:
            raise RuntimeError(
                f"the outcome of {claimed.wire_name} {claimed.job_id} (attempt {claimed.attempt}) was "
                "fenced off: its lease was lost while it ran, which virtual time never does by itself. "
                "Did the handler requeue or re-claim its own job?"
            )
        return claimed.job_id, _summarise(finished)

    def _claim(self) -> ClaimedJob | None:
        """Lease the due job with the earliest (due time, sequence), skipping paused or full queues."""
        blocked: list[str] = []
        while True:
            queue = monitor.first_due_queue(self._now, queues=self._queues, excluding=blocked)
            if queue is None:
                return None
            claimed = store.claim(
                worker_id=WORKER_ID,
                queues=[queue],
                max_jobs=1,
                lease_duration=get_settings().lease_duration,
                now=self._now,
            )
            if claimed:
                return claimed[0]
            blocked.append(queue)  # paused, or at its concurrency limit

    def _execute(self, running: Running) -> Finished:
        """Run one attempt with the worker's execution rules.

        Inside a test's transaction the attempt runs in a savepoint: a database error in the handler
        would otherwise leave the transaction unusable (Django refuses further queries, PostgreSQL
        every statement), including the outcome's write. A broken attempt's writes are rolled back.
        """
        claimed = running.claimed
        if self._timeouts.get(claimed.wire_name):
            self._timeouts[claimed.wire_name] -= 1
            if claimed.timeout is None:
                raise RuntimeError(
                    f"time_out({claimed.wire_name!r}) was asked for, but job {claimed.job_id} has no "
                    "timeout: give it one (@job(timeout=...), .using(timeout=...) or JOB_TIMEOUT)"
                )
            return settle(timed_out(running, None, settings=get_settings(), now=self._now))
        using = jobs_database()
        protect = not transaction.get_autocommit(using)  # inside a test's transaction
        finished: Finished | None = None
        self._running = running.context
        try:
            with transaction.atomic(using=using) if protect else nullcontext():
                finished = run_inline(running, settings=get_settings(), now=self._now)
        except DatabaseError:
            if finished is None:
                raise
            # Raised on leaving the block: the savepoint could not be released, so atomic rolled
            # back to it; the attempt's outcome (a failure naming the handler's error) stands.
        finally:
            self._running = None
        assert finished is not None
        return finished

    def _serves(self, queue: str) -> bool:
        return self._queues is None or queue in self._queues

    # --- What a worker does at start and on its maintenance tick, on the virtual clock ------------

    def _apply_settings(self) -> None:
        """Apply ``QUEUES`` limits and ``SCHEDULES`` whenever the settings (re)load, like a worker start.

        Settings changed mid-test (pytest-django's ``settings`` fixture) take effect at the next
        pump, as if the worker had been restarted with them.
        """
        settings = get_settings()
        if settings is self._applied_settings:
            return
        apply_queue_settings(settings, now=self._now)
        sync_schedules(settings, now=self._now)
        self._applied_settings = settings

    def _maintenance(self) -> int:
        """Expire leases, mint due schedule ticks and (if enabled) purge by retention; returns minted."""
        tick = maintenance_tick(
            get_settings(),
            queues=self._queues if self._queues is not None else monitor.leased_queues(),
            now=self._now,
            retention=self._retention,
            max_batches=None,
        )
        return tick.minted


# --- Helpers ----------------------------------------------------------------------------------------


def _summarise(finished: Finished) -> RunSummary:
    """Count one applied outcome under the state it led to."""
    if isinstance(finished.outcome, Snoozed):
        return RunSummary(snoozed=1)
    state = outcome_effect(finished.outcome).state
    return RunSummary(**{_SUMMARY_FIELD[state]: 1})
