"""The flow-control benchmark's jobs (benchmarks/flow.py): noops under a limit.

Imported by ``benchmarks/jobs.py`` only in processes started with ``BACKWAVE_BENCH_FLOW=1``
(``FLOW_ENV`` in benchmarks/flow.py: the flow step's workers), and by the flow step itself, so no
other measurement's workers declare these limits or claim any differently because of them.
"""

from __future__ import annotations

from backwave_django import Limit, job

#: A concurrency far above any worker's slots: the limit is checked on every claim, never binds.
LOOSE_CONCURRENCY = 10_000
#: A rate that binds: far below what a worker does on noops.
PACED_RATE = 200
PACED_PERIOD = 1.0


@job("bench.loose", limits=[Limit("bench-loose", concurrency=LOOSE_CONCURRENCY)])
def loose() -> None:
    """A noop under a concurrency limit that never binds."""


@job("bench.paced", limits=[Limit("bench-paced", rate=PACED_RATE, period=PACED_PERIOD)])
def paced() -> None:
    """A noop under a rate limit that binds."""
