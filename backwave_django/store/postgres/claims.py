"""PostgreSQL's path of the claim (``backends.Claims``): one :data:`CLAIM` statement per queue
(``sql/claims.sql``).

* As a transaction of its own (the worker's case): :func:`_claim_pipelined` sends the queue locks
  and one :data:`CLAIM` per queue in one round trip, as one transaction.
* Inside the caller's transaction, or for a queue with a concurrency limit: the queue gates read
  exactly (``store.claims.queue_gates``, after :func:`_open_claim`), then one :data:`CLAIM` per queue.
* A queue holding jobs under limits or partitions (a lane above 0) takes nothing in the
  pipeline, which reports it; the flow claim serves it (``store/flow.py``): as a transaction of its
  own (``flow_claim.claim_flow_alone``; the next claim starts with it while the queue keeps such
  jobs: ``flow_claim.flowing``), or on the exact path (``flow_claim.claim_flow``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from datetime import datetime
from typing import Any

from django.db import connections

from ...conf import BackWaveSettings
from ...core.claim_floors import ClaimFloors, FloorBounds
from ...core.outcomes import ClaimedJob
from ...core.states import HistoryPolicy
from .._tx import atomic_retrying, retrying
from ..claims import QueueOptions, queue_gates, within_gate
from . import flow_claim
from .claimed import claimed_jobs
from .connection import fetch_bound, own_transaction, pipelined_transaction
from .flow import flow_queues
from .flow_claim import claim_flow, claim_flow_alone
from .queues import LOCK_QUEUES_SHARED, PIPELINED_SETTINGS, queue_keys
from .statements import statement

#: Lease up to ``take`` due jobs of one queue (see its comment in sql/claims.sql).
CLAIM = statement("CLAIM")
#: Open a claim's transaction: take the queues' shared locks, then read their settings, whose
#: snapshot is taken after the locks were acquired (two statements, one round trip).
OPEN_CLAIM = f"{LOCK_QUEUES_SHARED};\n{statement('READ_QUEUE_SETTINGS')}"
#: The same for a claim that is its own transaction: it also commits without waiting for the WAL
#: flush and runs :data:`CLAIM` on its generic plan (see :func:`_open_claim`).
OPEN_CLAIM_OWN = f"{statement('CLAIM_OWN_SETTINGS')}\n{OPEN_CLAIM}"
#: The second statement of a pipelined claim, after its settings (``queues.PIPELINED_SETTINGS``):
#: its locks and reads.
PIPELINED_OPEN = statement("PIPELINED_OPEN")


class PostgresClaims:
    """PostgreSQL's path of ``backends.Claims``."""

    def claim(
        self,
        using: str,
        served: list[str],
        limit: int,
        *,
        worker_id: str,
        expiry: datetime,
        now: datetime,
        settings: BackWaveSettings,
        floors: ClaimFloors | None = None,
    ) -> list[ClaimedJob]:
        # A claim that is its own transaction commits without waiting for the disk (see _open_claim).
        alone = own_transaction(using)
        # Floors are the worker's, for claims that are transactions of their own: inside the
        # caller's transaction, a claim's leases may yet be rolled back.
        floored = _Floored(floors if alone else None, now)
        head: list[ClaimedJob] = []
        if alone:
            served, head = self._claim_alone(
                using,
                served,
                limit,
                lambda take: _claim_params(take, worker_id, expiry, now, settings),
                floored,
            )
            if not served or len(head) >= limit:
                return head
            limit -= len(head)

        def body() -> tuple[list[ClaimedJob], list[_Read]]:
            gates = queue_gates(using, served, _open_claim(using, served, async_commit=alone))
            flowing = flow_queues(using, served)
            claimed: list[ClaimedJob] = []
            reads: list[_Read] = []
            for queue in served:
                take = within_gate(limit - len(claimed), gates[queue])
                if take <= 0:
                    continue
                params = _claim_params(take, worker_id, expiry, now, settings)
                if queue in flowing:
                    claimed += claim_flow(using, queue, params)
                    continue
                bounds = floored.bounds(queue)
                rows = fetch_bound(
                    using,
                    CLAIM,
                    {**params, "queue": queue, "before": [], "through": [], **floored.params(bounds)},
                    jobs=take,
                )
                claimed += claimed_jobs(rows, worker_id, expiry)
                reads.append((queue, bounds, rows))
            return claimed, reads

        claimed, reads = atomic_retrying(using, body)
        floored.record(reads)  # committed
        return head + claimed

    def _claim_alone(
        self,
        using: str,
        served: list[str],
        limit: int,
        params_for: Callable[[int], dict[str, Any]],
        floored: _Floored,
    ) -> tuple[list[str], list[ClaimedJob]]:
        """What a claim that is its own transaction serves in transactions of their own, queue by
        queue in order: a queue under flow control by :func:`claim_flow_alone`, a run of plain
        queues by :func:`_claim_pipelined`. Returns the queues left for the exact path (from the
        first one with a concurrency limit, or paused under flow control) and the jobs claimed."""
        head: list[ClaimedJob] = []
        queues = served
        while queues and len(head) < limit:
            queue, params = queues[0], params_for(limit - len(head))
            if (using, queue) in flow_claim.flowing:
                done = retrying(functools.partial(claim_flow_alone, using, queue, params))
                if done is None or not done[1]:  # gated (exact path), or no flow jobs left
                    flow_claim.flowing.discard((using, queue))
                if done is None:
                    return queues, head
                head += done[0]
                queues = queues[1:]
                continue
            got, stop, flowing = retrying(functools.partial(_claim_pipelined, using, queues, params, floored))
            head += got
            flow_claim.flowing.update((using, q) for q in flowing)
            if stop is None:
                return [], head
            queues = queues[stop:]
            if queues[0] not in flowing:
                return queues, head  # a queue with a concurrency limit
        return queues, head


def _claim_params(
    take: int, worker_id: str, expiry: datetime, now: datetime, settings: BackWaveSettings
) -> dict[str, Any]:
    """The parameters a claim statement shares across queues (the queue and its bounds are added)."""
    return {
        "now": now,
        "take": take,
        "worker": worker_id,
        "expiry": expiry,
        "history": settings.history is not HistoryPolicy.OFF,
        "cap": settings.max_transitions_per_job,
    }


def _open_claim(using: str, queues: list[str], *, async_commit: bool) -> QueueOptions:
    """Open a claim (see :data:`OPEN_CLAIM`) in one round trip; returns the queues' settings.

    A claim's durability is not needed for any guarantee, so its commit does not wait for the
    disk (``SET LOCAL synchronous_commit = off``, this transaction only). If PostgreSQL crashes
    and loses a claim that a worker already acted on, the job is simply Scheduled again, as if
    the claim had never happened: the worker's outcome for it is fenced off (the job is not
    Leased by it), and the job runs again, which at-least-once execution allows. Outcomes,
    enqueues and operator actions keep waiting for the flush.

    Such a claim also runs :data:`CLAIM` on its generic plan (``SET LOCAL plan_cache_mode =
    force_generic_plan``). The statement is written for that plan (see its comment), and left to
    choose, PostgreSQL keeps planning it afresh for every claim of a connection whose first
    claims found a queue empty or nearly so, as a worker started before its jobs arrive does:
    about 0.4 ms of the server's CPU per claim (docs/performance.md, "The claim's plan").

    A claim made inside the caller's own transaction leaves that transaction's settings alone
    (``async_commit=False``).
    """
    params: dict[str, Any] = {"queue_keys": queue_keys(queues), "queues": queues}
    with connections[using].cursor() as cursor:
        opening = OPEN_CLAIM_OWN if async_commit else OPEN_CLAIM
        cursor.execute(opening, params)
        for _ in range(opening.count(";")):  # to the last statement's rows: the settings
            cursor.nextset()
        return {queue: (paused, limit) for queue, paused, limit in cursor.fetchall()}


def _claim_pipelined(
    using: str, queues: list[str], common: dict[str, Any], floored: _Floored
) -> tuple[list[ClaimedJob], int | None, set[str]]:
    """A claim that is its own transaction, sent to PostgreSQL in one round trip.

    The asynchronous commit and the shared queue locks (with a look at which queues are
    limited) and one :data:`CLAIM` per queue go out together in psycopg's pipeline mode, and the
    server runs them in order; the worker waits once instead of once per statement. They need no
    ``BEGIN`` and ``COMMIT``: in a pipeline, the statements before its Sync are one transaction,
    committed at the Sync (or rolled back there, with the statements after a failed one
    skipped), and the locks and the local setting last until then (two statements fewer, for
    the client and for the server). Each claim statement works out its own batch size (paused
    queues take nothing, and later queues take what earlier ones left). Queues with a concurrency
    limit need the exact, locked count of :func:`queue_gates`, and queues under flow control the
    flow claim: the pipeline takes nothing from the first such queue on, and returns its index (and
    which queues are under flow control) so that :meth:`PostgresClaims._claim_alone` serves the rest.
    """
    with pipelined_transaction(using, jobs=common["take"]) as tx:
        settings, opening, *claims = (tx.cursor() for _ in range(2 + len(queues)))
        with tx.round_trip():  # one transaction: its Sync, at the end of the block, commits it
            settings.execute(PIPELINED_SETTINGS)
            opening.execute(PIPELINED_OPEN, {"queue_keys": queue_keys(queues), "queues": queues})
            floor_bounds = [floored.bounds(queue) for queue in queues]
            for index, (queue, claim_cursor) in enumerate(zip(queues, claims, strict=True)):
                bounds = {"queue": queue, "before": queues[:index], "through": queues[: index + 1]}
                claim_cursor.execute(CLAIM, {**common, **bounds, **floored.params(floor_bounds[index])})
        _, limited, flowing = opening.fetchone()
        worker, expiry = common["worker"], common["expiry"]
        reads = [
            (queue, bounds, c.fetchall())
            for queue, bounds, c in zip(queues, floor_bounds, claims, strict=True)
        ]
        floored.record(reads)  # committed at the round trip's Sync
        claimed = [job for _, _, rows in reads for job in claimed_jobs(rows, worker, expiry)]
    stop = next((index for index, queue in enumerate(queues) if queue in {*limited, *flowing}), None)
    return claimed, stop, set(flowing)


#: One queue's read by :data:`CLAIM`: the queue, the floors it started from and its rows.
_Read = tuple[str, FloorBounds, list[tuple[Any, ...]]]
#: A claim without floors: every level read from its head.
_FULL = FloorBounds([], [])


class _Floored:
    """A claim's use of the worker's floors (``core.claim_floors``), if it has any: where each
    queue's :data:`CLAIM` starts, and what the committed claim leased, for the next one."""

    __slots__ = ("floors", "now")

    def __init__(self, floors: ClaimFloors | None, now: datetime) -> None:
        self.floors = floors
        self.now = now

    def bounds(self, queue: str) -> FloorBounds:
        return _FULL if self.floors is None else self.floors.bounds(queue, self.now)

    @staticmethod
    def params(bounds: FloorBounds) -> dict[str, Any]:
        return {"levels": bounds.levels, "floors": bounds.floors}

    def record(self, reads: list[_Read]) -> None:
        """Call only once the claim has committed."""
        if self.floors is None:
            return
        for queue, bounds, rows in reads:
            # CLAIM's rows: due time sixth, priority last.
            self.floors.claimed(queue, bounds, self.now, ((row[-1], row[5]) for row in rows))
