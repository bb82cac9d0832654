"""The worker process's main loop: claim → run → report, with heartbeats and maintenance.

One thread (the pump) talks to the store; handlers run on the :class:`Executor`. The loop:

1. hand every finished attempt's outcome to the :class:`OutcomeWriter`, which writes them as one
   ``report_outcomes`` batch on its own thread (and connection) while the pump goes on claiming;
2. renew the leases of running jobs every ``HEARTBEAT_INTERVAL`` (delivering cancel requests,
   abandoning jobs whose lease was lost);
3. run maintenance every ``MAINTENANCE_INTERVAL`` (expire leases, purge by retention, prune
   stale worker rows);
4. claim as many jobs as there are free slots plus the prefetch (``BACKWAVE["PREFETCH"]``),
   through the dispatch policy: the jobs beyond the idle threads wait, leased and heartbeated,
   in the job threads' queue, so a thread that finishes starts the next job at once;
5. sleep until a job finishes, a hint arrives, or the next poll is due (an applied outcome re-polls at once).

Database faults are logged and retried with backoff (``faults``: a ``--burst`` worker gives up after
a minute of them); buffered outcomes are kept until written; the lease fence makes rewrites harmless.
"""

from __future__ import annotations

import functools
import logging
import os
import queue
import signal
import socket
import threading
import time
import uuid
from datetime import datetime
from types import FrameType
from typing import Any

from django.db import DatabaseError, InterfaceError, connections

from .. import clock, store
from ..conf import BackWaveSettings, get_settings
from ..context import JobContext
from ..core.claim_floors import ClaimFloors
from ..core.outcomes import ClaimedJob
from ..core.states import HistoryPolicy, OutcomeResult
from ..database import jobs_database, listen_database
from ..observers import definitions
from ..registry import declared_limits
from . import writer as outcome_writer
from .execution import Executor, Finished, Running
from .faults import EXIT_GAVE_UP, WorkerFaults, give_up_seconds
from .heartbeats import renew_leases
from .hints import HintListener
from .maintenance import apply_queue_settings, run_maintenance, sync_schedules
from .observing import ObserverPump
from .options import Prefetch, WorkerOptions, make_worker_id
from .pacing import ClaimPacing
from .writer import OutcomeWriter, WriteDone, announce_finished, concurrent_writers, log_outcome

logger = logging.getLogger("backwave_django.worker")

#: How many finished jobs per slot may wait for their outcome write without holding a slot: while
#: one batch is being written the next can run, and the one after can finish and wait, so a busy
#: worker's writes grow to two batches instead of its claims waiting for the writer.
UNWRITTEN_SLOTS_FACTOR = 2
#: Running jobs' progress is written at most this often (each job's latest value).
PROGRESS_INTERVAL_SECONDS = 1.0
#: The exit status of a worker that stopped because too many handlers were stuck past their
#: timeout: its process manager (or ``--processes``) starts a fresh one.
EXIT_RECYCLE = 3


class Worker:
    def __init__(self, options: WorkerOptions, settings: BackWaveSettings | None = None) -> None:
        self.options = options
        self.settings = settings or get_settings()
        self.worker_id = make_worker_id(options.name)
        self.using = jobs_database()
        self.queues = options.dispatch.queues
        self.running: dict[Any, Running] = {}
        #: Outcomes handed over by the job threads, and how many jobs are still executing.
        self.finished: list[Finished] = []
        self.finished_lock = threading.Lock()
        self.executing = 0
        self.outbox: list[Finished] = []
        self.outbox_since = 0.0
        #: The batch the outcome writer is writing now, and the writer's answers.
        self.writing: list[Finished] | None = None
        self.written: queue.SimpleQueue[WriteDone] = queue.SimpleQueue()
        self.write_not_before = 0.0
        self.writer: OutcomeWriter | None = None
        self.pacing = ClaimPacing.for_settings(self.settings)
        self.floors = ClaimFloors()  # where each queue's next claim starts reading
        self.wakeup = threading.Event()
        self.stopping = False
        self.recycling = False
        self.stop_deadline: float | None = None
        self.signals_received = 0
        self.started_jobs = 0
        self.completed_jobs = 0
        self.faults = WorkerFaults(self.worker_id, give_up_seconds(options.burst, options.give_up_after))
        self.next_heartbeat = 0.0
        self.next_maintenance = 0.0
        self.heartbeat_seconds = self.settings.heartbeat_interval.total_seconds()
        #: Leases held ready beyond the busy slots (see ``_free_slots``).
        self.prefetch = Prefetch(options, self.settings)
        self.executor = Executor(
            concurrency=options.concurrency,
            settings=self.settings,
            on_finished=self._on_finished,
            on_started=functools.partial(outcome_writer.announce_started, Worker),
        )
        self.metrics = options.metrics
        self.executor.timed = self.metrics is not None or self.prefetch.grows
        #: When this worker last refreshed its worker row (Unix time; None before the first time).
        self.heartbeat_at: float | None = None
        self.hints: HintListener | None = None
        self.observer_pump: ObserverPump | None = None
        #: Cancel requests heard on the hint connection (job ids), delivered by the pump.
        self.cancel_hints: queue.SimpleQueue[str] = queue.SimpleQueue()
        #: Set by a handler's ``set_progress``; the pump writes progress at most once a second.
        self.progress_pending = False
        self.next_progress = 0.0
        self.exit_code = 0

    # --- Lifecycle ----------------------------------------------------------------------------

    def install_signal_handlers(self) -> None:
        signal.signal(signal.SIGTERM, self._on_signal)
        signal.signal(signal.SIGINT, self._on_signal)

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        self.signals_received += 1
        self.recycling = False
        if self.signals_received > 1:
            logger.warning(
                "Second signal: worker %s exits now, leaving %d job(s) to lease expiry",
                self.worker_id,
                len(self.running),
            )
            os._exit(1)
        self.request_stop()

    def request_stop(self) -> None:
        if not self.stopping:
            self.stopping = True
            self.stop_deadline = time.monotonic() + self.options.shutdown_timeout
            # Held jobs not started go back at once (``_give_back_prefetched``), unless recycling.
            prefetched = self.executor.pending()
            fate = "will still run" if self.recycling else "go back to the queue, due again now"
            logger.info(
                "Worker %s stopping: no more claims; waiting up to %.0f s for %d running job(s)%s",
                self.worker_id,
                self.options.shutdown_timeout,
                len(self.running) - prefetched,
                f"; {prefetched} prefetched, not started, {fate}" if prefetched else "",
            )
        self.wakeup.set()

    def run(self) -> int:
        """Run until stopped (signal, ``--burst`` drained, ``--max-jobs`` reached). Returns the exit code."""
        # A worker started while the database is away (a restart, a failover) waits for it, with
        # the same backoff as a running one, instead of exiting.
        while self._guarded(self._register) is None:
            if self.stopping or self.faults.gave_up:
                return EXIT_GAVE_UP if self.faults.gave_up else 0
        self._start()
        # Registering stamped the worker row (a heartbeat) and nothing is leased: claim first.
        self.heartbeat_at, self.next_heartbeat = time.time(), time.monotonic() + self.heartbeat_seconds
        try:
            while True:
                self._drain_finished()
                self._collect_written()
                if self._flush_due():
                    self._flush_outcomes()
                self._deliver_cancel_hints()
                if self.stopping and not self.recycling and self.executor.pending():
                    self._give_back_prefetched()
                if self._too_many_stuck():
                    break
                now_mono = time.monotonic()
                if self.progress_pending and now_mono >= self.next_progress:
                    self._guarded(self._write_progress)
                    self.next_progress = now_mono + PROGRESS_INTERVAL_SECONDS
                if now_mono >= self.next_heartbeat:
                    self._guarded(self._heartbeat)
                    self.next_heartbeat = now_mono + self.heartbeat_seconds
                if now_mono >= self.next_maintenance and not self.stopping:
                    self._guarded(self._maintenance)
                    self.next_maintenance = now_mono + self.settings.maintenance_interval.total_seconds()
                claimed = None  # no claim sent this pass (``--burst`` exits only on one that found nothing)
                if not self.stopping and self._claim_due():
                    claimed = self._guarded(self._claim) or 0
                if self._should_exit(claimed):
                    break
                if claimed or self.finished or not self.written.empty():
                    continue
                self._sleep()
        finally:
            self._stop()
        return EXIT_GAVE_UP if self.faults.gave_up else self.exit_code

    def _register(self) -> bool:
        """Register this worker and apply the settings' queues and schedules (idempotent)."""
        store.register_worker(
            worker_id=self.worker_id,
            hostname=socket.gethostname(),
            pid=os.getpid(),
            queues=list(self.queues),
            concurrency=self.options.concurrency,
            now=clock.now(),
        )
        self._apply_queue_settings()
        self._sync_schedules()
        declared = declared_limits()
        store.declare_limits(declared, now=clock.now())
        # Only a rate holds a job until a moment: without one an empty claim asks nothing more.
        self.pacing.rates_declared = any(values.rate is not None for values in declared.values())
        return True

    def _start(self) -> None:
        if concurrent_writers(self.using):
            self.writer = OutcomeWriter(self.using, self.worker_id, self._on_written)
        observers = list(definitions().values())
        if observers and self.settings.history is not HistoryPolicy.OFF:
            self.observer_pump = ObserverPump(
                worker_id=self.worker_id, observers=observers, settings=self.settings
            )
            self.observer_pump.start()
        listen = listen_database()
        if HintListener.available(self.using) and HintListener.available(listen):
            self.hints = HintListener(
                using=listen, queues=self.queues, wake=self._hint, cancel=self._cancel_hint,
                floors=self.floors,
            )
            self.hints.start()
            self.pacing.listener = self.hints
        logger.info(
            "Worker %s started: queues %s, concurrency %d%s",
            self.worker_id,
            ",".join(self.queues),
            self.options.concurrency,
            " (burst)" if self.options.burst else "",
        )

    def _apply_queue_settings(self) -> None:
        apply_queue_settings(self.settings, now=clock.now())

    def _sync_schedules(self) -> None:
        removed = sync_schedules(self.settings, now=clock.now())
        if removed:
            logger.info("Removed schedules no longer declared in settings: %s", ", ".join(removed))

    def _should_exit(self, claimed: int | None) -> bool:
        idle = not self.running and not self.outbox and self.writing is None and not self.finished
        if self.faults.gave_up:  # its leases are left to expire (docs/worker.md#when-the-database-goes-away)
            return True
        if self.stopping:
            if idle:
                return True
            if self.stop_deadline is not None and time.monotonic() >= self.stop_deadline:
                self._release_running()
                return True
            return False
        if self.options.max_jobs is not None and self.started_jobs >= self.options.max_jobs:
            self.recycling = True  # the jobs handed over, prefetched ones too, still run
            self.request_stop()
            return idle
        return self.options.burst and claimed == 0 and idle and self.faults.calls.seconds == 0

    def _stop(self) -> None:
        if self.hints is not None:
            self.hints.stop()
        if self.observer_pump is not None:
            self.observer_pump.stop()
        self._drain_finished()
        if self.writer is not None:
            self._wait_for_writer()
            self.writer.stop()
            self.writer = None
        self._guarded(self._write_inline)
        try:
            store.unregister_worker(self.worker_id)
        except DatabaseError as exc:
            logger.warning("Could not remove worker row %s: %s", self.worker_id, exc)
        self.executor.shutdown()
        held = len(self.running)
        left = "left to lease expiry" if self.faults.gave_up else "given back (due again now)"
        logger.info(
            "Worker %s stopped after %d job(s)%s",
            self.worker_id,
            self.completed_jobs,
            f"; {held} still running were {left}" if held else "",
        )

    def _give_back_prefetched(self) -> None:
        """Stopping: give back prefetched jobs not started yet at once, as ``_release_running`` does."""
        waiting = self.executor.take_pending()
        if not waiting:
            return
        job_ids = [self.running.pop(r.claimed.job_id, r).claimed.job_id for r in waiting]
        self._withdrawn(len(waiting))
        released = self._guarded(
            lambda: store.release_leases(worker_id=self.worker_id, job_ids=job_ids, now=clock.now())
        )
        logger.info("Gave back %s prefetched lease(s) not started yet; they are due again now", released)

    def _release_running(self) -> None:
        """Give back the leases of the jobs still held: Scheduled again, due now, for any worker,
        without spending an attempt (``store.release_leases``); prefetched ones never start."""
        self.executor.take_pending()
        job_ids = [r.claimed.job_id for r in self.running.values()]
        released = self._guarded(
            lambda: store.release_leases(worker_id=self.worker_id, job_ids=job_ids, now=clock.now())
        )
        logger.warning(
            "Released %s lease(s) of job(s) still running; they are due again now, for any worker",
            released,
        )

    def _too_many_stuck(self) -> bool:
        """More handlers stuck past their timeout's grace than slots: give the others' leases back
        and stop with ``EXIT_RECYCLE``, so that a fresh process takes this one's place."""
        stuck = self.executor.abandoned_threads
        if stuck <= self.options.concurrency:
            return False
        logger.error(
            "Worker %s has %d handler thread(s) stuck past their timeout (concurrency %d); "
            "releasing its other jobs and exiting for a fresh process to take over",
            self.worker_id,
            stuck,
            self.options.concurrency,
        )
        self.stopping = True
        self.exit_code = EXIT_RECYCLE
        self._drain_finished()
        if self.running:
            self._release_running()
        return True

    # --- One pass -----------------------------------------------------------------------------

    def _guarded(self, call: Any) -> Any:
        """Run a store call; on a database fault log it, reconnect and back off instead of dying."""
        try:
            result = call()
        except (DatabaseError, InterfaceError) as exc:
            connections[self.using].close()
            wait = self.faults.failed(self.faults.calls, exc)
            if wait is not None:  # (None: the worker gives up, see ``faults``)
                self.wakeup.wait(wait)
                self.wakeup.clear()
            return None
        self.faults.calls.succeeded()
        return result

    # --- Batching ------------------------------------------------------------------------------
    #
    # Writing outcomes and claiming both cost a transaction, whatever the batch size, so the pump
    # batches them (like Nagle's algorithm): it flushes when nothing is left running, when three
    # quarters of a batch have finished, or when the oldest buffered outcome has waited
    # OUTCOME_LINGER; it claims when three quarters of a batch of slots are free, when nothing is
    # running, when a hint arrives, or after a linger (pacing.py). A lone job is never delayed,
    # unless a batch window (BATCH_WINDOW, pacing.py) asks for up to that much latency.

    @property
    def _batch(self) -> int:
        return max(1, min(self.options.concurrency, self.settings.max_claim_batch) * 3 // 4)

    def _flush_due(self) -> bool:
        if not self.outbox or self.writing is not None:
            return False
        if time.monotonic() < self.write_not_before:
            return False
        if (not self.running and not self.pacing.window) or self.stopping or len(self.outbox) >= self._batch:
            return True
        return time.monotonic() - self.outbox_since >= self.pacing.outcome_linger

    def _free_slots(self) -> int:
        """Leases a claim may add: slots plus prefetch, less the jobs held (running or prefetched).
        A finished job whose outcome is not written yet holds none, up to ``UNWRITTEN_SLOTS_FACTOR
        * (concurrency + prefetch)`` of them; beyond that each holds one (a stalled writer stops claims)."""
        concurrency = self.options.concurrency
        unwritten = len(self.outbox) + len(self.writing or ())
        prefetch = self.prefetch.limit
        held = len(self.running) + max(0, unwritten - UNWRITTEN_SLOTS_FACTOR * (concurrency + prefetch))
        return concurrency + prefetch - held

    @property
    def _claim_batch(self) -> int:
        """Free leases worth a claim: three quarters of the slots, or of the prefetch when smaller
        (so the next claim is under way while prefetched jobs still wait for a thread)."""
        concurrency = self.options.concurrency
        size = concurrency if self.prefetch.limit == 0 else min(concurrency, self.prefetch.limit)
        return max(1, min(size, self.settings.max_claim_batch) * 3 // 4)

    def _claim_due(self) -> bool:
        return self.pacing.due(
            free=self._free_slots(), batch=self._claim_batch, running=bool(self.running), now=time.monotonic()
        )

    def _hint(self) -> None:
        self.pacing.hinted = True
        self.wakeup.set()

    def _cancel_hint(self, job_id: str) -> None:
        """From the hint listener: an operator asked a job to stop (maybe one of ours)."""
        self.cancel_hints.put(job_id)
        self.wakeup.set()

    def _deliver_cancel_hints(self) -> None:
        while True:
            try:
                text = self.cancel_hints.get_nowait()
            except queue.Empty:
                return
            try:
                running = self.running.get(uuid.UUID(text))
            except ValueError:
                continue
            if running is not None and not running.context.cancel_requested:
                logger.info("Cancel requested for %s %s", running.claimed.wire_name, text)
                self.executor.cancel(running)

    def _on_progress(self) -> None:
        """From a handler's ``set_progress``: write it with the next progress round."""
        self.progress_pending = True

    def _write_progress(self) -> None:
        self.progress_pending = False
        updates = []
        for running in self.running.values():
            progress = running.context.take_unsaved_progress()
            if progress is not None:
                updates.append((running.claimed.job_id, running.claimed.attempt, progress))
        if updates:
            store.record_progress(worker_id=self.worker_id, progress=updates, now=clock.now())

    def _on_finished(self, finished: Finished) -> None:
        """From the job threads: queue the outcome, and wake the pump only when it has something
        to do: the first outcome (its linger starts), a batch's worth, or the last job running."""
        with self.finished_lock:
            self.finished.append(finished)
            self.executing -= 1
            count = len(self.finished)
            wake = count == 1 or count >= self._batch or self.executing <= 0
        if wake:
            self.wakeup.set()

    def _drain_finished(self) -> None:
        with self.finished_lock:
            if not self.finished:
                return
            drained, self.finished = self.finished, []
        for finished in drained:
            job_id = finished.running.claimed.job_id
            if self.running.get(job_id) is not finished.running:
                continue  # abandoned after its lease was lost: report nothing
            del self.running[job_id]
            self.prefetch.observe(finished.running)
            self.completed_jobs += 1
            if not self.outbox:
                self.outbox_since = time.monotonic()
            self.outbox.append(finished)
        self.prefetch.update()

    def _flush_outcomes(self) -> None:
        """Hand the outbox to the outcome writer (or, on SQLite, write it here)."""
        if self.writer is None:
            self._guarded(self._write_inline)
            return
        self.writing, self.outbox = self.outbox, []
        self.writer.submit(self.writing)

    def _write_inline(self) -> None:
        if not self.outbox:
            return
        batch = self.outbox
        reports = [finished.report(self.worker_id) for finished in batch]
        results = store.report_outcomes(reports, now=clock.now())
        self.outbox = []
        self._landed(batch, results)

    def _on_written(self, done: WriteDone) -> None:
        self.written.put(done)
        self.wakeup.set()

    def _collect_written(self) -> None:
        while True:
            try:
                done = self.written.get_nowait()
            except queue.Empty:
                return
            self._take_written(done)

    def _take_written(self, done: WriteDone) -> None:
        """The writer's answer: log the outcomes, or put a failed batch back at the front."""
        self.writing = None
        if done.error is None:
            assert done.results is not None
            self.faults.writes.succeeded()
            self._landed(done.batch, done.results)
            return
        if not isinstance(done.error, DatabaseError | InterfaceError):
            raise done.error  # a bug, not a fault: the same as a failed inline write
        wait = self.faults.failed(self.faults.writes, done.error, f" writing {len(done.batch)} outcome(s)")
        self.write_not_before = time.monotonic() + (wait or 0.0)
        if not self.outbox:
            self.outbox_since = time.monotonic()
        self.outbox = done.batch + self.outbox

    def _wait_for_writer(self) -> None:
        """At shutdown: let the batch in flight finish; what failed stays in the outbox."""
        while self.writing is not None:
            try:
                self._take_written(self.written.get())
            except Exception:
                logger.exception("Writing outcomes failed at shutdown")

    def _landed(self, batch: list[Finished], results: list[OutcomeResult]) -> None:
        """A batch of outcomes is written: log and announce them, and claim again unless the hints
        announce what it made claimable (``ClaimPacing.changed``)."""
        self.pacing.changed()
        for finished, result in zip(batch, results, strict=True):
            log_outcome(finished, result)
        announce_finished(Worker, batch, results)
        if self.metrics is not None:
            self.metrics.outcomes_written(batch, results)

    def _heartbeat(self) -> None:
        now = clock.now()
        store.touch_worker(self.worker_id, now=now)
        self.heartbeat_at = time.time()
        lease = self.settings.lease_duration
        renew_leases(self.worker_id, self.running, self.executor, lease, now, self._withdrawn)

    def _withdrawn(self, count: int = 1) -> None:  # prefetched jobs taken back before they started
        with self.finished_lock:
            self.executing -= count

    def _maintenance(self) -> None:
        if run_maintenance(self.settings, worker_id=self.worker_id, queues=self.queues, now=clock.now()):
            self.pacing.hinted = True  # minted jobs: claim them now, not at the next poll

    def _claim(self) -> int:
        self.pacing.sending(time.monotonic())
        free = self._free_slots()
        if self.options.max_jobs is not None:
            free = min(free, self.options.max_jobs - self.started_jobs)
        if free <= 0:
            return 0
        claimed_total = asked = 0
        for batch in self.options.dispatch.plan(free):
            now = clock.now()
            claimed = store.claim(
                worker_id=self.worker_id,
                queues=list(batch.queues),
                max_jobs=batch.max_jobs,
                lease_duration=self.settings.lease_duration,
                now=now,
                floors=self.floors,
            )
            self.options.dispatch.issued(batch)
            asked += min(batch.max_jobs, self.settings.max_claim_batch)
            with self.finished_lock:
                self.executing += len(claimed)
            self.executor.start_many([self._running(job, now) for job in claimed])
            claimed_total += len(claimed)
            if not claimed:
                break
        # Found nothing: if a rate limit holds due jobs back, claim again when its window slides.
        opens_at = None  # (read on both clocks at once: waking early would find it still held)
        held = not claimed_total and self.pacing.rates_declared
        if held and (opens := store.held_until(queues=self.queues, now=clock.now())) is not None:
            opens_at = time.monotonic() + (opens - clock.now()).total_seconds()
        self.pacing.answered(claimed_total, asked, opens_at)
        return claimed_total

    def _running(self, job: ClaimedJob, now: datetime) -> Running:
        context = JobContext(job_id=job.job_id, attempt=job.attempt, wire_name=job.wire_name, queue=job.queue)
        context.on_progress = self._on_progress
        running = Running(claimed=job, context=context, started=now)
        self.running[job.job_id] = running
        self.started_jobs += 1
        return running

    def _sleep(self) -> None:
        timeout = self.settings.poll_interval.total_seconds()
        now_mono = time.monotonic()
        timeout = min(timeout, max(self.next_heartbeat - now_mono, 0.0))
        if self.stop_deadline is not None:
            timeout = min(timeout, max(self.stop_deadline - now_mono, 0.0))
        if self.outbox and self.writing is None:  # (a busy writer wakes the pump when it is done)
            flush_at = max(self.outbox_since + self.pacing.outcome_linger, self.write_not_before)
            timeout = min(timeout, max(flush_at - now_mono, 0.0))
        if self._free_slots() > 0 and not self.stopping and (at := self.pacing.wake_at(bool(self.running))):
            timeout = min(timeout, max(at - now_mono, 0.0))
        if self.progress_pending:
            timeout = min(timeout, max(self.next_progress - now_mono, 0.0))
        self.wakeup.wait(timeout)
        self.wakeup.clear()
