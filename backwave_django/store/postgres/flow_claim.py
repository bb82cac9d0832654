"""The flow claim on PostgreSQL (``store/flow.py`` says how it chooses; docs/store.md, "The flow
claim"): in the caller's transaction (:func:`claim_flow`, the exact path), or as a transaction of
its own in two or three round trips (:func:`claim_flow_alone`, the worker's case), all in one
pipeline whose Sync ends the transaction (no ``BEGIN`` or ``COMMIT``, as in the pipelined claim):

1. the survey (:meth:`PostgresFlowReads.send_survey`: the asynchronous commit and the generic
   plan, then the queue's shared lock and the buckets' locks in one statement, then their use with
   the plain jobs and the lanes read ahead), whose results are read with a flush, not a Sync, so
   the transaction goes on;
2. the jobs of the lanes with room that were not read ahead with the plain ones (the lanes the
   queue's last claim admitted are: :data:`AHEAD_LANES`), if any (one :data:`FLOW_FETCH`);
3. :data:`FLOW_LEASE` (the lease, its log, the slots and starts) and the Sync, which commits.

A queue that turns out paused or limited is left to the exact path (``None``): its claim only
read and locked, and the Sync ends it having changed nothing.
"""

from __future__ import annotations

from typing import Any

from ...core.outcomes import ClaimedJob
from ..flow import Picked, pick
from .claimed import claimed_jobs
from .connection import fetch_bound, pipelined_transaction
from .flow import FLOW_LEASE, PostgresFlowReads, lease_params
from .queues import queue_keys

#: The most lanes a flow claim reads ahead (their jobs with the plain ones, before their room is
#: known): a lane found held costs a read of up to the batch, never more.
AHEAD_LANES = 4
#: The lanes above 0 the last flow claim of each ``(database, queue)`` admitted: the next one reads
#: them ahead, so that a claim whose lanes keep their room takes two round trips, not three.
_admitted: dict[tuple[str, str], list[int]] = {}
#: ``(database, queue)`` pairs whose last claim found jobs under flow control: a claim that is its
#: own transaction starts such a queue with :func:`claim_flow_alone` rather than the pipelined
#: claim. Only a hint of the path: the flow claim reads whether the queue still has such jobs.
flowing: set[tuple[str, str]] = set()


def forget_paths() -> None:
    """Drop every hint (:data:`flowing`, the lanes read ahead): the next claims find their path
    afresh, as a new process's do."""
    flowing.clear()
    _admitted.clear()


def claim_flow(using: str, queue: str, params: dict[str, Any]) -> list[ClaimedJob]:
    """The flow claim of one queue in the caller's transaction, its chosen jobs leased, and their
    use recorded, by :data:`FLOW_LEASE`. ``params`` are the claim statements' (``_claim_params``)."""
    picked = pick(PostgresFlowReads(), using, queue, params["take"], params["now"])
    if not picked.jobs:
        return []
    rows = fetch_bound(using, FLOW_LEASE, _lease(params, picked), jobs=len(picked.jobs))
    return claimed_jobs(rows, params["worker"], params["expiry"])


def claim_flow_alone(using: str, queue: str, params: dict[str, Any]) -> tuple[list[ClaimedJob], bool] | None:
    """The flow claim of one queue as a transaction of its own (see the module's docstring): the
    jobs claimed, and whether the queue still holds lanes above 0; None when the queue is paused or
    has a concurrency limit (nothing taken: the exact path serves it)."""
    take, now = params["take"], params["now"]
    reads = PostgresFlowReads(ungated_only=True, ahead=_admitted.get((using, queue), ())[:AHEAD_LANES])
    with pipelined_transaction(using, jobs=take) as tx:
        leasing = tx.cursor()
        # One transaction: the statements before the block's Sync. Reading the survey's results
        # inside the block asks the server to flush them (no Sync), so the choice is made with
        # the buckets' locks held, and the lease follows in the same transaction.
        with tx.round_trip():
            reads.send_survey(tx, queue, take, now, queue_keys=queue_keys([queue]))
            picked = pick(reads, using, queue, take, now)
            if picked.jobs and not reads.gated:
                leasing.execute(FLOW_LEASE, _lease(params, picked))
        _admitted[(using, queue)] = picked.admitted
        if reads.gated:
            return None  # it only read and locked: its Sync ended it, having changed nothing
        rows = leasing.fetchall() if picked.jobs else []
    return claimed_jobs(rows, params["worker"], params["expiry"]), reads.had_lanes


def _lease(params: dict[str, Any], picked: Picked[int]) -> dict[str, Any]:
    return {**params, **lease_params(picked.bounds), "picked": [sequence for _, sequence, _ in picked.jobs]}
