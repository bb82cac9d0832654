"""A randomized state-machine test of the store against an independent oracle.

Hypothesis drives random sequences of store operations (enqueue with dependencies, claim, batched
outcome reports including stale ones, heartbeats, virtual time, lease expiry, operator actions and
purge) on the real database. Every step is checked two ways:

* **Exactly**: before each operation the test snapshots the whole store (rows, transition log,
  edges, tags, audit, queue settings) and computes what the operation must do from the
  documented rules alone (docs/concepts.md, docs/store.md): the direct effect on its targets and, for every job that becomes
  terminal, the dependency cascade (resolved in sequence order, which is topological). The
  snapshot taken afterwards must equal that expectation, and nothing else may change.
* **Structurally**, over the whole database: every job's transition log is a chain of legal
  edges from ``None`` ending in its current state and attempt; attempts stay within the retry
  ceiling; ``terminal_at`` exactly on terminal rows; lease fields exactly on Leased rows; every
  Awaiting Parent job is gated by live parents whose edges it counts; a limited queue that is
  within its limit stays within it.

Each example runs inside a savepoint that is rolled back at its end, so examples are isolated
and the test works the same on SQLite and PostgreSQL.
"""

from __future__ import annotations

import itertools
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import pytest
from django.db import connection, transaction
from hypothesis import HealthCheck, event, settings, strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from backwave_django import store
from backwave_django.core.outcomes import (
    Cancelled,
    Failure,
    NewJob,
    OutcomeReport,
    Snoozed,
    Success,
    Unroutable,
)
from backwave_django.core.retry import RetryPolicy, job_retry_policy
from backwave_django.core.states import (
    CancelResult,
    DependencyMode,
    EnqueueResult,
    JobState,
    OperatorAction,
    OutcomeResult,
    RequeueResult,
    TerminalStateClass,
    is_legal_edge,
)
from backwave_django.core.tags import normalize_tags
from backwave_django.models import (
    JobDependency,
    JobRecord,
    JobTag,
    JobTransition,
    OperatorAudit,
    QueueSettings,
)

from ..conftest import T0

_S = JobState
QUEUES = ["q0", "q1", "q2"]
WORKERS = ["w0", "w1"]
ACTOR = "ops"
LEASE = timedelta(minutes=1)
POLICY = RetryPolicy(max_attempts=3, backoff=[5, 30])
MAX_TRANSITIONS = 64
ROW_FIELDS = (
    "job_id",
    "sequence",
    "wire_name",
    "queue",
    "payload",
    "state",
    "due_time",
    "attempt",
    "lease_owner",
    "lease_expiry",
    "cancel_requested",
    "terminal_at",
    "terminal_cause",
    "parents_remaining",
    "mode",
    "output",
    "enqueued_at",
    "next_ordinal",
    "max_attempts",
    "progress",
)
TAG_CHOICES = ["vip", "batch", ("tenant", "acme"), ("tenant", "zeta")]
PICK = st.integers(0, 10**6)
#: A job to act on: usually a known one (by index), sometimes an id the store never saw.
TARGET = st.one_of(PICK, PICK, PICK, PICK, st.none())
#: Parents for a new job, by index among the known ids: none in about half the cases.
PARENT_PICKS: st.SearchStrategy[list[int]] = st.one_of(st.just([]), st.lists(PICK, min_size=1, max_size=3))
has_jobs = precondition(lambda self: bool(self.ever))
OUTCOME_KINDS = st.sampled_from(
    ["success", "success", "retry", "retry", "snooze", "dead-letter", "cancelled", "unroutable"]
)
#: What a handler reports as its progress, when it reports any (written with the outcome).
PROGRESS = {"done": 1, "total": 2, "note": "half", "at": "2026-01-01T00:00:00Z"}


# --- Snapshots --------------------------------------------------------------------------------


@dataclass
class Snapshot:
    rows: dict[uuid.UUID, dict[str, Any]]
    #: job -> [(ordinal, state, attempt, actor, failure_detail, recorded_at)]
    log: dict[uuid.UUID, list[tuple[Any, ...]]]
    edges: set[tuple[uuid.UUID, uuid.UUID]]
    tags: dict[uuid.UUID, frozenset[tuple[str, str]]]
    audit: list[tuple[Any, ...]]
    queues: dict[str, tuple[bool, int | None]]


def snapshot() -> Snapshot:
    rows = {r["job_id"]: r for r in JobRecord.objects.values(*ROW_FIELDS)}
    log: dict[uuid.UUID, list[tuple[Any, ...]]] = {}
    for job, *entry in JobTransition.objects.order_by("job_id", "ordinal").values_list(
        "job__job_id", "ordinal", "state", "attempt", "actor", "failure_detail", "recorded_at"
    ):
        log.setdefault(job, []).append(tuple(entry))
    tags: dict[uuid.UUID, set[tuple[str, str]]] = {}
    for job, key, value in JobTag.objects.values_list("job__job_id", "key", "value"):
        tags.setdefault(job, set()).add((key, value))
    return Snapshot(
        rows=rows,
        log=log,
        edges=set(JobDependency.objects.values_list("parent__job_id", "child__job_id")),
        tags={job: frozenset(pairs) for job, pairs in tags.items()},
        audit=list(
            OperatorAudit.objects.order_by("id").values_list("actor", "action", "target", "recorded_at")
        ),
        queues={
            q: (p, lim)
            for q, p, lim in QueueSettings.objects.values_list("queue", "paused", "concurrency_limit")
        },
    )


@dataclass
class Entry:
    """An expected new transition-log entry; ``actors`` lists the acceptable actors."""

    state: JobState
    attempt: int
    actors: frozenset[str]
    failure_detail: str | None = None


@dataclass
class Expect:
    """What one operation must do, beyond the cascade (which ``StoreMachine.settle`` derives)."""

    rows: dict[uuid.UUID, dict[str, Any]] = field(default_factory=dict)
    deleted: set[uuid.UUID] = field(default_factory=set)
    entries: dict[uuid.UUID, list[Entry]] = field(default_factory=dict)
    tags: dict[uuid.UUID, set[tuple[str, str]]] = field(default_factory=dict)
    edges: set[tuple[uuid.UUID, uuid.UUID]] = field(default_factory=set)
    audit: list[tuple[str, str, str]] = field(default_factory=list)
    queues: dict[str, tuple[bool, int | None]] = field(default_factory=dict)
    #: cascade-cancelled job -> acceptable (actor, cause) pairs (the first failing parent names both)
    causes: dict[uuid.UUID, set[tuple[str, str]]] = field(default_factory=dict)

    def change(self, pre: Snapshot, job: uuid.UUID, entry: Entry | None = None, **fields: Any) -> None:
        row = dict(self.rows.get(job, pre.rows[job]))
        row.update(fields)
        if entry is not None:
            row["next_ordinal"] += 1
            self.entries.setdefault(job, []).append(entry)
        self.rows[job] = row


def is_terminal(state: int) -> bool:
    return _S(state).is_terminal


# --- The machine ------------------------------------------------------------------------------


class StoreMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        # Inside the test's transaction each example is rolled back to a savepoint; in a
        # transactional test (every store call a transaction of its own) the tables are emptied.
        # ``savepoint_create`` is the Django 6.1 name; ``savepoint`` serves older versions.
        self.savepoint = (
            getattr(transaction, "savepoint_create", transaction.savepoint)()
            if connection.in_atomic_block
            else None
        )
        self.now: datetime = T0
        self.ever: list[uuid.UUID] = []  # every id ever enqueued, purged ones too
        self.leases: list[tuple[uuid.UUID, str, int]] = []  # (job, worker, attempt) handed out by claims
        self.within_limit: dict[str, bool] = {}
        self.db = snapshot()

    def teardown(self) -> None:
        if self.savepoint is not None:
            transaction.savepoint_rollback(self.savepoint)
            return
        for model in (JobTransition, JobTag, JobDependency, JobRecord, OperatorAudit, QueueSettings):
            model.objects.all().delete()

    # -- helpers --

    def pick_job(self, pick: int) -> uuid.UUID:
        return self.ever[pick % len(self.ever)]

    def pick_target(self, pick: int | None, states: set[JobState]) -> uuid.UUID:
        """An unknown id (``None``), else usually a job in one of ``states``, else any job ever seen."""
        if pick is None:
            return uuid.uuid4()
        rows = self.db.rows
        fitting = [j for j in self.ordered(rows) if rows[j]["state"] in states]
        if fitting and pick % 3:
            return fitting[pick % len(fitting)]
        return self.pick_job(pick)

    def ordered(self, rows: dict[uuid.UUID, dict[str, Any]]) -> list[uuid.UUID]:
        return sorted(rows, key=lambda j: rows[j]["sequence"])

    def settle(self, exp: Expect) -> None:
        """Derive the cascade, then compare the database with the expectation and take it as the model."""
        pre, now = self.db, self.now
        final_state = {j: r["state"] for j, r in exp.rows.items()}
        newly_terminal = {
            j
            for j, s in final_state.items()
            if is_terminal(s) and j in pre.rows and not is_terminal(pre.rows[j]["state"])
        }
        # Children come after their parents in sequence order, so one pass resolves every level.
        for child in self.ordered(pre.rows):
            row = pre.rows[child]
            if child in exp.rows or row["state"] != _S.AWAITING_PARENT:
                continue
            gating = {p for p, c in pre.edges if c == child}
            resolved = gating & newly_terminal
            if not resolved:
                continue
            failing = [p for p in resolved if final_state[p] != _S.SUCCEEDED]
            if row["mode"] == DependencyMode.ON_SUCCESS and failing:
                pairs = {(f"cascade:{p}", f"parent-failure:{_S(final_state[p]).pascal}") for p in failing}
                exp.causes[child] = pairs
                exp.change(
                    pre,
                    child,
                    Entry(_S.CANCELLED, row["attempt"], frozenset(a for a, _ in pairs)),
                    state=_S.CANCELLED,
                    parents_remaining=0,
                    terminal_at=now,
                    terminal_cause=None,  # checked against ``causes``
                )
                newly_terminal.add(child)
                final_state[child] = _S.CANCELLED
                event("cascade: child cancelled")
            elif resolved == gating:
                exp.change(
                    pre,
                    child,
                    Entry(_S.SCHEDULED, row["attempt"], frozenset(f"cascade:{p}" for p in resolved)),
                    state=_S.SCHEDULED,
                    parents_remaining=0,
                    due_time=max(row["due_time"], now),
                )
                final_state[child] = _S.SCHEDULED
                event("cascade: child released")
            else:
                exp.change(pre, child, parents_remaining=len(gating - resolved))
                event("cascade: latch counted down")

        post = snapshot()
        # Rows: exactly the expected set, each exactly as expected; nothing else changed.
        expected_ids = (set(pre.rows) - exp.deleted) | set(exp.rows)
        assert set(post.rows) == expected_ids, set(post.rows) ^ expected_ids
        for job, actual in post.rows.items():
            wanted = dict(exp.rows.get(job, pre.rows.get(job, {})))
            if job not in pre.rows:
                wanted["sequence"] = actual["sequence"]
            if job in exp.causes:
                last_actor = post.log[job][-1][3]
                assert (last_actor, actual["terminal_cause"]) in exp.causes[job], (
                    job,
                    last_actor,
                    actual["terminal_cause"],
                    exp.causes[job],
                )
                wanted["terminal_cause"] = actual["terminal_cause"]
            diff = {k: (wanted.get(k), v) for k, v in actual.items() if wanted.get(k) != v}
            assert not diff, f"job {job} ({_S(actual['state']).name}): field (expected, actual): {diff}"
        # Transition log: the old entries, then exactly the expected new ones.
        for job in post.rows:
            before = pre.log.get(job, []) if job in pre.rows else []
            new = exp.entries.get(job, [])
            after = post.log.get(job, [])
            first_new = post.rows[job]["next_ordinal"] - len(new)
            kept = max(0, min(len(before), MAX_TRANSITIONS - len(new)))  # the oldest age out
            assert [e for e in after if e[0] < first_new] == before[len(before) - kept :], (
                job,
                before,
                after,
            )
            tail = [e for e in after if e[0] >= first_new]
            assert len(tail) == len(new), (job, tail, new)
            for (ordinal, state, attempt, actor, detail, at), entry in zip(tail, new, strict=True):
                assert (state, attempt, detail, at) == (
                    entry.state,
                    entry.attempt,
                    entry.failure_detail,
                    now,
                ), (
                    job,
                    ordinal,
                    (state, attempt, detail, at),
                    entry,
                )
                assert actor in entry.actors, (job, actor, entry.actors)
        # Edges: new ones added; those of every job that became terminal gone; purged ones gone.
        edges = {(p, c) for p, c in pre.edges | exp.edges if p not in newly_terminal}
        edges = {(p, c) for p, c in edges if p not in exp.deleted and c not in exp.deleted}
        assert post.edges == edges, post.edges ^ edges
        # Tags: a set per job, only ever added to.
        tags = {j: set(t) for j, t in pre.tags.items() if j not in exp.deleted}
        for job, added in exp.tags.items():
            tags.setdefault(job, set()).update(added)
        assert post.tags == {j: frozenset(t) for j, t in tags.items() if t}
        # Audit and queue settings.
        assert post.audit == pre.audit + [(a, act, t, now) for a, act, t in exp.audit]
        assert post.queues == {**pre.queues, **exp.queues}
        self.db = post

    # -- rules --

    @initialize(
        seeds=st.lists(
            st.tuples(st.sampled_from(QUEUES), PARENT_PICKS, st.sampled_from(list(DependencyMode))),
            min_size=3,
            max_size=8,
        )
    )
    def seed_jobs(self, seeds):
        for queue, parent_picks, mode in seeds:
            self.enqueue(queue, parent_picks, False, False, mode, None, 0, [])

    @rule(
        queue=st.sampled_from(QUEUES),
        parent_picks=PARENT_PICKS,
        repeat_parent=st.booleans(),
        unknown_parent=st.booleans(),
        mode=st.sampled_from(list(DependencyMode)),
        reuse_id=st.one_of(st.none(), PICK),
        delay=st.sampled_from([0, 0, 0, 0, 20, 600]),
        tags=st.lists(st.sampled_from(TAG_CHOICES), max_size=2),
    )
    def enqueue(self, queue, parent_picks, repeat_parent, unknown_parent, mode, reuse_id, delay, tags):
        pre, now = self.db, self.now
        parents = [self.pick_job(p) for p in parent_picks] if self.ever else []
        if parents and repeat_parent:
            parents.append(parents[0])
        if unknown_parent and len(parents) < 3 and parent_picks:
            parents.append(uuid.uuid4())
        job_id = self.pick_job(reuse_id) if reuse_id is not None and self.ever else uuid.uuid4()
        due = now + timedelta(seconds=delay)
        job = NewJob(
            job_id=job_id,
            wire_name="w",
            payload={"n": len(self.ever)},
            queue=queue,
            due_time=due,
            parents=tuple(parents),
            mode=mode,
            tags=tuple(tags),
            max_attempts=POLICY.max_attempts,
        )
        result = store.enqueue(job, now=now)
        exp = Expect()
        distinct = list(dict.fromkeys(parents))
        event(f"enqueue: {result.name}")
        if job_id in pre.rows:
            assert result is EnqueueResult.DUPLICATE
        elif any(p not in pre.rows for p in distinct):
            assert result is EnqueueResult.UNKNOWN_PARENT
        else:
            assert result is EnqueueResult.OK
            live = [p for p in distinct if not is_terminal(pre.rows[p]["state"])]
            failed = [
                pre.rows[p]["state"]
                for p in distinct
                if mode == DependencyMode.ON_SUCCESS
                and is_terminal(pre.rows[p]["state"])
                and pre.rows[p]["state"] != _S.SUCCEEDED
            ]
            state = _S.CANCELLED if failed else _S.AWAITING_PARENT if live else _S.SCHEDULED
            exp.rows[job_id] = {
                "job_id": job_id,
                "wire_name": "w",
                "queue": queue,
                "payload": job.payload,
                "state": state,
                "due_time": due,
                "attempt": 0,
                "lease_owner": None,
                "lease_expiry": None,
                "cancel_requested": False,
                "terminal_at": now if failed else None,
                "terminal_cause": f"parent-failure:{_S(failed[-1]).pascal}" if failed else None,
                "parents_remaining": len(live),
                "mode": mode,
                "output": None,
                "enqueued_at": now,
                "next_ordinal": 1,
                "max_attempts": POLICY.max_attempts,
                "progress": None,
            }
            exp.entries[job_id] = [Entry(state, 0, frozenset({"enqueue"}))]
            exp.edges = {(p, job_id) for p in live}
            exp.tags[job_id] = set(normalize_tags(tags))
            if job_id not in self.ever:
                self.ever.append(job_id)
        self.settle(exp)

    @has_jobs
    @rule(
        worker=st.sampled_from(WORKERS),
        queues=st.one_of(st.permutations(QUEUES), st.lists(st.sampled_from(QUEUES), max_size=4)),
        max_jobs=st.one_of(st.integers(1, 5), st.just(0)),
    )
    def claim(self, worker, queues, max_jobs):
        self.do_claim(worker, queues, max_jobs)

    def do_claim(self, worker: str, queues: list[str], max_jobs: int) -> list[Any]:
        pre, now = self.db, self.now
        claimed = store.claim(
            worker_id=worker, queues=queues, max_jobs=max_jobs, lease_duration=LEASE, now=now
        )
        expected: list[uuid.UUID] = []
        for queue in dict.fromkeys(queues):
            if len(expected) >= max_jobs:
                break
            paused, limit = pre.queues.get(queue, (False, None))
            if paused:
                continue
            in_queue = [r for r in pre.rows.values() if r["queue"] == queue]
            leased = sum(r["state"] == _S.LEASED for r in in_queue)
            slots = (
                max_jobs - len(expected) if limit is None else min(max_jobs - len(expected), limit - leased)
            )
            due = sorted(
                (r for r in in_queue if r["state"] == _S.SCHEDULED and r["due_time"] <= now),
                key=lambda r: (r["due_time"], r["sequence"]),
            )
            expected.extend(r["job_id"] for r in due[: max(slots, 0)])
        assert [c.job_id for c in claimed] == expected
        event(f"claim: {min(len(claimed), 2)}+ jobs")
        exp = Expect()
        for c in claimed:
            row = pre.rows[c.job_id]
            attempt = row["attempt"] + 1
            assert (c.wire_name, c.queue, c.payload, c.attempt, c.due_time) == (
                row["wire_name"],
                row["queue"],
                row["payload"],
                attempt,
                row["due_time"],
            )
            assert (c.lease_owner, c.lease_expiry) == (worker, now + LEASE)
            assert set(normalize_tags(c.tags)) == set(pre.tags.get(c.job_id, ()))
            exp.change(
                pre,
                c.job_id,
                Entry(_S.LEASED, attempt, frozenset({worker})),
                state=_S.LEASED,
                attempt=attempt,
                lease_owner=worker,
                lease_expiry=now + LEASE,
            )
            self.leases.append((c.job_id, worker, attempt))
        self.settle(exp)
        return claimed

    @has_jobs
    @rule(
        reports=st.lists(
            st.tuples(
                PICK,
                st.sampled_from(["right", "right", "right", "wrong-worker", "wrong-attempt"]),
                OUTCOME_KINDS,
                st.booleans(),
            ),
            min_size=1,
            max_size=3,
        )
    )
    def report(self, reports):
        batch = []
        leased = self.leased_now()
        for pick, variant, kind, extras in reports:
            if leased and pick % 3:
                # A job Leased right now, by its holder: applies unless the lease has lapsed.
                job, worker, attempt = leased[pick % len(leased)]
            elif self.leases:
                # A lease handed out earlier: maybe long gone (reported, expired, re-claimed).
                job, worker, attempt = self.leases[-1 - pick % len(self.leases)]
            else:
                job, worker, attempt = self.pick_job(pick), WORKERS[0], 1
            if variant == "wrong-worker":
                worker = "intruder"
            elif variant == "wrong-attempt":
                attempt += 1 if pick % 2 else -1
            batch.append(self.outcome_report(job, worker, attempt, kind, extras))
        self.apply_reports(batch)

    @has_jobs
    @rule(
        worker=st.sampled_from(WORKERS),
        max_jobs=st.integers(1, 3),
        kinds=st.lists(st.one_of(OUTCOME_KINDS, st.just("keep")), min_size=3, max_size=3),
        extras=st.booleans(),
        elapsed=st.sampled_from([0, 0, 1, 30, 59, 60, 61]),
    )
    def work(self, worker, max_jobs, kinds, extras, elapsed):
        """Claim from every queue, run for ``elapsed`` seconds and report each job's outcome.

        A run of a lease's length or longer reports too late: the fence must refuse it.
        """
        claimed = self.do_claim(worker, QUEUES, max_jobs)
        self.now += timedelta(seconds=elapsed)
        reports = [
            self.outcome_report(c.job_id, worker, c.attempt, k, extras)
            for c, k in zip(claimed, kinds, strict=False)
            if k != "keep"  # the handler is still running
        ]
        if reports:
            self.apply_reports(reports)

    @has_jobs
    @rule(worker=st.sampled_from(WORKERS), max_jobs=st.integers(1, 3), overrun=st.sampled_from([0, 1, 45]))
    def crash(self, worker, max_jobs, overrun):
        """A worker claims and dies: its leases lapse and a sweep disposes them (retry or dead-letter)."""
        self.do_claim(worker, QUEUES, max_jobs)
        self.now += LEASE + timedelta(seconds=overrun)
        self.do_expire(QUEUES, 32)

    def leased_now(self) -> list[tuple[uuid.UUID, str, int]]:
        rows = self.db.rows
        return [
            (j, rows[j]["lease_owner"], rows[j]["attempt"])
            for j in self.ordered(rows)
            if rows[j]["state"] == _S.LEASED
        ]

    def outcome_report(
        self, job: uuid.UUID, worker: str, attempt: int, kind: str, extras: bool
    ) -> OutcomeReport:
        now = self.now
        if kind == "success":
            outcome: Any = Success()
        elif kind == "retry":
            # The job's own stored policy decides: at its ceiling a failure dead-letters.
            row = self.db.rows.get(job)
            ceiling = row["max_attempts"] if row is not None else None
            policy = job_retry_policy(ceiling, None, POLICY)
            outcome = Failure(next_due_time=policy.next_attempt_at(max(attempt, 0), now), error="flaky")
        elif kind == "snooze":
            outcome = Snoozed(next_due_time=now + timedelta(seconds=10))
        elif kind == "dead-letter":
            outcome = Failure(next_due_time=None, error="fatal")
        elif kind == "cancelled":
            outcome = Cancelled(cause="operator-cancel")
        else:
            outcome = Unroutable(reason="no handler registered for wire name 'w'")
        return OutcomeReport(
            job_id=job,
            worker_id=worker,
            attempt=attempt,
            outcome=outcome,
            failure_detail="Traceback: boom" if isinstance(outcome, Failure) else None,
            added_tags=(("by", worker), "done") if extras else (),
            output={"job": str(job)} if extras and kind == "success" else None,
            progress=PROGRESS if extras else None,
        )

    def apply_reports(self, batch: list[OutcomeReport]) -> None:
        pre, now = self.db, self.now
        results = store.report_outcomes(batch, now=now)
        exp = Expect()
        expected_results = []
        for rep in batch:
            row = exp.rows.get(rep.job_id, pre.rows.get(rep.job_id))
            if (
                row is None
                or row["state"] != _S.LEASED
                or row["lease_owner"] != rep.worker_id
                or row["attempt"] != rep.attempt
                or row["lease_expiry"] <= now
            ):
                expected_results.append(OutcomeResult.STALE_LEASE)
                continue
            expected_results.append(OutcomeResult.APPLIED)
            lease: dict[str, Any] = {"lease_owner": None, "lease_expiry": None}
            if rep.progress is not None:
                lease["progress"] = rep.progress
            out = rep.outcome
            worker = frozenset({rep.worker_id})
            if isinstance(out, Snoozed):
                exp.change(
                    pre,
                    rep.job_id,
                    Entry(_S.SCHEDULED, rep.attempt, worker),
                    state=_S.SCHEDULED,
                    due_time=out.next_due_time,
                    max_attempts=row["max_attempts"] + 1,
                    **lease,
                )
            elif isinstance(out, Success):
                exp.change(
                    pre,
                    rep.job_id,
                    Entry(_S.SUCCEEDED, rep.attempt, worker),
                    state=_S.SUCCEEDED,
                    terminal_at=now,
                    output=rep.output,
                    **lease,
                )
            elif isinstance(out, Failure) and out.next_due_time is not None:
                exp.change(
                    pre,
                    rep.job_id,
                    Entry(_S.SCHEDULED, rep.attempt, worker, rep.failure_detail),
                    state=_S.SCHEDULED,
                    due_time=out.next_due_time,
                    **lease,
                )
            elif isinstance(out, Failure):
                exp.change(
                    pre,
                    rep.job_id,
                    Entry(_S.DEAD_LETTERED, rep.attempt, worker, rep.failure_detail),
                    state=_S.DEAD_LETTERED,
                    terminal_at=now,
                    terminal_cause=out.error,
                    **lease,
                )
            elif isinstance(out, Cancelled):
                exp.change(
                    pre,
                    rep.job_id,
                    Entry(_S.CANCELLED, rep.attempt, worker),
                    state=_S.CANCELLED,
                    terminal_at=now,
                    terminal_cause=out.cause,
                    cancel_requested=False,
                    **lease,
                )
            else:
                assert isinstance(out, Unroutable)
                exp.change(
                    pre,
                    rep.job_id,
                    Entry(_S.QUARANTINED, rep.attempt, worker),
                    state=_S.QUARANTINED,
                    terminal_at=now,
                    terminal_cause=out.reason,
                    **lease,
                )
            if rep.added_tags:
                exp.tags.setdefault(rep.job_id, set()).update(normalize_tags(rep.added_tags))
        assert results == expected_results
        for rep, res in zip(batch, results, strict=True):
            event(f"report {type(rep.outcome).__name__}: {res.name}")
        self.settle(exp)

    @has_jobs
    @rule(
        worker=st.sampled_from(WORKERS),
        picks=st.lists(PICK, max_size=3),
        seconds=st.sampled_from([30, 60, 120]),
    )
    def heartbeat(self, worker, picks, seconds):
        pre, now = self.db, self.now
        leased = self.leased_now()
        pool = [j for j, _, _ in leased] + [j for j, _, _ in self.leases[-2:]] or self.ever
        ids = [pool[p % len(pool)] for p in picks]
        if leased and picks and picks[0] % 3:
            worker = leased[picks[0] % len(leased)][1]  # usually the holder itself
        results = store.heartbeat(
            worker_id=worker, job_ids=ids, lease_duration=timedelta(seconds=seconds), now=now
        )
        exp = Expect()
        expected = []
        for job in ids:
            row = pre.rows.get(job)
            live = (
                row is not None
                and row["state"] == _S.LEASED
                and row["lease_owner"] == worker
                and row["lease_expiry"] > now
            )
            expected.append((job, live, live and row is not None and row["cancel_requested"]))
            if live:
                exp.change(pre, job, lease_expiry=now + timedelta(seconds=seconds))
        assert [(r.job_id, r.renewed, r.cancel_requested) for r in results] == expected
        for _, renewed, flag in expected:
            event(f"heartbeat: renewed={renewed} cancel_requested={flag}")
        self.settle(exp)

    @has_jobs
    @rule(worker=st.sampled_from(WORKERS), picks=st.lists(PICK, max_size=3))
    def release(self, worker, picks):
        """A worker shutting down gives its running jobs back: due now, the attempt not spent."""
        pre, now = self.db, self.now
        leased = self.leased_now()
        pool = [j for j, _, _ in leased] + [j for j, _, _ in self.leases[-2:]] or self.ever
        ids = list(dict.fromkeys(pool[p % len(pool)] for p in picks))
        count = store.release_leases(worker_id=worker, job_ids=ids, now=now)
        exp = Expect()
        released = 0
        for job in sorted(ids, key=lambda j: pre.rows[j]["sequence"] if j in pre.rows else -1):
            row = pre.rows.get(job)
            if (
                row is None
                or row["state"] != _S.LEASED
                or row["lease_owner"] != worker
                or row["lease_expiry"] <= now
            ):
                continue
            released += 1
            exp.change(
                pre,
                job,
                Entry(_S.SCHEDULED, row["attempt"], frozenset({worker})),
                state=_S.SCHEDULED,
                due_time=now,
                lease_owner=None,
                lease_expiry=None,
                max_attempts=row["max_attempts"] + 1,
            )
        assert count == released
        event(f"release: {min(count, 2)}+")
        self.settle(exp)

    @rule(seconds=st.one_of(st.sampled_from([1, 59, 60, 61, 120]), st.integers(1, 900)))
    def advance_time(self, seconds):
        self.now += timedelta(seconds=seconds)

    @has_jobs
    @rule(
        queues=st.one_of(st.permutations(QUEUES), st.lists(st.sampled_from(QUEUES), max_size=3)),
        max_jobs=st.one_of(st.integers(1, 4), st.just(0)),
    )
    def expire_leases(self, queues, max_jobs):
        self.do_expire(queues, max_jobs)

    def do_expire(self, queues: list[str], max_jobs: int) -> None:
        pre, now = self.db, self.now
        count = store.expire_leases(now=now, queues=queues, retry=POLICY, max_jobs=max_jobs)
        expired = sorted(
            (
                r
                for r in pre.rows.values()
                if r["queue"] in queues and r["state"] == _S.LEASED and r["lease_expiry"] <= now
            ),
            key=lambda r: (r["lease_expiry"], r["sequence"]),
        )[:max_jobs]
        assert count == len(expired)
        event(f"expire: {min(count, 2)}+ leases")
        exp = Expect()
        actor = frozenset({"lease-expiry"})
        for row in expired:
            retry_at = job_retry_policy(row["max_attempts"], None, POLICY).next_attempt_at(
                row["attempt"], now
            )
            lease = {"lease_owner": None, "lease_expiry": None}
            if retry_at is not None:
                exp.change(
                    pre,
                    row["job_id"],
                    Entry(_S.SCHEDULED, row["attempt"], actor),
                    state=_S.SCHEDULED,
                    due_time=retry_at,
                    **lease,
                )
            else:
                cause = f"Lease expired on attempt {row['attempt']} (attempt ceiling reached)."
                exp.change(
                    pre,
                    row["job_id"],
                    Entry(_S.DEAD_LETTERED, row["attempt"], actor),
                    state=_S.DEAD_LETTERED,
                    terminal_at=now,
                    terminal_cause=cause,
                    **lease,
                )
        self.settle(exp)

    @has_jobs
    @rule(pick=TARGET)
    def cancel_job(self, pick):
        pre, now = self.db, self.now
        job = self.pick_target(pick, {_S.SCHEDULED, _S.AWAITING_PARENT, _S.LEASED})
        result = store.cancel_job(job, actor=ACTOR, now=now)
        event(f"cancel: {result.name}")
        row = pre.rows.get(job)
        exp = Expect()
        if row is not None and row["state"] in (_S.SCHEDULED, _S.AWAITING_PARENT):
            assert result is CancelResult.CANCELLED_IMMEDIATELY
            exp.change(
                pre,
                job,
                Entry(_S.CANCELLED, row["attempt"], frozenset({ACTOR})),
                state=_S.CANCELLED,
                terminal_at=now,
                terminal_cause=ACTOR,
            )
            exp.audit.append((ACTOR, OperatorAction.CANCEL, str(job)))
        elif row is not None and row["state"] == _S.LEASED:
            assert result is CancelResult.CANCELLATION_REQUESTED
            exp.change(pre, job, cancel_requested=True)
            exp.audit.append((ACTOR, OperatorAction.CANCEL, str(job)))
        else:
            assert result is CancelResult.NOT_CANCELLABLE
        self.settle(exp)

    @has_jobs
    @rule(pick=TARGET)
    def requeue(self, pick):
        pre, now = self.db, self.now
        job = self.pick_target(pick, {_S.DEAD_LETTERED, _S.QUARANTINED})
        result = store.requeue(job, actor=ACTOR, now=now)
        row = pre.rows.get(job)
        exp = Expect()
        event(f"requeue: {result.name}")
        if row is not None and row["state"] in (_S.DEAD_LETTERED, _S.QUARANTINED):
            assert result is RequeueResult.REQUEUED
            exp.change(
                pre,
                job,
                Entry(_S.SCHEDULED, 0, frozenset({ACTOR})),
                state=_S.SCHEDULED,
                attempt=0,
                due_time=now,
                lease_owner=None,
                lease_expiry=None,
                cancel_requested=False,
                terminal_at=None,
                terminal_cause=None,
            )
            exp.audit.append((ACTOR, OperatorAction.REQUEUE, str(job)))
        else:
            assert result is RequeueResult.NOT_REQUEUEABLE
        self.settle(exp)

    @rule(queue=st.sampled_from(QUEUES), paused=st.sampled_from([True, False, False]))
    def pause_or_resume(self, queue, paused):
        exp = Expect()
        if paused:
            store.pause_queue(queue, actor=ACTOR, now=self.now)
        else:
            store.resume_queue(queue, actor=ACTOR, now=self.now)
        exp.audit.append(
            (ACTOR, OperatorAction.PAUSE_QUEUE if paused else OperatorAction.RESUME_QUEUE, queue)
        )
        exp.queues[queue] = (paused, self.db.queues.get(queue, (False, None))[1])
        self.settle(exp)

    @rule(queue=st.sampled_from(QUEUES), limit=st.sampled_from([None, None, 1, 2, 3, 0]))
    def set_concurrency_limit(self, queue, limit):
        exp = Expect()
        store.set_concurrency_limit(queue, limit, actor=ACTOR, now=self.now)
        exp.audit.append((ACTOR, OperatorAction.SET_CONCURRENCY_LIMIT, queue))
        exp.queues[queue] = (self.db.queues.get(queue, (False, None))[0], limit)
        # A new limit is not retroactive: it only binds once the queue is within it.
        self.within_limit.pop(queue, None)
        self.settle(exp)

    @has_jobs
    @rule(
        state_class=st.sampled_from(list(TerminalStateClass)),
        age=st.sampled_from([0, 0, 30, 600]),
        max_jobs=st.one_of(st.integers(1, 4), st.just(0)),
    )
    def purge_terminal(self, state_class, age, max_jobs):
        pre, now = self.db, self.now
        before = now - timedelta(seconds=age)
        count = store.purge_terminal(state_class, terminal_before=before, max_jobs=max_jobs)
        doomed = sorted(
            (r for r in pre.rows.values() if r["state"] in state_class.states and r["terminal_at"] <= before),
            key=lambda r: (r["terminal_at"], r["sequence"]),
        )[:max_jobs]
        assert count == len(doomed)
        event(f"purge: {min(count, 2)}+ jobs")
        exp = Expect(deleted={r["job_id"] for r in doomed})
        self.leases = [lease for lease in self.leases if lease[0] not in exp.deleted]
        self.settle(exp)

    @precondition(lambda self: len(self.leases) > 40)
    @rule()
    def forget_old_leases(self):
        self.leases = self.leases[-20:]

    # -- invariants over the whole database --

    @invariant()
    def transition_logs_are_legal_chains(self):
        for job, row in self.db.rows.items():
            log = self.db.log.get(job, [])
            assert log, f"job {job} has no transition log"
            ordinals = [e[0] for e in log]
            assert ordinals == list(range(row["next_ordinal"] - len(log), row["next_ordinal"])), (
                job,
                ordinals,
            )
            assert len(log) <= MAX_TRANSITIONS
            states = [_S(e[1]) for e in log]
            if ordinals[0] == 0:
                assert is_legal_edge(None, states[0]), (job, states)
            for before, after in itertools.pairwise(states):
                assert is_legal_edge(before, after), (job, before, after, states)
            assert states[-1] == row["state"], (job, states, row["state"])
            assert log[-1][2] == row["attempt"], (job, log[-1], row["attempt"])

    @invariant()
    def row_fields_match_their_state(self):
        for job, row in self.db.rows.items():
            state = _S(row["state"])
            assert 0 <= row["attempt"] <= row["max_attempts"], (job, row["attempt"], row["max_attempts"])
            assert (row["terminal_at"] is not None) == state.is_terminal, (job, state, row["terminal_at"])
            if not state.is_terminal or state == _S.SUCCEEDED:
                assert row["terminal_cause"] is None, (job, state, row["terminal_cause"])
            leased = state == _S.LEASED
            assert (row["lease_owner"] is not None, row["lease_expiry"] is not None) == (leased, leased), (
                job,
                row,
            )
            if state not in (_S.AWAITING_PARENT, _S.CANCELLED):
                assert row["parents_remaining"] == 0, (job, state, row["parents_remaining"])

    @invariant()
    def awaiting_jobs_are_gated_by_live_parents(self):
        rows = self.db.rows
        for parent, child in self.db.edges:
            assert not is_terminal(rows[parent]["state"]), f"edge from terminal parent {parent} to {child}"
        for job, row in rows.items():
            if row["state"] == _S.AWAITING_PARENT:
                gating = [p for p, c in self.db.edges if c == job]
                assert gating, f"Awaiting Parent job {job} has no gating parent"
                assert row["parents_remaining"] == len(gating) > 0, (job, row["parents_remaining"], gating)

    @invariant()
    def limited_queues_stay_within_their_limits(self):
        for queue, (_paused, limit) in self.db.queues.items():
            if limit is None:
                continue
            leased = sum(r["queue"] == queue and r["state"] == _S.LEASED for r in self.db.rows.values())
            if leased <= limit:
                self.within_limit[queue] = True
            elif self.within_limit.get(queue):
                raise AssertionError(f"queue {queue} went over its limit {limit}: {leased} Leased")


def _machine_settings(max_examples: int) -> Any:
    return settings(
        max_examples=max_examples,
        stateful_step_count=40,
        deadline=None,
        suppress_health_check=[
            HealthCheck.too_slow,
            HealthCheck.filter_too_much,
            HealthCheck.data_too_large,
        ],
    )


#: Examples per database. PostgreSQL's leg draws the most: it runs the machine on both store
#: paths (its fast path and the portable one that SQLite and MariaDB run), and again below with
#: each call a transaction of its own. The SQLite and MariaDB legs check that their databases
#: keep the same rules on the portable path: fewer draws of the same rules do that, and keep the
#: legs short (scripts/run_tests.sh says what each leg runs).
EXAMPLES = {"postgresql": 70, "sqlite": 60, "mysql": 30}


@pytest.mark.django_db
def test_store_state_machine():
    run_state_machine_as_test(StoreMachine, settings=_machine_settings(EXAMPLES.get(connection.vendor, 70)))


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_store_state_machine_with_each_call_a_transaction_of_its_own():
    # Outside any transaction the claims and outcome batches on PostgreSQL are pipelined
    # (pipeline mode, see store.md); the same machine checks that path.
    run_state_machine_as_test(StoreMachine, settings=_machine_settings(40))
