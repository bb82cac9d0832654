"""Django Tasks (``@task``) run by the BackWave backend in tests/tasks.

Needs Django 6.0+: only tests/tasks (which skip on 5.2) and their worker subprocesses import it.
The ``@task(...)`` keyword options are Django 6.1's pass-through to the backend's ``task_class``;
django-stubs does not model them yet, hence the ``type: ignore`` comments.
"""

from __future__ import annotations

import asyncio

from django.tasks import TaskContext, task


@task
def add(a: int, b: int) -> int:
    return a + b


@task
def echo(*args: object, **kwargs: object) -> dict[str, object]:
    return {"args": list(args), "kwargs": kwargs}


@task(queue_name="emails")
def send_email(address: str) -> dict[str, str]:
    return {"sent": address}


@task(  # type: ignore[call-overload, untyped-decorator]
    wire_name="test.tasks.flaky",
    max_attempts=3,
    backoff=[0],
    tags=["from-task", ("team", "qa")],
    takes_context=True,
)
def flaky(context: TaskContext, fail_until: int) -> int:
    if context.attempt < fail_until:
        raise RuntimeError(f"flaky attempt {context.attempt}")
    return context.attempt


@task(max_attempts=2, backoff=[0])  # type: ignore[call-overload, untyped-decorator]
def always_fails() -> None:
    raise ValueError("gateway timeout")


@task
async def async_double(x: int) -> int:
    await asyncio.sleep(0)
    return 2 * x


@task(takes_context=True)
def whoami(context: TaskContext) -> dict[str, object]:
    result = context.task_result
    return {"id": result.id, "attempt": context.attempt, "worker_ids": list(result.worker_ids)}


@task(timeout=0.3, max_attempts=1)  # type: ignore[call-overload, untyped-decorator]
def spins(seconds: float) -> str:
    import time

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        sum(range(100))
    return "done"


@task(discard_on=[LookupError])  # type: ignore[call-overload, untyped-decorator]
def looks_up(key: str) -> None:
    raise KeyError(key)


@task
def snoozes() -> None:
    from backwave_django import Snooze

    raise Snooze(60)
