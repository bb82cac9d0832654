"""The torture runner: set up a scratch database, run workers, clients and chaos, drain, audit.

Exit codes: 0 clean, 1 violations, 2 infrastructure (database unreachable, migrations failed,
workers that cannot start, a sabotage that cannot be applied).
"""

from __future__ import annotations

import contextlib
import itertools
import json
import logging
import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from .apps import CLOCK_SKEW_ENV, DUPLICATE_DELIVERY_ENV
from .audit import (
    AuditConfig,
    JobRow,
    ObserverEnd,
    Snapshot,
    Transition,
    Violation,
    audit,
    check_drained,
    check_stable,
)
from .client import GOVERNED_QUEUE, PAUSABLE_QUEUE, QUEUES
from .flow_audit import FlowLimit, check_flow, flow_figures
from .jobs import BACKOFF, EXEC_LOG_ENV, FLOW_LIMITS, MAX_ATTEMPTS, OBSERVERS, UNROUTABLE_WIRES
from .observer_audit import check_observers
from .pgserver import PrivateCluster, Server

logger = logging.getLogger("torture")
ROOT = Path(__file__).resolve().parents[2]
EXIT_CLEAN, EXIT_VIOLATIONS, EXIT_INFRA = 0, 1, 2
INITIAL_LIMIT = 2
LEASE_SECONDS = 3.0
#: Worker settings: fast clocks so leases expire and retries come back within seconds.
WORKER_SETTINGS: dict[str, Any] = {
    "LEASE_DURATION": LEASE_SECONDS,
    "HEARTBEAT_INTERVAL": 0.5,
    "POLL_INTERVAL": 0.25,
    "MAINTENANCE_INTERVAL": 0.5,
    "CONCURRENCY": 4,
    "RETRY": {"MAX_ATTEMPTS": MAX_ATTEMPTS, "BACKOFF": BACKOFF},
    "OBSERVER_RETRY": {"MAX_ATTEMPTS": 10, "BACKOFF": [0.05, 0.2]},
    "OBSERVER_TIMEOUT": 2.0,
}
#: The torture's flow-control limits as the audit holds the log to them (never overridden in a run).
LIMITS = {limit.name: FlowLimit(limit.concurrency, limit.rate, limit.period) for limit in FLOW_LIMITS}
#: However long jobs keep moving, the drain stops after this many drain bounds in all.
DRAIN_CAP_FACTOR = 4
#: A worker slot whose process dies on its own this many times is an infrastructure failure.
MAX_UNEXPECTED_EXITS = 8


class InfrastructureError(RuntimeError):
    pass


@dataclass
class RunConfig:
    mode: str
    seed: int
    duration: float
    workers: int
    clients: int
    artifacts: Path
    sabotage: str = ""
    drain_bound: float = 30.0
    chaos: bool = True
    restarts: str = "auto"  # auto | private | off
    restart_every: float = 300.0
    private_port: int = 5439
    database: str = ""
    keep_artifacts: bool = False
    duplicate_delivery: float = 0.1
    flow_share: float = 0.3
    clock_skew: float = 0.0
    #: The workers' ``BATCH_WINDOW`` in seconds (0: none).
    batch_window: float = 0.0


@dataclass
class Figures:
    jobs: int = 0
    transitions: int = 0
    operations: int = 0
    enqueues_accepted: int = 0
    duplicate_races: int = 0
    executions: int = 0
    worker_kills: int = 0
    worker_stops: int = 0
    backend_terminations: int = 0
    postgres_restarts: int = 0
    unexpected_worker_exits: int = 0
    violations: int = 0
    #: Attempts the handlers decided or overran: timeouts, discards, and snoozes plus releases.
    timeouts: int = 0
    discards: int = 0
    given_back: int = 0
    #: Observer calls that returned, and those that raised (each then retried).
    observer_deliveries: int = 0
    observer_failures: int = 0
    observer_dead_letters: int = 0
    final_states: dict[str, int] = field(default_factory=dict)
    #: Per flow limit (and the partitioned jobs): jobs, claims and the peak count in one bucket.
    flow: dict[str, dict[str, int]] = field(default_factory=dict)
    drain_seconds: float = 0.0
    observer_catch_up_seconds: float = 0.0
    wall_seconds: float = 0.0


class WorkerSlot:
    def __init__(self, runner: Runner, index: int) -> None:
        self.runner = runner
        self.index = index
        self.generation = 0
        self.process: subprocess.Popen[bytes] | None = None
        self.expected_exit = False
        self.stopped = False
        self.unexpected_exits = 0
        self.is_ready = False
        self.log_path = runner.dir / f"worker-{index}-0.log"

    def spawn(self) -> None:
        self.log_path = self.runner.dir / f"worker-{self.index}-{self.generation}.log"
        log = self.log_path.open("wb")
        self.generation += 1
        self.expected_exit = False
        self.stopped = False
        self.is_ready = False
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "django",
                "backwave_worker",
                "--queues",
                ",".join([GOVERNED_QUEUE, *[q for q in QUEUES if q != GOVERNED_QUEUE]]),
                "--name",
                f"tw{self.index}",
                "--shutdown-timeout",
                "5",
            ],
            env=self.runner.child_env(role="worker", slot=self.index),
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=ROOT,
        )
        log.close()

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def ready(self) -> bool:
        """Whether this worker has started serving (its log says so): chaos only hits those, so a
        busy machine where start-ups take long is not left without a single working worker."""
        if not self.is_ready and self.alive():
            self.is_ready = b"started: queues" in self.log_path.read_bytes()
        return self.is_ready and self.alive()

    def signal(self, signum: int) -> None:
        if self.alive():
            assert self.process is not None
            self.process.send_signal(signum)


class Runner:
    def __init__(self, config: RunConfig) -> None:
        self.config = config
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
        self.dir = config.artifacts / f"torture-{config.mode}-{config.seed}-{stamp}"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.database = config.database or f"bw_torture_{os.getpid()}"
        self.server = Server.from_env()
        self.cluster: PrivateCluster | None = None
        self.figures = Figures()
        self.events: list[dict[str, Any]] = []  # the runner's own journal (chaos, limits)
        self.events_lock = threading.Lock()
        self.slots: list[WorkerSlot] = []
        self.clients: list[subprocess.Popen[bytes]] = []
        self.stop_chaos = threading.Event()
        self.rng = random.Random(config.seed)
        self.notes: list[str] = []
        self.violations: list[Violation] = []
        self.started = time.monotonic()

    # --- Journal -------------------------------------------------------------------------------

    def record(self, **event: Any) -> None:
        event.setdefault("t", time.time())
        event["client"] = "runner"
        with self.events_lock:
            self.events.append(event)

    def note(self, message: str) -> None:
        logger.info("%s", message)
        self.notes.append(message)

    # --- Environment ---------------------------------------------------------------------------

    def child_env(self, *, role: str, slot: int | None = None) -> dict[str, str]:
        env = {
            **os.environ,
            **self.server.env(),
            "DJANGO_SETTINGS_MODULE": "tests.torture.settings",
            "PYTHONPATH": str(ROOT),
            "BACKWAVE_TEST_DB": "postgres",
            "BACKWAVE_DB_NAME": self.database,
            "BACKWAVE_TEST_SETTINGS": json.dumps({**WORKER_SETTINGS, "BATCH_WINDOW": self.config.batch_window}),
            EXEC_LOG_ENV: str(self.dir / "exec"),
        }
        env.pop("BACKWAVE_TORTURE_ROLE", None)
        env.pop("BACKWAVE_TORTURE_SABOTAGE", None)
        env.pop(CLOCK_SKEW_ENV, None)
        if role == "worker":
            env["BACKWAVE_TORTURE_ROLE"] = "worker"
            env[DUPLICATE_DELIVERY_ENV] = repr(self.config.duplicate_delivery)
            if self.config.sabotage:
                env["BACKWAVE_TORTURE_SABOTAGE"] = self.config.sabotage
            if slot == 0 and self.config.clock_skew:
                env[CLOCK_SKEW_ENV] = repr(-self.config.clock_skew)  # behind the others
        return env

    def _setup_database(self) -> None:
        config = self.config
        if config.mode == "long" and config.restarts in ("auto", "private"):
            cluster = PrivateCluster(config.private_port)
            try:
                cluster.start()
            except Exception as exc:
                cluster.stop()
                if config.restarts == "private":
                    raise InfrastructureError(f"could not start a private PostgreSQL: {exc}") from exc
                self.note(f"PostgreSQL restarts skipped: no private cluster could be started ({exc})")
            else:
                self.cluster = cluster
                self.server = cluster.server
                self.note(f"private PostgreSQL cluster on port {cluster.port} ({cluster.datadir}) for restarts")
        elif config.mode == "long":
            self.note("PostgreSQL restarts disabled (--restarts off)")
        if not self.server.wait_ready(timeout=15):
            raise InfrastructureError(f"PostgreSQL is not reachable at {self.server.host}:{self.server.port}")
        self.server.recreate_database(self.database)
        # Settings and the database name are read when Django sets up: only now.
        os.environ.update(self.child_env(role="runner"))
        import django
        from django.core.management import call_command

        django.setup()
        try:
            call_command("migrate", interactive=False, verbosity=0)
        except Exception as exc:
            raise InfrastructureError(f"migrate failed: {exc}") from exc
        logger.info("database %s ready (%.1f s)", self.database, time.monotonic() - self.started)

    # --- Chaos ---------------------------------------------------------------------------------

    def _chaos(self, deadline: float) -> None:
        conn: Any = None
        next_restart = time.monotonic() + self.config.restart_every
        short = self.config.mode == "short"
        while not self.stop_chaos.wait(self.rng.uniform(1.5, 4.0) if short else self.rng.uniform(2.0, 6.0)):
            if time.time() >= deadline:
                return
            if self.cluster is not None and time.monotonic() >= next_restart:
                immediate = self.cluster.restarts % 2 == 1
                self.record(op="chaos", action="restart_postgres", immediate=immediate)
                try:
                    downtime = self.cluster.restart(immediate=immediate)
                except Exception as exc:
                    self.note(f"PostgreSQL restart failed: {exc}")
                else:
                    self.figures.postgres_restarts += 1
                    logger.info("PostgreSQL restarted (%s) in %.1f s", "immediate" if immediate else "fast", downtime)
                conn = None
                next_restart = time.monotonic() + self.config.restart_every
                continue
            roll = self.rng.random()
            live = [s for s in self.slots if s.ready() and not s.stopped]
            if len(live) < 2 or len(live) < len(self.slots) // 2:
                live = []  # keep some workers serving: only connections are cut this round
            if roll < 0.3 and live:
                slot = self.rng.choice(live)
                slot.expected_exit = True
                slot.signal(signal.SIGKILL)
                self.figures.worker_kills += 1
                self.record(op="chaos", action="kill", worker=slot.index)
            elif roll < 0.55 and live:
                slot = self.rng.choice(live)
                pause = self.rng.uniform(LEASE_SECONDS + 0.5, LEASE_SECONDS + 3.0)
                slot.stopped = True
                slot.signal(signal.SIGSTOP)
                self.figures.worker_stops += 1
                self.record(op="chaos", action="sigstop", worker=slot.index, seconds=round(pause, 2))
                threading.Timer(pause, self._resume, args=(slot,)).start()
            else:
                try:
                    if conn is None:
                        conn = self.server.connect()
                    pids = [
                        r[0]
                        for r in conn.execute(
                            "SELECT pid FROM pg_stat_activity WHERE datname = %s AND backend_type = 'client backend'",
                            [self.database],
                        ).fetchall()
                    ]
                    victims = self.rng.sample(pids, k=min(len(pids), self.rng.randint(1, 3)))
                    for pid in victims:
                        conn.execute("SELECT pg_terminate_backend(%s)", [pid])
                    self.figures.backend_terminations += len(victims)
                    self.record(op="chaos", action="terminate_backends", count=len(victims))
                except Exception as exc:
                    logger.info("chaos: could not terminate backends (%s)", exc)
                    conn = None
        if conn is not None:
            conn.close()

    def _resume(self, slot: WorkerSlot) -> None:
        slot.signal(signal.SIGCONT)
        slot.stopped = False

    def _watch_workers(self) -> None:
        """Respawn workers that died; count the deaths chaos did not cause."""
        for slot in self.slots:
            if slot.alive():
                continue
            assert slot.process is not None
            if not slot.expected_exit:
                slot.unexpected_exits += 1
                self.figures.unexpected_worker_exits += 1
                self.note(f"worker slot {slot.index} exited on its own (code {slot.process.returncode}); respawned")
                if slot.unexpected_exits >= MAX_UNEXPECTED_EXITS:
                    raise InfrastructureError(
                        f"worker slot {slot.index} keeps exiting; see {self.dir}/worker-{slot.index}-*.log"
                    )
            slot.spawn()

    # --- Phases --------------------------------------------------------------------------------

    def run(self) -> int:
        started = self.started = time.monotonic()
        try:
            self._setup_database()
            code = self._run_workload()
        except InfrastructureError as exc:
            logger.error("infrastructure: %s", exc)
            self.note(f"infrastructure: {exc}")
            code = EXIT_INFRA
        except KeyboardInterrupt:
            self.note("interrupted: nothing was audited")
            code = EXIT_INFRA
        finally:
            self._stop_processes()
        self.figures.wall_seconds = round(time.monotonic() - started, 1)
        self._write_artifacts(code)
        self._teardown(code)
        return code

    def _run_workload(self) -> int:
        from django.utils import timezone

        from backwave_django import store

        config = self.config
        t0 = time.time()
        store.set_concurrency_limit(GOVERNED_QUEUE, INITIAL_LIMIT, actor="torture-runner", now=timezone.now())
        self.record(op="limit", queue=GOVERNED_QUEUE, limit=INITIAL_LIMIT, t0=t0, t1=time.time(), ok=True)
        self.slots = [WorkerSlot(self, i) for i in range(config.workers)]
        for slot in self.slots:
            slot.spawn()
        go = self.dir / "go"
        for index in range(config.clients):
            options = {
                "index": index,
                "seed": config.seed,
                "journal": str(self.dir / f"client-{index}.jsonl"),
                "go": str(go),
                "flow_share": config.flow_share,
            }
            log = (self.dir / f"client-{index}.log").open("wb")
            self.clients.append(
                subprocess.Popen(
                    [sys.executable, "-m", "tests.torture.client", json.dumps(options)],
                    env=self.child_env(role="client"),
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    cwd=ROOT,
                )
            )
            log.close()
        self._wait_for_clients()
        deadline = time.time() + config.duration
        partial = go.with_suffix(".tmp")
        partial.write_text(repr(deadline))
        partial.rename(go)  # atomically: a client never reads half a number
        chaos = threading.Thread(target=self._chaos, args=(deadline,), name="chaos", daemon=True)
        if config.chaos:
            chaos.start()
        logger.info(
            "workload: %d workers, %d clients, %.0f s, seed %d, database %s%s",
            config.workers,
            config.clients,
            config.duration,
            config.seed,
            self.database,
            f", sabotage {config.sabotage}" if config.sabotage else "",
        )
        next_report = time.monotonic() + 60
        while time.time() < deadline:
            self._watch_workers()
            if time.monotonic() >= next_report:
                logger.info("%.0f s left; kills %d, stops %d, backend terminations %d, restarts %d",
                            deadline - time.time(), self.figures.worker_kills, self.figures.worker_stops,
                            self.figures.backend_terminations, self.figures.postgres_restarts)
                next_report = time.monotonic() + 60
            time.sleep(0.2)
        self.stop_chaos.set()
        if chaos.is_alive():
            chaos.join(timeout=130)
        for client in self.clients:
            try:
                client.wait(timeout=30)
            except subprocess.TimeoutExpired:
                client.kill()
                self.note("a client did not stop at the deadline and was killed")
        for slot in self.slots:
            if slot.stopped:
                self._resume(slot)
        return self._drain_and_audit()

    def _wait_for_clients(self, timeout: float = 90.0) -> None:
        started = time.monotonic()
        while time.monotonic() - started < timeout:
            ready = 0
            for index in range(self.config.clients):
                path = self.dir / f"client-{index}.jsonl"
                if path.exists() and '"client_ready"' in path.read_text():
                    ready += 1
            if ready == self.config.clients:
                return
            if any(c.poll() is not None for c in self.clients):
                raise InfrastructureError(f"a client exited before the start; see {self.dir}/client-*.log")
            self._watch_workers()
            time.sleep(0.1)
        raise InfrastructureError(f"clients not ready after {timeout:.0f} s")

    def _drain_and_audit(self) -> int:
        from django.db import DatabaseError, connection
        from django.db.models import Count, Max
        from django.utils import timezone

        from backwave_django import store
        from backwave_django.models import JobRecord, JobTransition

        t0 = time.time()
        for attempt in range(20):
            try:
                store.resume_queue(PAUSABLE_QUEUE, actor="torture-runner", now=timezone.now())
                store.set_concurrency_limit(GOVERNED_QUEUE, 3, actor="torture-runner", now=timezone.now())
                break
            except DatabaseError:
                connection.close()
                time.sleep(0.5)
                if attempt == 19:
                    raise InfrastructureError("could not resume queues for the drain") from None
        self.record(op="limit", queue=GOVERNED_QUEUE, limit=3, t0=t0, t1=time.time(), ok=True)
        drain_started = last_progress = time.monotonic()
        live = -1
        last_transition: int | None = None
        stuck_since: float | None = None
        # The bound counts from the last transition written anywhere, not from the drain's start:
        # a job that keeps moving (a long handler failing and retried up to its ceiling, snoozed
        # on the way) may legitimately take longer than the bound in all, while a job stuck where
        # it is (a lease held and renewed, a handler never started) writes nothing. A hard cap of
        # DRAIN_CAP_FACTOR bounds keeps a run from draining forever.
        while (
            time.monotonic() - last_progress < self.config.drain_bound
            and time.monotonic() - drain_started < DRAIN_CAP_FACTOR * self.config.drain_bound
        ):
            self._watch_workers()
            try:
                counts = dict(
                    JobRecord.objects.filter(state__in=[0, 1, 2])
                    .values("state")
                    .annotate(n=Count("sequence"))
                    .values_list("state", "n")
                )
                newest = JobTransition.objects.aggregate(newest=Max("id"))["newest"]
            except DatabaseError:
                connection.close()
                time.sleep(0.25)
                continue
            if newest != last_transition:
                last_transition, last_progress = newest, time.monotonic()
            live = sum(counts.values())
            if live == 0:
                break
            # Only Awaiting Parent jobs and nothing that could still end a parent: they can never
            # move again. Wait a little (a cascade may be committing), then stop waiting.
            if set(counts) == {1}:
                stuck_since = stuck_since or time.monotonic()
                if time.monotonic() - stuck_since > 3.0:
                    self.note(f"drain: {live} Awaiting Parent job(s) with nothing left to release them")
                    break
            else:
                stuck_since = None
            time.sleep(0.25)
        self.figures.drain_seconds = round(time.monotonic() - drain_started, 1)
        logger.info("drain: %s live job(s) left after %.1f s", live, self.figures.drain_seconds)
        self._wait_for_observers()
        first = self._snapshot()
        time.sleep(1.5)
        second = self._snapshot()
        self._stop_processes()
        events = self._merged_events()
        config = AuditConfig(
            max_attempts=MAX_ATTEMPTS, governed_queue=GOVERNED_QUEUE, unroutable_wires=UNROUTABLE_WIRES
        )
        self.violations = (
            check_drained(second)
            + check_stable(first, second)
            + audit(second, events, config)
            + check_observers(second, events, OBSERVERS)
            + check_flow(second, events, LIMITS)
        )
        self._count(second, events)
        self.snapshot = second
        if self.violations:
            return EXIT_VIOLATIONS
        if self.figures.operations == 0 or self.figures.jobs == 0:
            self.note("the workload did nothing (no client operations or no jobs): nothing was tested")
            return EXIT_INFRA
        return EXIT_CLEAN

    def _wait_for_observers(self) -> None:
        """Let the workers' observer pumps number the whole log and deliver every matching entry
        (bounded like the drain; what is left behind is the audit's ObserverLiveness)."""
        from django.db import DatabaseError, connection

        from backwave_django import JobState, store
        from backwave_django.models import JobTransition

        started = time.monotonic()
        while time.monotonic() - started < self.config.drain_bound:
            self._watch_workers()
            try:
                unnumbered = JobTransition.objects.filter(position__isnull=True).exists()
                behind = [
                    observer_id
                    for observer_id, (states, wire) in OBSERVERS.items()
                    if store.observer_lag(observer_id, states=[JobState(s) for s in states], wire_name=wire).pending
                ]
            except DatabaseError:
                connection.close()
                time.sleep(0.25)
                continue
            if not unnumbered and not behind:
                break
            time.sleep(0.25)
        self.figures.observer_catch_up_seconds = round(time.monotonic() - started, 1)
        logger.info("observers caught up after %.1f s", self.figures.observer_catch_up_seconds)

    def _snapshot(self) -> Snapshot:
        from django.db import connection

        from backwave_django.models import (
            JobDependency,
            JobRecord,
            JobTag,
            JobTransition,
            LimitLease,
            Observer,
            ObserverDeadLetter,
        )

        connection.close()
        sequence_to_id: dict[int, str] = {}
        jobs: dict[str, JobRow] = {}
        for values in JobRecord.objects.values_list(
            "sequence", "job_id", "wire_name", "queue", "state", "attempt", "lease_owner", "lease_expiry",
            "terminal_at", "terminal_cause", "mode", "max_attempts", "partition", "limit_keys",
        ):
            (
                sequence, job_id, wire, queue, state, attempt, owner, expiry, terminal_at, cause, mode, ceiling,
                partition, keys,
            ) = values
            key = str(job_id)
            sequence_to_id[sequence] = key
            jobs[key] = JobRow(
                job_id=key, wire_name=wire, queue=queue, state=state, attempt=attempt, lease_owner=owner,
                lease_expiry=expiry.timestamp() if expiry else None,
                terminal_at=terminal_at.timestamp() if terminal_at else None, terminal_cause=cause, mode=mode,
                max_attempts=ceiling, partition=partition,
                limit_keys=tuple((str(name), str(bucket)) for name, bucket in keys or ()),
            )
        transitions: dict[str, list[Transition]] = {}
        self.figures.timeouts = self.figures.discards = 0
        for id_, sequence, ordinal, state, attempt, actor, recorded_at, failed, position in (
            JobTransition.objects.order_by("job_id", "ordinal").values_list(
                "id", "job_id", "ordinal", "state", "attempt", "actor", "recorded_at", "failure_detail", "position"
            )
        ):
            transitions.setdefault(sequence_to_id.get(sequence, f"seq:{sequence}"), []).append(
                Transition(id=id_, ordinal=ordinal, state=state, attempt=attempt, actor=actor,
                           recorded_at=recorded_at.timestamp(), failed=failed is not None, position=position)
            )
            if failed is not None:
                self.figures.timeouts += failed.startswith("backwave_django.JobTimeout:")
                self.figures.discards += failed.startswith("backwave_django.Discard:")
        edges = [
            (sequence_to_id.get(p, f"seq:{p}"), sequence_to_id.get(c, f"seq:{c}"))
            for p, c in JobDependency.objects.values_list("parent_id", "child_id")
        ]
        tags = [
            (sequence_to_id.get(j, f"seq:{j}"), k, v) for j, k, v in JobTag.objects.values_list("job_id", "key", "value")
        ]
        dead_letters: dict[str, set[int]] = {}
        for observer_id, position in ObserverDeadLetter.objects.values_list("observer_id", "position"):
            dead_letters.setdefault(observer_id, set()).add(position)
        observers = {
            observer_id: ObserverEnd(cursor=cursor, dead_letters=frozenset(dead_letters.get(observer_id, ())))
            for observer_id, cursor in Observer.objects.values_list("observer_id", "cursor")
        }
        leases = [
            (name, bucket, sequence_to_id.get(j, f"seq:{j}"))
            for name, bucket, j in LimitLease.objects.values_list("name", "bucket", "job")
        ]
        return Snapshot(
            jobs=jobs, transitions=transitions, edges=edges, tags=tags, observers=observers, limit_leases=leases
        )

    def _merged_events(self) -> list[dict[str, Any]]:
        events = list(self.events)
        for path in sorted(self.dir.glob("client-*.jsonl")) + sorted(self.dir.glob("exec.*")):
            with path.open() as handle:
                for line in handle:
                    line = line.strip()
                    if not line:
                        continue
                    try:
                        events.append(json.loads(line))
                    except json.JSONDecodeError:
                        continue  # a line cut short by kill -9
        events.sort(key=lambda e: float(e.get("t", 0)))
        return events

    def _count(self, snapshot: Snapshot, events: list[dict[str, Any]]) -> None:
        from .audit import state_name

        f = self.figures
        f.jobs = len(snapshot.jobs)
        f.transitions = sum(len(log) for log in snapshot.transitions.values())
        f.operations = sum(int(e.get("operations", 0)) for e in events if e.get("op") == "client_done")
        f.enqueues_accepted = sum(1 for e in events if e.get("op") == "enqueue" and e.get("result") == "Ok")
        f.duplicate_races = sum(
            1 for e in events if e.get("op") == "enqueue" and e.get("pooled") and e.get("result") == "Duplicate"
        )
        f.executions = sum(1 for e in events if e.get("op") == "exec")
        f.observer_deliveries = sum(1 for e in events if e.get("op") == "observed" and e.get("did") == "ok")
        f.observer_failures = sum(1 for e in events if e.get("op") == "observed" and e.get("did") == "fail")
        f.observer_dead_letters = sum(len(end.dead_letters) for end in snapshot.observers.values())
        f.violations = len(self.violations)
        states: dict[str, int] = {}
        for row in snapshot.jobs.values():
            states[state_name(row.state)] = states.get(state_name(row.state), 0) + 1
        f.final_states = states
        f.flow = flow_figures(snapshot, LIMITS)
        f.given_back = sum(
            1
            for log in snapshot.transitions.values()
            for previous, entry in itertools.pairwise(log)
            if (previous.state, entry.state) == (2, 0) and entry.actor != "lease-expiry" and not entry.failed
        )

    # --- Teardown ------------------------------------------------------------------------------

    def _stop_processes(self) -> None:
        self.stop_chaos.set()
        # The audit's snapshots are taken by now: workers are killed, not drained gracefully.
        for slot in self.slots:
            slot.expected_exit = True
            if slot.alive():
                slot.signal(signal.SIGKILL)
        for slot in self.slots:
            if slot.process is not None:
                slot.process.wait()
        for client in self.clients:
            if client.poll() is None:
                client.kill()
                client.wait()

    def _write_artifacts(self, code: int) -> None:
        run = {
            "mode": self.config.mode,
            "seed": self.config.seed,
            "exit_code": code,
            "database": self.database,
            "config": {k: str(v) if isinstance(v, Path) else v for k, v in asdict(self.config).items()},
            "figures": asdict(self.figures),
            "notes": self.notes,
            "replay": f"python -m tests.torture --mode {self.config.mode} --seed {self.config.seed} "
            f"--duration {self.config.duration:g} --workers {self.config.workers} --clients {self.config.clients}"
            + f" --duplicate-delivery {self.config.duplicate_delivery:g}"
            + f" --flow-share {self.config.flow_share:g}"
            + f" --clock-skew {self.config.clock_skew:g}"
            + (f" --sabotage {self.config.sabotage}" if self.config.sabotage else ""),
        }
        (self.dir / "run.json").write_text(json.dumps(run, indent=2))
        (self.dir / "violations.json").write_text(json.dumps([v.as_dict() for v in self.violations], indent=2))
        if code == EXIT_CLEAN and not self._keep():
            return
        with (self.dir / "journal.jsonl").open("w") as handle:
            for event in self._merged_events():
                handle.write(json.dumps(event) + "\n")
        snapshot = getattr(self, "snapshot", None)
        if snapshot is not None:
            dump = {
                "jobs": [asdict(row) for row in snapshot.jobs.values()],
                "transitions": {job: [asdict(t) for t in log] for job, log in snapshot.transitions.items()},
                "edges": snapshot.edges,
                "tags": snapshot.tags,
            }
            (self.dir / "store-dump.json").write_text(json.dumps(dump))

    def _keep(self) -> bool:
        """Keep a clean run's artifacts when asked, or when a worker died on its own (its log tells why)."""
        return self.config.keep_artifacts or self.figures.unexpected_worker_exits > 0

    def _teardown(self, code: int) -> None:
        from django.db import connections

        connections.close_all()
        try:
            self.server.drop_database(self.database)
        except Exception as exc:
            logger.warning("could not drop %s: %s", self.database, exc)
        if self.cluster is not None:
            self.cluster.stop()
        if code == EXIT_CLEAN and not self._keep():
            shutil.rmtree(self.dir, ignore_errors=True)
            with contextlib.suppress(OSError):
                self.dir.parent.rmdir()  # the artifacts root, when this run was all it held


def summary(runner: Runner, code: int) -> str:
    f = runner.figures
    verdict = {EXIT_CLEAN: "CLEAN", EXIT_VIOLATIONS: "RED", EXIT_INFRA: "INFRASTRUCTURE"}[code]
    lines = [
        f"torture {runner.config.mode} seed={runner.config.seed}"
        + (f" batch-window={runner.config.batch_window:g}s" if runner.config.batch_window else "")
        + f": {verdict}",
        f"  jobs {f.jobs}, transitions {f.transitions}, client operations {f.operations}, "
        f"accepted enqueues {f.enqueues_accepted}, duplicate races {f.duplicate_races}, executions {f.executions}",
        f"  chaos: worker kills {f.worker_kills}, SIGSTOPs {f.worker_stops}, backend terminations "
        f"{f.backend_terminations}, PostgreSQL restarts {f.postgres_restarts}; unexpected worker exits "
        f"{f.unexpected_worker_exits}",
        f"  handlers: timeouts {f.timeouts}, discards {f.discards}, attempts given back (snoozes, releases) "
        f"{f.given_back}",
        f"  observers: deliveries {f.observer_deliveries}, failed calls (retried) {f.observer_failures}, "
        f"dead letters {f.observer_dead_letters}; caught up {f.observer_catch_up_seconds} s after the drain",
        "  flow control (jobs / claims / peak in one bucket): "
        + ", ".join(f"{name} {v['jobs']}/{v['claims']}/{v['peak']}" for name, v in f.flow.items()),
        f"  final states {f.final_states}; drain {f.drain_seconds} s; wall {f.wall_seconds} s",
        f"  violations: {f.violations}",
    ]
    by_oracle: dict[str, int] = {}
    for v in runner.violations:
        by_oracle[v.oracle] = by_oracle.get(v.oracle, 0) + 1
    for oracle, n in sorted(by_oracle.items()):
        example = next(v for v in runner.violations if v.oracle == oracle)
        lines.append(f"    {oracle}: {n} (e.g. job {example.job}: {example.detail})")
    lines.extend(f"  note: {n}" for n in runner.notes)
    if code != EXIT_CLEAN or runner._keep():
        lines.append(f"  artifacts: {runner.dir}")
    return "\n".join(lines)
