"""The torture handlers. They leave evidence (an execution journal line per attempt) and behave
randomly but reproducibly: the dice are seeded by (seed, job id, attempt).

``ms`` is the work time; ``fail_p`` the chance an attempt raises; ``long_ms`` (rare) keeps a job
running past several heartbeats, so a worker that is SIGSTOPped or killed meanwhile loses the
lease to expiry. ``snooze_p`` and ``discard_p`` are the chances an attempt raises ``Snooze`` or
``Discard``; ``spin_ms`` keeps the interpreter busy after the work (a job enqueued with a shorter
``timeout`` is then stopped by the worker's watchdog). Every handler polls the cancel flag, so
operator cancels of running jobs end Cancelled.

Two observers (:data:`OBSERVERS`) journal every delivery, so the audit can show that each matching
log entry was delivered at least once, in order, none skipped; one of them fails now and then.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import time
from typing import Any

from backwave_django import Discard, JobContext, JobState, Limit, Snooze, TransitionEvent, job, observer

#: Where handlers append their execution records (one file per worker process).
EXEC_LOG_ENV = "BACKWAVE_TORTURE_EXEC_LOG"
WIRE = "torture.work"
ASYNC_WIRE = "torture.work-async"
#: Registered nowhere: jobs enqueued under it must be Quarantined, never executed.
UNREGISTERED_WIRE = "torture.unregistered"
#: Registered, but every torture job of it carries a payload that does not bind (an argument the
#: handler does not take): Quarantined with the "no longer decodes" cause, never executed.
STRICT_WIRE = "torture.strict"
UNROUTABLE_WIRES = frozenset({UNREGISTERED_WIRE, STRICT_WIRE})
MAX_ATTEMPTS = 4
BACKOFF = [0.2, 0.5, 1.0]


def _record(ctx: JobContext) -> None:
    base = os.environ.get(EXEC_LOG_ENV)
    if not base:
        return
    line = json.dumps(
        {"op": "exec", "job": str(ctx.job_id), "attempt": ctx.attempt, "pid": os.getpid(), "t": time.time()}
    )
    with open(f"{base}.{os.getpid()}", "a") as handle:
        handle.write(line + "\n")


def _dice(ctx: JobContext, seed: int) -> random.Random:
    return random.Random(f"{seed}:{ctx.job_id}:{ctx.attempt}")


def _plan(ctx: JobContext, seed: int, ms: int, fail_p: float, long_ms: int) -> tuple[float, bool]:
    dice = _dice(ctx, seed)
    duration = (long_ms if long_ms else ms) / 1000.0
    return duration * (0.5 + dice.random()), dice.random() < fail_p


def _decide(ctx: JobContext, seed: int, snooze_p: float, discard_p: float) -> None:
    """Raise Snooze or Discard when the dice say so (independent of the failure dice)."""
    dice = random.Random(f"{seed}:{ctx.job_id}:{ctx.attempt}:decide")
    roll = dice.random()
    if roll < snooze_p:
        raise Snooze(0.2)
    if roll < snooze_p + discard_p:
        raise Discard(f"torture discard on attempt {ctx.attempt}")


def _spin(ctx: JobContext, spin_ms: int) -> None:
    """Busy Python work the watchdog can interrupt (no sleep: a timeout lands at once)."""
    deadline = time.monotonic() + spin_ms / 1000.0
    while time.monotonic() < deadline:
        sum(range(50))


def _finish(ctx: JobContext, seed: int, fail: bool, tag: bool) -> dict[str, Any] | None:
    if fail:
        raise RuntimeError(f"torture failure on attempt {ctx.attempt}")
    if tag:
        ctx.add_tag("attempt", str(ctx.attempt))
        ctx.add_label("done")
    return {"attempt": ctx.attempt} if _dice(ctx, seed).random() < 0.2 else None


def _work(
    ctx: JobContext,
    seed: int,
    ms: int,
    fail_p: float,
    long_ms: int,
    tag: bool,
    snooze_p: float,
    discard_p: float,
    spin_ms: int,
) -> dict[str, Any] | None:
    _record(ctx)
    duration, fail = _plan(ctx, seed, ms, fail_p, long_ms)
    deadline = time.monotonic() + duration
    while time.monotonic() < deadline:
        ctx.raise_if_cancelled()
        time.sleep(min(0.02, max(deadline - time.monotonic(), 0)))
    ctx.raise_if_cancelled()
    _decide(ctx, seed, snooze_p, discard_p)
    _spin(ctx, spin_ms)
    return _finish(ctx, seed, fail, tag)


@job(WIRE, queue="torture-a", max_attempts=MAX_ATTEMPTS, backoff=BACKOFF, takes_context=True)
def work(
    ctx: JobContext,
    seed: int = 0,
    ms: int = 20,
    fail_p: float = 0.2,
    long_ms: int = 0,
    tag: bool = False,
    snooze_p: float = 0.0,
    discard_p: float = 0.0,
    spin_ms: int = 0,
) -> dict[str, Any] | None:
    return _work(ctx, seed, ms, fail_p, long_ms, tag, snooze_p, discard_p, spin_ms)


@job(ASYNC_WIRE, queue="torture-a", max_attempts=MAX_ATTEMPTS, backoff=BACKOFF, takes_context=True)
async def work_async(
    ctx: JobContext,
    seed: int = 0,
    ms: int = 20,
    fail_p: float = 0.2,
    long_ms: int = 0,
    tag: bool = False,
    snooze_p: float = 0.0,
    discard_p: float = 0.0,
    spin_ms: int = 0,
) -> dict[str, Any] | None:
    _record(ctx)
    duration, fail = _plan(ctx, seed, ms, fail_p, long_ms)
    await asyncio.sleep(duration)  # an operator cancel cancels the task
    _decide(ctx, seed, snooze_p, discard_p)
    await asyncio.sleep(spin_ms / 1000.0)  # a timeout cancels the task here
    return _finish(ctx, seed, fail, tag)


# --- Flow control: limited and partitioned jobs (docs/flow-control.md) -------------------------
#
# A keyed concurrency limit with a few buckets, a whole-limit concurrency limit shared by jobs of
# two queues, a keyed rate limit (its jobs are under the shared limit too, so a claim must pass
# both), and a partitioned job. The audit (flow_audit.py) holds the log to these bounds, so they
# are declared here once and read by the runner.

KEYED = Limit("torture-keyed", concurrency=2, key="bucket")
SHARED = Limit("torture-shared", concurrency=3)
RATED = Limit("torture-rated", rate=3, period=2.0, key="bucket")
FLOW_LIMITS = (KEYED, SHARED, RATED)
KEYED_BUCKETS = ("k0", "k1", "k2")
RATED_BUCKETS = ("r0", "r1")
TENANTS = ("t0", "t1", "t2", "t3")


@job(
    "torture.keyed",
    queue="torture-a",
    max_attempts=MAX_ATTEMPTS,
    backoff=BACKOFF,
    takes_context=True,
    limits=[KEYED],
)
def keyed(
    ctx: JobContext,
    bucket: str,
    seed: int = 0,
    ms: int = 20,
    fail_p: float = 0.2,
    long_ms: int = 0,
    tag: bool = False,
    snooze_p: float = 0.0,
    discard_p: float = 0.0,
    spin_ms: int = 0,
) -> dict[str, Any] | None:
    return _work(ctx, seed, ms, fail_p, long_ms, tag, snooze_p, discard_p, spin_ms)


@job(
    "torture.shared",
    queue="torture-a",
    max_attempts=MAX_ATTEMPTS,
    backoff=BACKOFF,
    takes_context=True,
    limits=[SHARED],
)
def shared(
    ctx: JobContext,
    seed: int = 0,
    ms: int = 20,
    fail_p: float = 0.2,
    long_ms: int = 0,
    tag: bool = False,
    snooze_p: float = 0.0,
    discard_p: float = 0.0,
    spin_ms: int = 0,
) -> dict[str, Any] | None:
    return _work(ctx, seed, ms, fail_p, long_ms, tag, snooze_p, discard_p, spin_ms)


@job(
    "torture.rated",
    queue="torture-b",
    max_attempts=MAX_ATTEMPTS,
    backoff=BACKOFF,
    takes_context=True,
    limits=[RATED, SHARED],
)
def rated(
    ctx: JobContext,
    bucket: str,
    seed: int = 0,
    ms: int = 20,
    fail_p: float = 0.2,
    long_ms: int = 0,
    tag: bool = False,
    snooze_p: float = 0.0,
    discard_p: float = 0.0,
    spin_ms: int = 0,
) -> dict[str, Any] | None:
    return _work(ctx, seed, ms, fail_p, long_ms, tag, snooze_p, discard_p, spin_ms)


@job(
    "torture.tenant",
    queue="torture-b",
    max_attempts=MAX_ATTEMPTS,
    backoff=BACKOFF,
    takes_context=True,
    partition="tenant",
)
def tenant_work(
    ctx: JobContext,
    tenant: str,
    seed: int = 0,
    ms: int = 20,
    fail_p: float = 0.2,
    long_ms: int = 0,
    tag: bool = False,
    snooze_p: float = 0.0,
    discard_p: float = 0.0,
    spin_ms: int = 0,
) -> dict[str, Any] | None:
    return _work(ctx, seed, ms, fail_p, long_ms, tag, snooze_p, discard_p, spin_ms)


@job(STRICT_WIRE, queue="torture-a", takes_context=True)
def strict(ctx: JobContext, seed: int = 0) -> None:
    _record(ctx)  # never reached: the payloads enqueued for it do not bind


# --- Observers: every delivery leaves a journal line, some fail and are retried ---------------

#: Observer id → (the states it subscribes to, the wire name it is narrowed to or None).
OBSERVERS: dict[str, tuple[frozenset[int], str | None]] = {
    "torture.every-transition": (frozenset(int(s) for s in JobState), None),
    "torture.work-ends": (frozenset({int(JobState.SUCCEEDED), int(JobState.DEAD_LETTERED)}), WIRE),
}
#: The chance one delivery attempt of the every-transition observer raises (it is then retried).
OBSERVER_FAIL_P = 0.05


def _observed(observer_id: str, event: TransitionEvent, did: str) -> None:
    base = os.environ.get(EXEC_LOG_ENV)
    if not base:
        return
    line = json.dumps(
        {
            "op": "observed",
            "observer": observer_id,
            "position": event.position,
            "job": str(event.job_id),
            "ordinal": event.ordinal,
            "state": int(event.state),
            "did": did,
            "pid": os.getpid(),
            "t": time.time(),
        }
    )
    with open(f"{base}.{os.getpid()}", "a") as handle:
        handle.write(line + "\n")


@observer("torture.every-transition", states=list(JobState))
def every_transition(event: TransitionEvent) -> None:
    attempt = getattr(event, "delivery_attempt", 1)
    if random.Random(f"{event.position}:{attempt}:observe").random() < OBSERVER_FAIL_P:
        _observed("torture.every-transition", event, "fail")
        raise RuntimeError(f"torture observer failure on delivery attempt {attempt}")
    _observed("torture.every-transition", event, "ok")


@observer("torture.work-ends", states=[JobState.SUCCEEDED, JobState.DEAD_LETTERED], wire_name=WIRE)
async def work_ends(event: TransitionEvent) -> None:
    _observed("torture.work-ends", event, "ok")
