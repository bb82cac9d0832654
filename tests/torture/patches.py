"""Patches the torture app installs in its worker processes (never in the product code).

Always: **duplicate delivery.** Now and then a worker sends the same outcome batch a second
time right after the first, as a worker would after losing the acknowledgement of a committed
write. The lease fence must turn the repeat into ``STALE_LEASE``; the auditor sees any
double-applied outcome in the transition log.

``--sabotage fence``: the PostgreSQL outcome statement's fence predicate is replaced by ``TRUE``,
so stale and repeated reports apply. The self-test requires the audit to go red under it.

``--clock-skew S``: the first worker's clock runs S seconds behind the others' (``clock.now``, the
one clock the worker reads instants from), as on a host whose clock is off. Limits must stay
exact in recorded time whatever the clocks (docs/flow-control.md); leases and fences must too.

``--sabotage limits``: the flow claim's admission test is skipped: every bucket is counted as
having unbounded room (``store.flow.bucket_room``), so the claim takes a limited job whatever its
buckets already hold. Slots and starts are still written. The self-test requires the flow oracles
(tests/torture/flow_audit.py) to go red under it.
"""

from __future__ import annotations

import inspect
import os
import random
import re
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from backwave_django import store
from backwave_django.core.outcomes import OutcomeReport
from backwave_django.core.states import OutcomeResult
from backwave_django.store.postgres import outcomes as store_outcomes

from .apps import CLOCK_SKEW_ENV, DUPLICATE_DELIVERY_ENV

#: Chance that a worker sends an outcome batch twice (the runner's --duplicate-delivery).
DUPLICATE_DELIVERY_P = 0.1
SABOTAGES = ("fence", "limits")
#: The fence of store.postgres.outcomes.REPORT: Leased, same owner and attempt, lease still live.
_FENCE = re.compile(
    r"\(j\.state = 2 AND j\.lease_owner = i\.worker_id AND j\.attempt = i\.attempt\s+AND j\.lease_expiry > %\(now\)s\)"
)


class SabotageError(RuntimeError):
    """The sabotage could not be applied (the store changed shape): the self-test must not pass vacuously."""


def install(*, sabotage: str) -> None:
    if sabotage and sabotage not in SABOTAGES:
        raise SabotageError(f"unknown sabotage {sabotage!r}; known: {', '.join(SABOTAGES)}")
    if sabotage == "fence":
        disable_fence()
    if sabotage == "limits":
        disable_limits()
    skew = float(os.environ.get(CLOCK_SKEW_ENV) or 0.0)
    if skew:
        skew_clock(skew)
    probability = float(os.environ.get(DUPLICATE_DELIVERY_ENV) or DUPLICATE_DELIVERY_P)
    install_duplicate_delivery(random.Random(os.getpid()), probability)


def disable_fence() -> None:
    sql = store_outcomes.REPORT
    if not _FENCE.search(sql):
        raise SabotageError("store.postgres.outcomes.REPORT no longer contains the expected fence predicate")
    store_outcomes.REPORT = _FENCE.sub("TRUE", sql)


def skew_clock(seconds: float) -> None:
    from django.utils import timezone

    from backwave_django import clock

    offset = timedelta(seconds=seconds)

    def skewed() -> datetime:
        return timezone.now() + offset

    clock.now = skewed


def disable_limits() -> None:
    from backwave_django.store import flow

    counted = getattr(flow, "bucket_room", None)
    if counted is None or "bucket_room(" not in inspect.getsource(flow.pick):
        raise SabotageError("store.flow.pick no longer counts the buckets' room with bucket_room")

    def unbounded(buckets: Sequence[tuple[str, str]], bounds: Any, usage: Any) -> dict[Any, None]:
        return dict.fromkeys(buckets)

    setattr(flow, "bucket_room", unbounded)  # noqa: B010  (a name the module imports, not one it exports)


def install_duplicate_delivery(dice: random.Random, probability: float) -> None:
    original = store.report_outcomes

    def report_outcomes(reports: Sequence[OutcomeReport], *, now: datetime) -> list[OutcomeResult]:
        results = original(reports, now=now)
        if reports and dice.random() < probability:
            original(reports, now=now)
        return results

    patched: Any = report_outcomes
    store.report_outcomes = patched
