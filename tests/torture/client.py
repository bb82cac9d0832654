"""One torture client process: a seeded mix of enqueues and operator actions, journaled.

Run by the runner as ``python -m tests.torture.client '<json options>'`` with the torture
settings. Every operation appends one JSON line to the client's journal *after* it returns (or
fails). A database fault makes the outcome unknown: the line says ``"uncertain"`` and the
auditor allows for both possibilities. Any other exception is journaled as ``client_error``,
which the auditor reports.
"""

from __future__ import annotations

import json
import random
import sys
import time
import traceback
import uuid
from collections import deque
from datetime import timedelta
from pathlib import Path
from typing import Any, TextIO

#: The shared-id pool: every client draws from the same few ids per window, so first inserts race.
POOL_WINDOW_SECONDS = 2.0
POOL_SLOTS = 4
#: Pool enqueues wait for the next multiple of this (wall clock), so they really collide.
BARRIER_SECONDS = 0.25
#: Backpressure: while this many jobs wait (Scheduled or Awaiting Parent), clients stop enqueueing
#: and only act as operators, so a busy machine's backlog cannot outgrow the drain bound.
BACKLOG_LIMIT = 200
NAMESPACE = uuid.UUID("6f1c1f2e-9d3c-4c55-9a8e-7a0b1d2c3e4f")
QUEUES = ("torture-a", "torture-b", "torture-gov", "torture-p")
GOVERNED_QUEUE = "torture-gov"
PAUSABLE_QUEUE = "torture-p"
#: The share of single enqueues, and of batches, that are flow-controlled jobs (limited or
#: partitioned, tests/torture/jobs.py) unless the runner's --flow-share says otherwise, and the
#: queues they go to.
FLOW_SHARE = 0.3
FLOW_QUEUES = ("torture-a", "torture-b", PAUSABLE_QUEUE, GOVERNED_QUEUE)
FLOW_KINDS = ("keyed", "shared", "rated", "tenant")
#: Some jobs spin this long after their work, with a time limit of SPIN_TIMEOUT seconds: they time out.
SPIN_MS = 600
SPIN_TIMEOUT = 0.25


def pool_id(seed: int, window: int, slot: int) -> uuid.UUID:
    return uuid.uuid5(NAMESPACE, f"{seed}:{window}:{slot}")


class Client:
    def __init__(self, options: dict[str, Any], journal: TextIO) -> None:
        self.index = int(options["index"])
        self.seed = int(options["seed"])
        self.deadline = float(options["deadline"])  # set by main() from the start signal
        self.flow_share = float(options.get("flow_share", FLOW_SHARE))
        self.dice = random.Random(f"{self.seed}:client:{self.index}")
        self.journal = journal
        self.actor = f"torture-op-{self.index}"
        self.known: deque[uuid.UUID] = deque(maxlen=300)
        self.requeued: dict[uuid.UUID, int] = {}
        self.operations = 0
        self.backlogged = False
        self.backlog_checked = 0.0

    # --- Journal ---------------------------------------------------------------------------

    def log(self, **event: Any) -> None:
        event.setdefault("t", time.time())
        event["client"] = self.index
        self.journal.write(json.dumps(event, default=str) + "\n")
        self.journal.flush()

    def guarded(self, op: str, job: uuid.UUID | None, call: Any, **fields: Any) -> Any:
        """Run one store/API call; journal database faults as uncertain, anything else as an error."""
        from django.db import DatabaseError, InterfaceError, connection

        t0 = time.time()
        try:
            return call()
        except (DatabaseError, InterfaceError) as exc:
            self.log(op=op, job=str(job) if job else None, result="uncertain", error=str(exc)[:200], t0=t0, **fields)
            connection.close()
            time.sleep(0.1)
        except Exception as exc:
            self.log(
                op="client_error",
                job=str(job) if job else None,
                error=f"{op}: {type(exc).__name__}: {exc}",
                trace=traceback.format_exc()[-2000:],
            )
        return _FAILED

    # --- The loop --------------------------------------------------------------------------

    def run(self) -> None:
        while time.time() < self.deadline:
            roll = self.dice.random() * 100
            self.operations += 1
            if roll < 48 and self.backlog():
                roll = 48 + self.dice.random() * 52  # an operator action instead of an enqueue
            if roll < 40:
                self.enqueue_one()
            elif roll < 48:
                self.enqueue_batch()
            elif roll < 60:
                self.cancel()
            elif roll < 67:
                self.requeue()
            elif roll < 73:
                self.pause_or_resume()
            elif roll < 74:
                self.set_limit()
            elif roll < 85:
                self.stray_report()
            elif roll < 90:
                self.stray_heartbeat()
            else:
                self.operations -= 1
            time.sleep(self.dice.uniform(0.01, 0.06))
        self.log(op="client_done", operations=self.operations)

    def backlog(self) -> bool:
        """Whether the backlog is at its limit (checked at most once a second)."""
        from django.db import DatabaseError, connection

        from backwave_django.models import JobRecord

        if time.monotonic() - self.backlog_checked >= 1.0:
            self.backlog_checked = time.monotonic()
            try:
                waiting = JobRecord.objects.filter(state__in=[0, 1]).count()
            except DatabaseError:
                connection.close()
            else:
                self.backlogged = waiting >= BACKLOG_LIMIT
        return self.backlogged

    # --- Enqueue ---------------------------------------------------------------------------

    def _job_spec(self) -> dict[str, Any]:
        dice = self.dice
        return {
            "seed": self.seed,
            "ms": dice.randint(5, 150),
            "fail_p": dice.choice((0.0, 0.2, 0.35, 0.6)),
            "long_ms": 4000 if dice.random() < 0.02 else 0,
            "tag": dice.random() < 0.3,
            "snooze_p": dice.choice((0.0, 0.0, 0.0, 0.15)),
            "discard_p": dice.choice((0.0, 0.0, 0.0, 0.1)),
            "spin_ms": SPIN_MS if dice.random() < 0.06 else 0,
        }

    def enqueue_one(self) -> None:
        from django.utils import timezone

        from backwave_django import store
        from backwave_django.core.outcomes import NewJob
        from backwave_django.core.states import DependencyMode

        from .jobs import STRICT_WIRE, UNREGISTERED_WIRE, WIRE, work, work_async

        dice = self.dice
        pooled = dice.random() < 0.3
        if pooled:
            window = int(time.time() // POOL_WINDOW_SECONDS)
            job_id = pool_id(self.seed, window, dice.randrange(POOL_SLOTS))
            barrier = (time.time() // BARRIER_SECONDS + 1) * BARRIER_SECONDS
            time.sleep(max(barrier - time.time(), 0))
        else:
            job_id = uuid.uuid4()
        queue = dice.choice(QUEUES)
        tags: list[Any] = []
        if dice.random() < 0.5:
            tags = [dice.choice(("red", "green", "blue")), ("tenant", f"t{dice.randrange(5)}")]
            if dice.random() < 0.3:
                tags.append(tags[0])  # a repeated tag must be stored once
        parents: list[uuid.UUID] = []
        if self.known and dice.random() < 0.25:
            parents = dice.sample(list(self.known), k=min(len(self.known), dice.randint(1, 3)))
        mode = DependencyMode.ON_SUCCESS if dice.random() < 0.6 else DependencyMode.ON_ANY_TERMINAL
        run_after = timedelta(seconds=dice.random() * (0.5 if dice.random() < 0.7 else 2.5))
        fields: dict[str, Any] = {
            "wire": WIRE,
            "queue": queue,
            "parents": [str(p) for p in parents],
            "mode": int(mode),
            "pooled": pooled,
        }
        if dice.random() < 0.08:
            # Unroutable: an unregistered wire name, or a payload that no longer binds.
            unregistered = dice.random() < 0.5
            wire = UNREGISTERED_WIRE if unregistered else STRICT_WIRE
            payload = {"args": [], "kwargs": {"seed": 1}} if unregistered else {"args": [], "kwargs": {"gone": 1}}
            fields["wire"] = wire

            def call() -> Any:
                now = timezone.now()
                return store.enqueue(
                    NewJob(
                        job_id=job_id,
                        wire_name=wire,
                        payload=payload,
                        queue=queue,
                        due_time=now + run_after,
                        parents=tuple(parents),
                        mode=mode,
                        tags=tuple(tags),
                    ),
                    now=now,
                ).value
        else:
            definition: Any = work_async if dice.random() < 0.2 else work
            arguments: dict[str, Any] = {}
            options: dict[str, Any] = {}
            if dice.random() < self.flow_share:
                definition, arguments, options, keys, partition = self._flow_job(dice.choice(FLOW_KINDS))
                queue = fields["queue"] = dice.choice(FLOW_QUEUES)
                fields.update(limit_keys=keys, partition=partition)
            fields["wire"] = definition.wire_name
            spec = self._job_spec()

            # A job that spins past its work gets a time limit shorter than the spin: it times out.
            timeout = SPIN_TIMEOUT if spec["spin_ms"] else None

            def call() -> Any:
                receipt = definition.using(
                    queue=queue,
                    run_after=run_after,
                    parents=parents,
                    mode=mode,
                    tags=tags,
                    job_id=job_id,
                    timeout=timeout,
                    **options,
                ).enqueue(**arguments, **spec)
                return receipt.enqueue_result.value

        result = self.guarded("enqueue", job_id, call, **fields)
        if result is _FAILED:
            return
        self.log(op="enqueue", job=str(job_id), result=result, **fields)
        self.known.append(job_id)

    def enqueue_batch(self) -> None:
        from backwave_django import enqueue_many

        from .jobs import work

        # Some batches are all flow-controlled jobs of one kind: bursts a limit has to hold back.
        kind = self.dice.choice(FLOW_KINDS) if self.dice.random() < self.flow_share else None
        prepared: list[Any] = []
        expected: list[dict[str, Any]] = []
        for _ in range(self.dice.randint(2, 10)):
            if kind is None:
                prepared.append(work.using(queue=self.dice.choice(QUEUES), tags=["batch"]).prepare(**self._job_spec()))
                expected.append({"wire": work.wire_name})
                continue
            definition, arguments, options, keys, partition = self._flow_job(kind)
            queue = self.dice.choice(FLOW_QUEUES)
            prepared.append(
                definition.using(queue=queue, tags=["batch"], **options).prepare(**arguments, **self._job_spec())
            )
            expected.append({"wire": definition.wire_name, "limit_keys": keys, "partition": partition})
        receipts = self.guarded("enqueue_batch", None, lambda: enqueue_many(prepared))
        if receipts is _FAILED:
            for item, fields in zip(prepared, expected, strict=True):  # the batch may or may not have committed
                self.log(op="enqueue", job=str(item.job_id), result="uncertain", parents=[], mode=0, **fields)
            return
        for receipt, fields in zip(receipts, expected, strict=True):
            self.log(
                op="enqueue", job=str(receipt.job_id), result=receipt.enqueue_result.value, parents=[], mode=0, **fields
            )
            self.known.append(receipt.job_id)

    def _flow_job(self, kind: str) -> tuple[Any, dict[str, Any], dict[str, Any], list[list[str]], str | None]:
        """A flow-controlled job of ``kind``: its definition, its bucket or tenant argument, extra
        ``.using()`` options, and the buckets and partition it must be stored with."""
        from .jobs import (
            KEYED,
            KEYED_BUCKETS,
            RATED,
            RATED_BUCKETS,
            SHARED,
            TENANTS,
            keyed,
            rated,
            shared,
            tenant_work,
        )

        dice = self.dice
        if kind == "keyed":
            bucket = dice.choice(KEYED_BUCKETS)
            if dice.random() < 0.2:  # .using(limit_keys=...) names the bucket instead of the argument
                chosen = dice.choice(KEYED_BUCKETS)
                return keyed, {"bucket": bucket}, {"limit_keys": {KEYED.name: chosen}}, [[KEYED.name, chosen]], None
            return keyed, {"bucket": bucket}, {}, [[KEYED.name, bucket]], None
        if kind == "shared":
            return shared, {}, {}, [[SHARED.name, ""]], None
        if kind == "rated":
            bucket = dice.choice(RATED_BUCKETS)
            return rated, {"bucket": bucket}, {}, sorted([[RATED.name, bucket], [SHARED.name, ""]]), None
        tenant = dice.choice(TENANTS)
        if dice.random() < 0.2:  # .using(partition=...) wins over the argument
            return tenant_work, {"tenant": tenant}, {"partition": "t-chosen"}, [], "t-chosen"
        return tenant_work, {"tenant": tenant}, {}, [], tenant

    # --- Operator actions ------------------------------------------------------------------

    def cancel(self) -> None:
        from backwave_django import operator

        if not self.known:
            return
        job_id = self.dice.choice(list(self.known)[-60:])
        result = self.guarded("cancel", job_id, lambda: operator.cancel(job_id, actor=self.actor).value, actor=self.actor)
        if result is not _FAILED:
            self.log(op="cancel", job=str(job_id), actor=self.actor, result=result)

    def requeue(self) -> None:
        from backwave_django import operator
        from backwave_django.models import JobRecord

        def pick() -> list[uuid.UUID]:
            return list(
                JobRecord.objects.filter(state__in=[5, 6]).order_by("?").values_list("job_id", flat=True)[:3]
            )

        candidates = self.guarded("pick_requeue", None, pick)
        if candidates is _FAILED:
            return
        for job_id in candidates:
            if self.requeued.get(job_id, 0) >= 2:
                continue
            self.requeued[job_id] = self.requeued.get(job_id, 0) + 1
            result = self.guarded(
                "requeue", job_id, lambda j=job_id: operator.requeue(j, actor=self.actor).value, actor=self.actor
            )
            if result is not _FAILED:
                self.log(op="requeue", job=str(job_id), actor=self.actor, result=result)
            return

    def pause_or_resume(self) -> None:
        from backwave_django import operator

        pause = self.dice.random() < 0.5
        action = operator.pause_queue if pause else operator.resume_queue
        op = "pause" if pause else "resume"
        t0 = time.time()
        # create=True: the queue may hold no jobs yet when the first pause comes (docs/cli.md, "Queues").
        result = self.guarded(
            op, None, lambda: action(PAUSABLE_QUEUE, actor=self.actor, create=True), queue=PAUSABLE_QUEUE
        )
        if result is not _FAILED:
            self.log(op=op, queue=PAUSABLE_QUEUE, t0=t0, t1=time.time(), ok=True)

    def set_limit(self) -> None:
        from backwave_django import operator

        limit = self.dice.choice((1, 2, 3))
        t0 = time.time()
        result = self.guarded(
            "set_limit",
            None,
            lambda: operator.set_concurrency_limit(GOVERNED_QUEUE, limit, actor=self.actor, create=True),
        )
        # A failed call may have committed: journal it as a possible change (ok=False).
        self.log(op="limit", queue=GOVERNED_QUEUE, limit=limit, t0=t0, t1=time.time(), ok=result is not _FAILED)

    # --- Fence pressure --------------------------------------------------------------------

    def stray_report(self) -> None:
        from django.utils import timezone

        from backwave_django import store
        from backwave_django.core.outcomes import OutcomeReport, Success

        if not self.known:
            return
        job_id = self.dice.choice(list(self.known))
        report = OutcomeReport(
            job_id=job_id, worker_id=f"stray:{self.index}", attempt=self.dice.randint(1, 4), outcome=Success()
        )
        result = self.guarded("stray_report", job_id, lambda: store.report_outcome(report, now=timezone.now()).value)
        if result is not _FAILED:
            self.log(op="stray_report", job=str(job_id), result=result)

    def stray_heartbeat(self) -> None:
        from django.utils import timezone

        from backwave_django import store

        if not self.known:
            return
        job_id = self.dice.choice(list(self.known))

        def beat() -> bool:
            results = store.heartbeat(
                worker_id=f"stray:{self.index}", job_ids=[job_id], lease_duration=timedelta(seconds=3), now=timezone.now()
            )
            return results[0].renewed

        renewed = self.guarded("stray_heartbeat", job_id, beat)
        if renewed is not _FAILED:
            self.log(op="stray_heartbeat", job=str(job_id), renewed=renewed)


_FAILED = object()


def main(argv: list[str]) -> int:
    import django

    options = json.loads(argv[0])
    django.setup()
    with open(options["journal"], "a") as journal:
        # Tell the runner this client is up, then wait for the start signal that carries the
        # deadline, so slow process start-ups on a busy machine do not eat the workload.
        journal.write(json.dumps({"op": "client_ready", "client": options["index"], "t": time.time()}) + "\n")
        journal.flush()
        go = Path(options["go"])
        while not go.exists():
            time.sleep(0.05)
        options["deadline"] = float(go.read_text())
        client = Client(options, journal)
        try:
            client.run()
        except Exception:
            client.log(op="client_error", job=None, error="client crashed", trace=traceback.format_exc()[-2000:])
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
