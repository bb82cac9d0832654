"""Jobs the worker tests run (discovered like any app's jobs.py)."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

from backwave_django import JobContext, job

from . import harness_jobs  # noqa: F401  (the virtual-time harness tests' jobs register here too)


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
