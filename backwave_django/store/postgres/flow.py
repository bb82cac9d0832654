"""PostgreSQL's side of the flow claim (``store/flow.py``; statements in ``sql/flow.sql``): the
survey in one round trip (:data:`FLOW_LOCK`, then :data:`FLOW_USAGE` with the plain jobs and the
lanes read ahead, pipelined), every other admitted lane's jobs in one :data:`FLOW_FETCH`, and the
lease of the chosen ones by :data:`FLOW_LEASE`, which writes them as ``CLAIM`` writes its own and
records their slots and starts."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, cast

from ...core.fairness import Candidate
from ...core.limits import CLOCK_MARGIN_SECONDS, PLAIN_LANE, stored_limit_keys
from ..flow import Survey
from ..limits import DEFAULT_PERIOD, Bounds, SettingsRow, Usage, counted_limits, settings_in_force
from .connection import Pipelined, fetch_bound, pipelined_transaction
from .queues import PIPELINED_SETTINGS
from .statements import statement

FLOW_LANES = statement("FLOW_LANES")
FLOW_LOCK = statement("FLOW_LOCK")
FLOW_USAGE = statement("FLOW_USAGE")
FLOW_FETCH = statement("FLOW_FETCH")
#: Lease the chosen jobs and record their use (see its comment in sql/flow.sql).
FLOW_LEASE = statement("FLOW_LEASE")
HAS_FLOW_JOBS = statement("HAS_FLOW_JOBS")


class PostgresFlowReads:
    """``store.flow.FlowReads`` on PostgreSQL; a job is kept as its sequence (leased by FLOW_LEASE).

    Its survey goes out in one round trip: by :meth:`survey`, pipelined in the caller's
    transaction; or sent beforehand by :meth:`send_survey` in a round trip of the caller's own
    (store/postgres/flow_claim.py), after which :meth:`survey` reads what came back."""

    def __init__(self, *, ungated_only: bool = False, ahead: Sequence[int] = ()) -> None:
        self._sent: tuple[Any, Any] | None = None
        #: Whether the queue's settings do not matter (the caller gated the claim: the exact path)
        #: or a queue paused or limited is to be reported in :attr:`gated` and left alone.
        self._ungated_only = ungated_only
        #: Lanes above 0 whose jobs the survey reads with the plain ones, before it knows their room
        #: (those the queue's last claim admitted: store/postgres/flow_claim.py); a lane found held
        #: is not taken (its rows, read up to the batch, are only locked until the claim commits).
        self._ahead = list(ahead)
        #: Whether the last survey found the queue paused or limited, with ``ungated_only`` (then
        #: it reports nothing).
        self.gated = False
        #: Whether the last survey found lanes above 0.
        self.had_lanes = False

    def send_survey(
        self, tx: Pipelined, queue: str, take: int, now: datetime, *, queue_keys: Sequence[int] = ()
    ) -> None:
        """Send the survey's statements on ``tx``'s cursors, inside the caller's ``round_trip()``.
        With ``queue_keys`` (a flow claim that is its own transaction) :data:`PIPELINED_SETTINGS` sets
        the transaction's asynchronous commit and generic plan first, and :data:`FLOW_LOCK` also
        takes those queue locks first."""
        if queue_keys:
            tx.cursor().execute(PIPELINED_SETTINGS)
        locking, counting = self._sent = (tx.cursor(), tx.cursor())
        locking.execute(FLOW_LOCK, {"queue": queue, "queue_keys": list(queue_keys)})
        takes = dict.fromkeys([PLAIN_LANE, *self._ahead], take)
        counting.execute(FLOW_USAGE, {**_fetch_params(queue, takes, now), "default_period": DEFAULT_PERIOD})

    def survey(self, using: str, queue: str, take: int, now: datetime) -> Survey[int]:
        if self._sent is None:
            with pipelined_transaction(using, jobs=take, in_callers_transaction=True) as tx:
                with tx.round_trip():
                    self.send_survey(tx, queue, take, now)
                return self._read_survey()
        return self._read_survey()

    def _read_survey(self) -> Survey[int]:
        assert self._sent is not None
        locking, counting = self._sent
        self._sent = None
        locked = set(locking.fetchone()[1])
        lanes_json, used_json, gated, fetched_json = counting.fetchone()
        self.gated = gated and self._ungated_only
        self.had_lanes = bool(lanes_json)
        if self.gated:
            return Survey([], {}, {}, {})
        lanes = [(lane, stored_limit_keys(keys)) for lane, keys in lanes_json or () if lane in locked]
        bounds: Bounds = {}
        usage: Usage = {}
        for name, bucket, settings, leased, by_declared, by_override in used_json or ():
            values, overriding = None, False
            if settings[3] is not None:  # a stored row (its overridden is never null)
                values, overriding = settings_in_force(cast(SettingsRow, tuple(settings)))
            bounds[name] = values
            usage[(name, bucket)] = (leased, by_override if overriding else by_declared)
        fetched = [
            (lane, sequence, priority, datetime.fromisoformat(due))
            for lane, sequence, priority, due in fetched_json or ()
        ]
        return Survey(lanes, bounds, usage, _candidates(fetched))

    def fetch(
        self, using: str, queue: str, takes: Mapping[int, int], now: datetime
    ) -> dict[int, list[tuple[Candidate, int]]]:
        rows = fetch_bound(using, FLOW_FETCH, _fetch_params(queue, takes, now), jobs=sum(takes.values()))
        return _candidates(rows)


def lease_params(bounds: Bounds) -> dict[str, Any]:
    """:data:`FLOW_LEASE`'s parameters for the use of the jobs it leases: the limits whose buckets
    take a slot and a start of each job (``store.limits.counted_limits``; the statement reads the
    jobs' buckets itself)."""
    slot_limits, start_limits = counted_limits(bounds)
    return {
        "slot_limits": sorted(slot_limits),
        "start_limits": sorted(start_limits),
        "margin": float(CLOCK_MARGIN_SECONDS),
        "default_period": DEFAULT_PERIOD,
    }


def _fetch_params(queue: str, takes: Mapping[int, int], now: datetime) -> dict[str, Any]:
    return {"queue": queue, "lanes": list(takes), "takes": list(takes.values()), "now": now}


def _candidates(rows: Sequence[tuple[Any, ...]]) -> dict[int, list[tuple[Candidate, int]]]:
    found: dict[int, list[tuple[Candidate, int]]] = {}
    for lane, sequence, priority, due in rows:
        found.setdefault(lane, []).append((Candidate(sequence, priority, due, lane), sequence))
    return found


def flow_queues(using: str, queues: list[str]) -> set[str]:
    """Which of ``queues`` hold a Scheduled job of a lane above 0."""
    return set(fetch_bound(using, HAS_FLOW_JOBS, {"queues": queues}, jobs=1)[0][0])
