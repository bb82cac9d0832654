"""Stand-ins for the shop's external services, so the example runs offline.

They behave like the real thing where it matters for background jobs: the exchange-rate
provider fails now and then, and sales figures are stable for a given region and day (a re-run
of a report job gives the same answer, as an idempotent job should).
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass, field


class ProviderUnavailable(ConnectionError):
    """The exchange-rate provider did not answer; worth retrying later."""


@dataclass
class ExchangeRateProvider:
    """An HTTP API that times out on ``failure_rate`` of the calls."""

    failure_rate: float = 0.3
    rng: random.Random = field(default_factory=random.Random)

    def latest(self, currency: str) -> float:
        if self.rng.random() < self.failure_rate:
            raise ProviderUnavailable(f"rates.example.com did not answer for {currency} within 10 s")
        return round(0.85 + self.rng.random() * 0.3, 4)


#: The provider the jobs call; tests replace it with a deterministic one.
exchange_rates = ExchangeRateProvider()


def regional_figures(region: str, day: str) -> tuple[int, int]:
    """(orders, revenue in cents) for a region and day: a stand-in for a query on the orders table."""
    digest = hashlib.sha256(f"{region}/{day}".encode()).digest()
    orders = 40 + digest[0] % 160
    revenue_cents = orders * (1_500 + int.from_bytes(digest[1:3], "big") % 6_000)
    return orders, revenue_cents


def supplier_feed(supplier: str, day: str) -> int:
    """How many products a supplier's feed lists on a day: stable, like a file already downloaded."""
    digest = hashlib.sha256(f"feed/{supplier}/{day}".encode()).digest()
    return 20 + digest[0] % 200
