"""The job the benchmarks run: it does nothing, so what is measured is the machinery around it."""

from __future__ import annotations

import os
from typing import Any

from backwave_django import JobState, TransitionEvent, job, observer

#: A worker started with this set to 1 also runs the observer below (benchmarks/observing.py).
OBSERVER_ENV = "BACKWAVE_BENCH_OBSERVER"
OBSERVER_ID = "bench.every-state"


@job("bench.noop")
def noop() -> None:
    pass


@job("bench.keyed")
def keyed(key: int) -> None:
    """A noop with an argument, for unique enqueues (each key its own identity)."""


@job("bench.with_args")
def with_args(customer_id: int, reference: str, amount: float, options: dict[str, Any]) -> None:
    """A noop that takes what a real job carries (benchmarks/arguments.py), for the peers step's
    rows with arguments."""


if os.environ.get(OBSERVER_ENV) == "1":

    @observer(OBSERVER_ID, states=list(JobState))
    def every_state(event: TransitionEvent) -> None:
        """Subscribed to every transition, and does nothing: what is measured is the delivery."""


if os.environ.get("BACKWAVE_BENCH_FLOW") == "1":  # benchmarks/flow.py FLOW_ENV
    from . import flow_jobs  # noqa: F401  (the flow step's limited noops)
