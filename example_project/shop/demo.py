"""Demo data for the example project: hours of a shop's background work, then live work.

The history is played forward minute by minute on an explicit clock, through the same calls a
worker makes: jobs are prepared with the shop's ``@job`` definitions and stored with
``store.enqueue_many``; the exchange-rate schedule mints through ``store.mint_due``; simulated
workers ``claim`` jobs, route them with the registry (so an old payload is Quarantined with the
worker's exact cause) and report outcomes with ``store.report_outcomes``; an operator cancels,
requeues and pauses through the store. Every row and transition-log entry is therefore one the
real system could have written. Nothing here writes a job row itself.

The live part uses the public API on the real clock: a trickle of orders due over the next
minutes, a long job to cancel from the admin, yesterday's report, today's catalogue imports (a
workflow each, through ``backwave_django.workflow``) and old-signature jobs for the running worker
to quarantine. The history holds yesterday's catalogue imports, stored with
``store.enqueue_workflow`` on its clock; one supplier's images never resize, so that workflow
fails and its publishing is cancelled.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from backwave_django import (
    Cancelled,
    ClaimedJob,
    EnqueueResult,
    Failure,
    JobState,
    NewJob,
    OutcomeReport,
    ScheduleSpec,
    Success,
    Unroutable,
    WorkflowDefinition,
    WorkflowEnqueueResult,
    WorkflowError,
    enqueue_many,
    store,
)
from backwave_django.conf import get_settings
from backwave_django.core.ids import workflow_id_for_key
from backwave_django.models import JobRecord
from backwave_django.registry import NotRoutable, route
from backwave_django.worker import maintenance
from backwave_django.worker.execution import failure_detail
from django.db import transaction
from django.db.models import Count
from django.utils import timezone

from . import jobs
from .providers import ProviderUnavailable

#: How far back the simulated history starts by default (terminal jobs are kept 24 h), and its
#: step: the exchange-rate schedule's cadence.
HISTORY = timedelta(hours=2)
STEP = timedelta(minutes=1)
LEASE = timedelta(seconds=60)
#: The simulated workers claim every this many steps: fewer, fuller batches seed faster.
WORK_EVERY = 3
#: The queues the simulated workers serve (``maintenance`` is driven by hand, ``exports`` is paused).
SIMULATED_QUEUES = ("billing", "emails", "integrations", "reports", "catalogue")
SIMULATED_WORKERS = ("shop-worker-1:3141:5f2a9c01d7e3", "shop-worker-2:2718:c03e11b96a44")
CRASHED_WORKER = "shop-worker-3:1618:dead0bad4e21"
OPERATOR, SECOND_OPERATOR = "alice", "bob"
#: A job that keeps failing, however often it is retried.
ALWAYS = 1_000

#: Settings-declared schedule ids the history mints (the nightly report is registered at the end).
HISTORY_SCHEDULE = "exchange-rates"


@dataclass
class SeedReport:
    """What a seed did, for the command to print and the tests to check."""

    history_seeded: bool
    live_jobs: int
    counts: dict[JobState, int] = field(default_factory=dict)

    @property
    def total(self) -> int:
        return sum(self.counts.values())


def state_counts() -> dict[JobState, int]:
    """Jobs per state, every state present (zero when empty)."""
    counts = dict(JobRecord.objects.values_list("state").annotate(n=Count("pk")).values_list("state", "n"))
    return {state: counts.get(state, 0) for state in JobState}


def settings_schedule_spec(schedule_id: str) -> ScheduleSpec:
    """The ``ScheduleSpec`` of a schedule declared in ``settings.BACKWAVE["SCHEDULES"]``, as a
    worker builds it when it syncs them at start."""
    return maintenance.settings_schedule_spec(schedule_id, get_settings().schedules[schedule_id])


class HistorySimulation:
    """Plays ``history`` of shop activity forward to just before ``now``.

    ``orders`` is the number of orders placed over the period (two jobs each); the rest of the
    mix scales with it. ``seed`` makes the run reproducible.
    """

    def __init__(self, *, now: datetime, orders: int, history: timedelta = HISTORY, seed: int = 7) -> None:
        if not timedelta(minutes=10) <= history <= timedelta(hours=23):
            raise ValueError(f"history must be between 10 minutes and 23 hours, got {history}")
        self.now = now
        self.orders = orders
        self.rng = random.Random(seed)
        minute = now.replace(second=0, microsecond=0)
        self.start = minute - history
        self.steps = int(history / STEP)
        #: The steps at which the scripted moments happen, as fractions of the history.
        self.moments = {
            name: int(self.steps * fraction)
            for name, fraction in [
                ("legacy", 0.03),
                ("customers-cancel", 0.1),
                ("catalogue", 0.13),
                ("index-rebuilt", 0.17),
                ("exports-paused", 0.33),
                ("index-cancelled", 0.5),
                ("requeue", 0.83),
            ]
        }
        #: Failures left before a job succeeds (``ALWAYS``: it never does), decided at first claim.
        self.failures_left: dict[uuid.UUID, int] = {}
        self.order_number = 10_000

    # --- the timeline ---------------------------------------------------------------------------

    def run(self) -> None:
        store.upsert_schedule(
            settings_schedule_spec(HISTORY_SCHEDULE), now=self.start, declared_in_settings=True
        )
        orders_per_step = self._spread(self.orders, self.steps)
        welcome_per_step = self._spread(max(self.orders // 8, 1), self.steps)
        today = jobs.resolve_day("today", now=self.now)
        for step in range(self.steps):
            t = self.start + step * STEP + timedelta(seconds=1)
            store.mint_due(now=t)
            new: list[NewJob] = []
            for _ in range(orders_per_step[step]):
                new += self._order(t)
            for _ in range(welcome_per_step[step]):
                customer = self.rng.randint(1_000, 99_999)
                new += self._at(
                    t, [jobs.send_welcome_email.prepare(customer, self.rng.choice(["en", "de", "fr"]))]
                )
            if step == 0:
                # Backfill the last week's reports; one region's replica was down on one day.
                for days_ago in range(7, 1, -1):
                    day = (datetime.fromisoformat(today) - timedelta(days=days_ago)).date().isoformat()
                    report = jobs.prepare_sales_report(day)
                    if days_ago == 4:
                        self.failures_left[report[2].job_id] = ALWAYS
                    new += self._at(t, report)
            if step == self.moments["legacy"]:
                new += self._legacy_welcome_emails(t, 8)
            self._enqueue(new, t)
            self._operator_moments(step, t)
            if step % WORK_EVERY == WORK_EVERY - 1 or step == self.steps - 1:
                self._work(t + timedelta(seconds=1))

    @staticmethod
    def _spread(total: int, steps: int) -> list[int]:
        return [total * (i + 1) // steps - total * i // steps for i in range(steps)]

    def _at(self, t: datetime, prepared: Sequence[NewJob]) -> list[NewJob]:
        return [p.due_at(t) for p in prepared]

    def _enqueue(self, new: list[NewJob], t: datetime) -> None:
        if not new:
            return
        results = store.enqueue_many(new, now=t)
        refused = [(j.wire_name, r) for j, r in zip(new, results, strict=True) if r is not EnqueueResult.OK]
        if refused:
            raise RuntimeError(f"demo seed: the store refused {refused[:3]}")

    def _order(self, t: datetime, run_after: timedelta | None = None) -> list[NewJob]:
        self.order_number += 1
        amount = self.rng.choice([1_299, 2_450, 4_999, 8_900, 12_500, 34_000])
        return [
            p.due_at(t) for p in jobs.prepare_order(f"SO-{self.order_number}", amount, run_after=run_after)
        ]

    def _legacy_welcome_emails(self, t: datetime, count: int) -> list[NewJob]:
        """Jobs stored by version 1 of ``send-welcome-email`` (``user_id=``), before the rename."""
        definition = jobs.send_welcome_email
        return [
            NewJob(
                job_id=uuid.uuid4(),
                wire_name=definition.wire_name,
                payload={"args": [], "kwargs": {"user_id": self.rng.randint(1_000, 99_999)}},
                queue=definition.queue,
                due_time=t,
            )
            for _ in range(count)
        ]

    # --- operators ------------------------------------------------------------------------------

    def _operator_moments(self, step: int, t: datetime) -> None:
        if step == self.moments["customers-cancel"]:
            # Customers cancel orders before the charge runs (it was deferred by half an hour):
            # the charge is Cancelled by the operator, its confirmation by the cascade.
            held = [job for _ in range(4) for job in self._order(t, run_after=timedelta(minutes=30))]
            self._enqueue(held, t)
            for job in held[::2]:
                store.cancel_job(job.job_id, actor=OPERATOR, now=t + timedelta(seconds=20))
        if step == self.moments["catalogue"]:
            self._catalogue_imports(t)
        if step == self.moments["index-rebuilt"]:
            self._index_rebuild(t, cancel=False)
        if step == self.moments["exports-paused"]:
            store.pause_queue("exports", actor=OPERATOR, now=t)
            months = ["2026-08", "2026-09", "2026-10"]
            self._enqueue(self._at(t, [jobs.export_orders_csv.prepare(m) for m in months]), t)
        if step == self.moments["index-cancelled"]:
            self._index_rebuild(t, cancel=True)
        if step == self.moments["requeue"]:
            # The customer topped up the card: requeue two dead-lettered charges, which now pass.
            dead = JobRecord.objects.filter(
                wire_name="charge-order", state=JobState.DEAD_LETTERED
            ).values_list("job_id", flat=True)[:2]
            for job_id in dead:
                store.requeue(job_id, actor=SECOND_OPERATOR, now=t)
                self.failures_left[job_id] = 0

    def _catalogue_imports(self, t: datetime) -> None:
        """Yesterday's catalogue import of every supplier, a workflow each; the last supplier's
        image server refuses every resize, so its workflow fails and publishing is cancelled."""
        day = jobs.resolve_day("yesterday", now=self.now)
        for supplier in jobs.SUPPLIERS:
            prepared = jobs.prepare_catalogue_import(supplier, day)
            definition = WorkflowDefinition(
                workflow_id=workflow_id_for_key(jobs.catalogue_import_key(supplier, day)),
                name=jobs.catalogue_import_name(supplier, day),
                members=tuple(self._at(t, prepared)),
            )
            result = store.enqueue_workflow(definition, now=t)
            if result is not WorkflowEnqueueResult.OK:
                raise RuntimeError(f"demo seed: the store refused {supplier}'s catalogue import: {result}")
            if supplier == jobs.SUPPLIERS[-1]:
                self.failures_left[prepared[2].job_id] = ALWAYS

    def _index_rebuild(self, t: datetime, *, cancel: bool) -> None:
        """A long ``rebuild-search-index`` run; when ``cancel``, an operator stops it halfway."""
        new = self._at(t, [jobs.rebuild_search_index.prepare()])
        self._enqueue(new, t)
        [claimed] = store.claim(
            worker_id=SIMULATED_WORKERS[0], queues=["maintenance"], max_jobs=1, lease_duration=LEASE, now=t
        )
        if not cancel:
            report = OutcomeReport(
                job_id=claimed.job_id,
                worker_id=claimed.lease_owner,
                attempt=claimed.attempt,
                outcome=Success(),
                output={"batches": 240},
            )
            store.report_outcome(report, now=t + timedelta(seconds=50))
            return
        store.cancel_job(claimed.job_id, actor=OPERATOR, now=t + timedelta(seconds=20))
        report = OutcomeReport(
            job_id=claimed.job_id,
            worker_id=claimed.lease_owner,
            attempt=claimed.attempt,
            outcome=Cancelled(cause="operator-cancel"),
            added_tags=(("stopped-at-batch", "51"),),
        )
        store.report_outcome(report, now=t + timedelta(seconds=26))

    def crashed_worker(self, t: datetime) -> None:
        """At ``t`` (after the history), a worker claims a few charges and dies: their leases
        expire a minute later, and a live worker's expiry sweep retries them (``lease-expiry``)."""
        new = [job for _ in range(4) for job in self._order(t)]
        self._enqueue(new, t)
        store.claim(worker_id=CRASHED_WORKER, queues=["billing"], max_jobs=4, lease_duration=LEASE, now=t)

    # --- the simulated workers ------------------------------------------------------------------

    def _work(self, t: datetime) -> None:
        """Claim everything due, like two workers would, and report each outcome."""
        turn = 0
        while True:
            worker = SIMULATED_WORKERS[turn % 2]
            turn += 1
            claimed = store.claim(
                worker_id=worker, queues=list(SIMULATED_QUEUES), max_jobs=32, lease_duration=LEASE, now=t
            )
            if claimed:
                finished = t + timedelta(seconds=2)
                store.report_outcomes([self._run(job, finished) for job in claimed], now=finished)
            if len(claimed) < 32:
                return

    def _run(self, job: ClaimedJob, finished: datetime) -> OutcomeReport:
        """The outcome a real worker would report for this attempt."""
        report = _report_for(job)
        routed = route(job.wire_name, job.payload)
        if isinstance(routed, NotRoutable):
            return report(Unroutable(reason=routed.reason))
        left = self.failures_left.get(job.job_id)
        if left is None:
            left = self._failures_for(job.wire_name)
        if left > 0:
            permanent = left >= ALWAYS
            self.failures_left[job.job_id] = left if permanent else left - 1
            error = _simulated_error(job, permanent=permanent)
            retry = routed.definition.retry or get_settings().retry
            next_due = retry.next_attempt_at(job.attempt, finished)
            return report(
                Failure(next_due_time=next_due, error=str(error)), failure_detail=failure_detail(error)
            )
        self.failures_left[job.job_id] = 0
        simulate = _SIMULATED_OUTPUTS.get(job.wire_name)
        output = (
            simulate(self.rng, routed.args, routed.kwargs)
            if simulate
            else routed.definition.call(*routed.args, **routed.kwargs)
        )
        return report(Success(), output=output)

    def _failures_for(self, wire_name: str) -> int:
        draw = self.rng.random()
        if wire_name == "charge-order":
            return 0 if draw < 0.86 else 1 if draw < 0.92 else 2 if draw < 0.95 else ALWAYS
        if wire_name == "send-order-confirmation":
            return 0 if draw < 0.97 else 1
        if wire_name == "sync-exchange-rates":
            failures = 0
            while self.rng.random() < 0.3 and failures < 10:
                failures += 1
            return failures
        return 0


def _report_for(job: ClaimedJob) -> Callable[..., OutcomeReport]:
    def report(outcome: Any, **fields: Any) -> OutcomeReport:
        return OutcomeReport(
            job_id=job.job_id, worker_id=job.lease_owner, attempt=job.attempt, outcome=outcome, **fields
        )

    return report


def _simulated_error(job: ClaimedJob, *, permanent: bool) -> Exception:
    """The exception this job's handler would have raised, with a real traceback."""
    order = (job.payload.get("args") or ["?"])[0] if isinstance(job.payload, dict) else "?"
    errors: dict[str, Exception] = {
        "charge-order": jobs.PaymentDeclined(
            f"order {order}: card declined (insufficient funds)"
            if permanent
            else f"order {order}: payment gateway timed out after 15 s"
        ),
        "send-order-confirmation": OSError(f"SMTP 451 4.3.0 mailbox busy, try again later ({order})"),
        "sync-exchange-rates": ProviderUnavailable("rates.example.com did not answer for EUR within 10 s"),
        "regional-sales": ConnectionError(f"could not reach replica db-{order}-2: connection refused"),
        "resize-product-images": OSError(f"images.{order}.example: 403 Forbidden (credentials expired)"),
    }
    error = errors.get(job.wire_name, RuntimeError(f"{job.wire_name} failed"))
    try:
        raise error
    except Exception as exc:
        return exc


def _confirmation_output(rng: random.Random, args: list[Any], kwargs: dict[str, Any]) -> Any:
    return {"message_id": f"<{args[0]}@shop.example>"}


def _rates_output(rng: random.Random, args: list[Any], kwargs: dict[str, Any]) -> Any:
    return {"currency": kwargs.get("currency", "EUR"), "rate": round(0.85 + rng.random() * 0.3, 4)}


#: Handlers not run inline during the simulation (one sleeps, one calls the flaky provider).
_SIMULATED_OUTPUTS: dict[str, Callable[[random.Random, list[Any], dict[str, Any]], Any]] = {
    "send-order-confirmation": _confirmation_output,
    "sync-exchange-rates": _rates_output,
}


# --- live work, on the real clock ---------------------------------------------------------------


def enqueue_live_work(*, now: datetime, orders: int, seed: int = 11) -> int:
    """Work for the running worker, through the public API; returns how many jobs were stored."""
    rng = random.Random(seed)
    prepared: list[NewJob] = []
    for index in range(orders):
        run_after = timedelta(seconds=10 + (600 - 10) * index / max(orders - 1, 1))
        order_id = f"SO-LIVE-{now:%H%M%S}-{index:04d}"
        prepared += jobs.prepare_order(order_id, rng.choice([1_299, 4_999, 12_500]), run_after=run_after)
    prepared += jobs.prepare_sales_report(jobs.resolve_day("yesterday", now=now))
    prepared.append(jobs.rebuild_search_index.prepare())
    stored = _start_catalogue_imports(now)
    prepared += [jobs.send_welcome_email.prepare(rng.randint(1_000, 99_999)) for _ in range(5)]
    receipts = enqueue_many(prepared)
    stored += sum(1 for r in receipts if r.enqueue_result is EnqueueResult.OK)
    # Old-signature jobs cannot go through the public API any more (it checks the signature):
    # they are stored as version 1 did, for the worker to quarantine in front of you.
    definition = jobs.send_welcome_email
    legacy = [
        NewJob(
            job_id=uuid.uuid4(),
            wire_name=definition.wire_name,
            payload={"args": [], "kwargs": {"user_id": rng.randint(1_000, 99_999)}},
            queue=definition.queue,
            due_time=now,
        )
        for _ in range(3)
    ]
    stored += sum(1 for r in store.enqueue_many(legacy, now=now) if r is EnqueueResult.OK)
    store.upsert_schedule(settings_schedule_spec("nightly-sales-report"), now=now, declared_in_settings=True)
    return stored


def _start_catalogue_imports(now: datetime) -> int:
    """Today's catalogue imports, a minute apart, through the public API; returns the jobs stored.
    A supplier already imported today (a second seed) is skipped: its workflow id is taken."""
    stored = 0
    day = jobs.resolve_day("today", now=now)
    for index, supplier in enumerate(jobs.SUPPLIERS):
        try:
            jobs.start_catalogue_import(supplier, day, run_after=timedelta(minutes=index))
        except WorkflowError as error:
            if error.result is not WorkflowEnqueueResult.DUPLICATE_WORKFLOW:
                raise
        else:
            stored += 4
    return stored


def seed(
    *,
    orders: int,
    live_orders: int,
    history: timedelta = HISTORY,
    clock: Callable[[], datetime] = timezone.now,
) -> SeedReport:
    """Seed the history (unless jobs exist already) and the live work; see the module docstring.

    ``clock`` is read when the history starts and again after it (seeding takes seconds), so
    that the leases of the "crashed" worker expire a minute after the seed, not during it.
    """
    history_seeded = False
    if not JobRecord.objects.exists():
        with transaction.atomic():
            simulation = HistorySimulation(now=clock(), orders=orders, history=history)
            simulation.run()
            simulation.crashed_worker(clock())
        history_seeded = True
    live = enqueue_live_work(now=clock(), orders=live_orders)
    return SeedReport(history_seeded=history_seeded, live_jobs=live, counts=state_counts())
