"""The job the benchmarks run: it does nothing, so what is measured is the machinery around it."""

from __future__ import annotations

from backwave_django import job


@job("bench.noop")
def noop() -> None:
    pass
