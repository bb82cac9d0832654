"""A rate limit across clocks (docs/flow-control.md): a claim at ``now`` counts the bucket's starts
after ``now - period`` with no upper bound, so it is exact in recorded time even when a worker's
clock is behind another's, or a worker read its clock before another worker's claim committed.

The claim also drops starts no window can count any more, but only those older than the longest
period and a margin for clocks that disagree (``core.limits.CLOCK_MARGIN_SECONDS``): dropping them
by the claiming worker's own ``now - period`` alone would lose starts that a claim stamped earlier
still has to count.
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from backwave_django.core.limits import LimitValues

from ..conftest import T0, lease
from .flow_jobs import declare, enqueue_flow

pytestmark = pytest.mark.django_db

SECOND = timedelta(seconds=1)


def test_a_claim_stamped_before_a_later_claims_prune_still_counts_its_whole_window() -> None:
    declare(api=LimitValues(None, 2, 1.0))
    for _ in range(4):
        enqueue_flow(keys=(("api", ""),), now=T0 - 5 * SECOND)
    assert len(lease(now=T0, max_jobs=1)) == 1
    assert len(lease(now=T0 + 0.1 * SECOND, max_jobs=1)) == 1
    # A worker whose clock is ahead (or that simply claims later) drops the starts at T0, T0 + 0.1.
    assert len(lease(now=T0 + 1.2 * SECOND, max_jobs=1)) == 1
    # A worker that read its clock at T0 + 0.3: its window (T0 - 0.7, T0 + 0.3] already holds the
    # two starts at T0 and T0 + 0.1, so the rate of 2 holds it back.
    assert lease(now=T0 + 0.3 * SECOND, max_jobs=1) == []
