"""The keyword arguments of the peers step's jobs with arguments (benchmarks/peers.py): what a real
job carries, the same for every queue. Django-free: the peers' modules import it too.

Four keyword arguments a job, each of another JSON type: an int id, a short str, a float and a
small dict (three entries: two str, one bool). Built before the timed part, as a caller has its
data at hand; each queue then binds, encodes and stores them its own way.
"""

from __future__ import annotations

from typing import Any


def arguments(index: int) -> dict[str, Any]:
    """The keyword arguments of job number ``index``."""
    return {
        "customer_id": 100_000 + index,
        "reference": f"order-{index:06d}",
        "amount": 19.5 + index % 100,
        "options": {"currency": "EUR", "channel": "web", "notify": index % 2 == 0},
    }


def calls(n: int) -> list[dict[str, Any]]:
    """The keyword arguments of ``n`` jobs."""
    return [arguments(index) for index in range(n)]
