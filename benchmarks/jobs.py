"""The job the benchmarks run: it does nothing, so what is measured is the machinery around it."""

from __future__ import annotations

from backwave_django import job


@job("bench.noop")
def noop() -> None:
    pass


@job("bench.keyed")
def keyed(key: int) -> None:
    """A noop with an argument, for unique enqueues (each key its own identity)."""
