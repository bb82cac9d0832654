"""PostgreSQL's side of the flow claim (``store/flow.py``; statements in ``sql/flow.sql``): the
lanes by a loose index scan, the buckets' advisory locks, each lane's due jobs, and the lease of
the chosen ones by :data:`FLOW_LEASE`, which writes them as ``CLAIM`` writes its own."""

from __future__ import annotations

import json
import zlib
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from ...core.fairness import Bucket, Candidate
from ...core.limits import PLAIN_LANE, LimitKeys
from .connection import fetch_bound
from .statements import statement

FLOW_LANES = statement("FLOW_LANES")
LOCK_BUCKETS = statement("LOCK_BUCKETS")
FLOW_FETCH_LANE = statement("FLOW_FETCH_LANE")
FLOW_FETCH_PLAIN = statement("FLOW_FETCH_PLAIN")
#: Lease the chosen jobs (see its comment in sql/flow.sql).
FLOW_LEASE = statement("FLOW_LEASE")
HAS_FLOW_JOBS = statement("HAS_FLOW_JOBS")


def bucket_key(bucket: Bucket) -> int:
    """A bucket's advisory-lock key: the CRC32 of its limit name and bucket, shifted to fit int4."""
    name, key = bucket
    return zlib.crc32(f"{name}\x1f{key}".encode()) - 0x8000_0000


class PostgresFlowReads:
    """``store.flow.FlowReads`` on PostgreSQL; a job is kept as its sequence (leased by FLOW_LEASE)."""

    def lanes(self, using: str, queue: str) -> list[tuple[int, LimitKeys]]:
        rows = fetch_bound(using, FLOW_LANES, {"queue": queue}, jobs=1)
        return [(lane, tuple((str(n), str(b)) for n, b in _json(keys) or ())) for lane, keys in rows]

    def lock(self, using: str, buckets: Sequence[Bucket]) -> None:
        if buckets:
            keys = sorted({bucket_key(b) for b in buckets})
            fetch_bound(using, LOCK_BUCKETS, {"bucket_keys": keys}, jobs=1)

    def fetch(
        self, using: str, queue: str, lane: int, take: int, now: datetime
    ) -> list[tuple[Candidate, int]]:
        sql = FLOW_FETCH_PLAIN if lane == PLAIN_LANE else FLOW_FETCH_LANE
        params = {"queue": queue, "lane": lane, "take": take, "now": now}
        rows = fetch_bound(using, sql, params, jobs=take)
        return [(Candidate(sequence, priority, due, lane), sequence) for sequence, priority, due in rows]


def flow_queues(using: str, queues: list[str]) -> set[str]:
    """Which of ``queues`` hold a Scheduled job of a lane above 0."""
    return set(fetch_bound(using, HAS_FLOW_JOBS, {"queues": queues}, jobs=1)[0][0])


def _json(value: Any) -> Any:
    return json.loads(value) if isinstance(value, str) else value
