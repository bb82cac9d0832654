"""Jobs the worker tests run (discovered like any app's jobs.py)."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

from backwave_django import Discard, JobContext, Limit, Snooze, current_job, job

from . import harness_jobs  # noqa: F401  (the virtual-time harness tests' jobs register here too)

if os.environ.get("BACKWAVE_TEST_OBSERVERS") == "1":
    from . import worker_observers  # noqa: F401  (observers for the worker's observer tests)

if os.environ.get("BACKWAVE_TEST_FLOW") == "1":
    from . import flow_jobs  # noqa: F401  (limited and partitioned jobs for the worker's flow tests)


def _mark(path: str | None, token: str) -> None:
    if path:
        with Path(path).open("a") as handle:
            handle.write(f"{token} {os.getpid()}\n")


@job("test.echo")
def echo(*args: object, **kwargs: object) -> dict[str, object]:
    return {"args": list(args), "kwargs": kwargs}


@job("test.flaky", max_attempts=3, backoff=[0], takes_context=True)
def flaky(ctx: JobContext, fail_until: int) -> int:
    if ctx.attempt < fail_until:
        raise RuntimeError(f"flaky attempt {ctx.attempt}")
    return ctx.attempt


@job("test.always-fails", max_attempts=2, backoff=[0])
def always_fails() -> None:
    raise ValueError("gateway timeout")


@job("test.sleep", takes_context=True, queue="slow")
def sleep(ctx: JobContext, seconds: float, marker: str | None = None) -> str:
    _mark(marker, f"start {ctx.job_id} {ctx.attempt}")
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        ctx.raise_if_cancelled()
        time.sleep(0.02)
    _mark(marker, f"done {ctx.job_id} {ctx.attempt}")
    return "slept"


@job("test.async-sleep", takes_context=True, queue="slow")
async def async_sleep(ctx: JobContext, seconds: float) -> str:
    await asyncio.sleep(seconds)
    return f"async {ctx.attempt}"


@job("test.tagger", takes_context=True, tags=["from-definition"])
def tagger(ctx: JobContext) -> None:
    ctx.add_tag("tenant", "acme")
    ctx.add_label("seen")


@job("test.big-output")
def big_output() -> str:
    return "x" * 70_000


@job("test.parent-reader", takes_context=True)
def parent_reader(ctx: JobContext, parent: str) -> object:
    import uuid

    return {"parent": ctx.parent_output(uuid.UUID(parent))}


@job("test.record")
def record(path: str, token: str) -> None:
    _mark(path, token)


@job("test.weighted-a", queue="wa")
def weighted_a(path: str) -> None:
    _mark(path, "wa")


@job("test.weighted-b", queue="wb")
def weighted_b(path: str) -> None:
    _mark(path, "wb")


@job("test.set-output", max_attempts=1)
def set_output() -> object:
    return {1, 2}


# --- Handlers that decide their outcome, run past their time limit, report progress ----------------


@job("test.busy", queue="slow", max_attempts=2, backoff=[0])
def busy(seconds: float, marker: str | None = None) -> str:
    """Keeps the interpreter busy (so a timeout's asynchronous exception lands at once)."""
    _mark(marker, "start")
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        sum(range(100))
    return "finished"


@job("test.blocked", queue="slow", max_attempts=1)
def blocked(seconds: float) -> str:
    """Blocked in C (a sleep): a timeout cannot interrupt it, only abandon it."""
    time.sleep(seconds)
    return "woke"


@job("test.async-busy", queue="slow", max_attempts=2, backoff=[0])
async def async_busy(seconds: float) -> str:
    await asyncio.sleep(seconds)
    return "finished"


@job("test.snoozer", takes_context=True, max_attempts=1)
def snoozer(ctx: JobContext, times: int, delay: float) -> int:
    if ctx.attempt <= times:
        raise Snooze(delay)
    return ctx.attempt


@job("test.discarder", max_attempts=5)
def discarder(reason: str) -> None:
    raise Discard(reason)


@job("test.picky", max_attempts=5, backoff=[0], retry_on=[ConnectionError], discard_on=[LookupError])
def picky(kind: str) -> None:
    raise {"connection": ConnectionError, "lookup": KeyError, "value": ValueError}[kind](kind)


@job("test.progress", queue="slow")
def progress(steps: int, pause: float) -> str:
    context = current_job()
    assert context is not None
    for step in range(1, steps + 1):
        time.sleep(pause)
        context.set_progress(step, steps, note=f"step {step}")
    return "done"


@job("test.watch-cancel", queue="slow")
def watch_cancel(seconds: float) -> str:
    """Loops until cancelled, with no context argument: it finds its job through current_job()."""
    context = current_job()
    assert context is not None
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        context.raise_if_cancelled()
        time.sleep(0.01)
    return "never cancelled"


@job("test.swallows-timeout", queue="slow")
def swallows_timeout() -> str:
    try:
        while True:
            sum(range(100))
    except BaseException:  # a handler that catches everything, JobTimeout included
        return "carried on"


# --- Flow control (docs/flow-control.md): jobs under limits and partitions --------------------


@job("test.limited-sync", limits=[Limit("customer-sync", concurrency=1, key="customer_id")])
def limited_sync(customer_id: str, seconds: float = 0.0, marker: str | None = None) -> str:
    """At most one Leased per customer: marks ``start``/``end <customer>`` in ``marker`` around a sleep."""
    _mark(marker, f"start {customer_id}")
    time.sleep(seconds)
    _mark(marker, f"end {customer_id}")
    return customer_id


@job("test.rated-call", limits=[Limit("payment-api", rate=5, period=1.0)])
def rated_call(account: str, marker: str | None = None) -> str:
    """At most 5 claims per second in all, whatever the account: marks ``call <account>``."""
    _mark(marker, f"call {account}")
    return account


@job("test.tenant-import", partition="tenant")
def tenant_import(tenant: str, n: int) -> int:
    """Claimed round-robin across tenants (fair dispatch)."""
    return n
