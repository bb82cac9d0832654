"""Observers the worker tests register, only in worker processes started with
``BACKWAVE_TEST_OBSERVERS=1`` (every other test process runs without an observer pump).

Each appends one JSON line per delivery attempt to the file named by
``BACKWAVE_TEST_OBSERVER_LOG``: which observer, the entry's position, job, ordinal, state and the
delivery attempt, and what it did. The worker's ``job_started`` and ``job_finished`` signals are
logged to the same file (as observer ``signal.<name>``).
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

from django.dispatch import receiver

from backwave_django import JobState, TransitionEvent, observer, signals

LOG_ENV = "BACKWAVE_TEST_OBSERVER_LOG"


def _log(name: str, event: TransitionEvent, did: str) -> None:
    record = {
        "observer": name,
        "position": event.position,
        "job": str(event.job_id),
        "ordinal": event.ordinal,
        "state": event.state.name,
        "attempt": getattr(event, "delivery_attempt", 0),
        "did": did,
        "pid": os.getpid(),
    }
    with Path(os.environ[LOG_ENV]).open("a") as handle:
        handle.write(json.dumps(record) + "\n")


@observer("test.every-transition", states=list(JobState))
def every_transition(event: TransitionEvent) -> None:
    _log("test.every-transition", event, "ok")


@observer("test.flaky-finisher", states=[JobState.SUCCEEDED], wire_name="test.echo")
def flaky_finisher(event: TransitionEvent) -> None:
    if getattr(event, "delivery_attempt", 1) < 3:
        _log("test.flaky-finisher", event, "fail")
        raise RuntimeError(f"observer failure on attempt {event.delivery_attempt}")  # type: ignore[attr-defined]
    _log("test.flaky-finisher", event, "ok")


@observer("test.slow-dead-letters", states=[JobState.DEAD_LETTERED])
async def slow_dead_letters(event: TransitionEvent) -> None:
    _log("test.slow-dead-letters", event, "start")
    await asyncio.sleep(5)  # past OBSERVER_TIMEOUT in the tests: every attempt times out


def _signalled(name: str, **named: object) -> None:
    record = {
        "observer": f"signal.{name}",
        "job": str(named["job_id"]),
        "attempt": named["attempt"],
        "state": named["state"].name if "state" in named else None,  # type: ignore[attr-defined]
        "pid": os.getpid(),
    }
    with Path(os.environ[LOG_ENV]).open("a") as handle:
        handle.write(json.dumps(record) + "\n")


@receiver(signals.job_started)
def job_started(sender: object, **named: object) -> None:
    _signalled("job_started", **named)


@receiver(signals.job_finished)
def job_finished(sender: object, **named: object) -> None:
    _signalled("job_finished", **named)
