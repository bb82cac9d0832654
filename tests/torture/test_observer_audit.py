"""The observer oracles on hand-built logs and delivery journals: no database, no processes."""

from __future__ import annotations

from typing import Any

from tests.torture.audit import (
    DEAD_LETTERED,
    LEASED,
    SCHEDULED,
    SUCCEEDED,
    JobRow,
    ObserverEnd,
    Snapshot,
    Transition,
)
from tests.torture.observer_audit import check_observers

EVERYTHING = {"every": (frozenset(range(7)), None)}
ENDS = {"ends": (frozenset({SUCCEEDED, DEAD_LETTERED}), "work")}
#: Two jobs, three entries each, numbered 1-6 (job a first).
STATES = (SCHEDULED, LEASED, SUCCEEDED)


def _snapshot(*, cursor: int | None = 6, dead: frozenset[int] = frozenset(), unnumbered: bool = False) -> Snapshot:
    transitions = {
        job: [
            Transition(
                id=base + ordinal,
                ordinal=ordinal,
                state=state,
                attempt=min(ordinal, 1),
                actor="w",
                recorded_at=float(base + ordinal),
                position=None if unnumbered and job == "b" and ordinal == 2 else base + ordinal + 1,
            )
            for ordinal, state in enumerate(STATES)
        ]
        for job, base in (("a", 0), ("b", 3))
    }
    jobs = {
        job: JobRow(
            job_id=job,
            wire_name="work" if job == "a" else "other",
            queue="q",
            state=SUCCEEDED,
            attempt=1,
            lease_owner=None,
            lease_expiry=None,
            terminal_at=1.0,
            terminal_cause=None,
            mode=0,
        )
        for job in transitions
    }
    observers = {} if cursor is None else {name: ObserverEnd(cursor, dead) for name in ("every", "ends")}
    return Snapshot(jobs=jobs, transitions=transitions, observers=observers)


def _seen(observer: str, position: int, *, did: str = "ok", t: float | None = None) -> dict[str, Any]:
    job, ordinal = ("a", position - 1) if position <= 3 else ("b", position - 4)
    return {
        "op": "observed",
        "observer": observer,
        "position": position,
        "job": job,
        "ordinal": ordinal,
        "state": STATES[ordinal],
        "did": did,
        "t": float(position) if t is None else t,
    }


def _oracles(snapshot: Snapshot, events: list[dict[str, Any]], subscriptions: Any = EVERYTHING) -> list[str]:
    return sorted({v.oracle for v in check_observers(snapshot, events, subscriptions)})


def test_every_entry_delivered_in_order_with_a_failure_and_a_repeat_is_clean() -> None:
    events = [_seen("every", p) for p in range(1, 7)]
    events += [_seen("every", 3, did="fail", t=2.5), _seen("every", 2, t=9.0)]  # a retry, a late repeat
    assert _oracles(_snapshot(), events) == []


def test_a_passed_entry_never_delivered_is_skipped_unless_dead_lettered() -> None:
    events = [_seen("every", p) for p in (1, 2, 4, 5, 6)]
    assert _oracles(_snapshot(), events) == ["ObserverSkipped"]
    events.append(_seen("every", 3, did="fail"))
    assert _oracles(_snapshot(), events) == ["ObserverSkipped"]
    assert _oracles(_snapshot(dead=frozenset({3})), events) == []


def test_first_deliveries_out_of_position_order_are_an_order_violation() -> None:
    events = [_seen("every", p) for p in range(1, 7)]
    events[4] = _seen("every", 5, t=3.5)  # position 5 first delivered before position 4
    assert _oracles(_snapshot(), events) == ["ObserverOrder"]


def test_a_cursor_behind_matching_entries_is_a_liveness_violation() -> None:
    events = [_seen("every", p) for p in range(1, 5)]
    assert _oracles(_snapshot(cursor=4), events) == ["ObserverLiveness"]
    assert _oracles(_snapshot(cursor=None), []) == ["ObserverLiveness"]


def test_a_delivery_that_does_not_describe_its_entry_or_does_not_match() -> None:
    events = [_seen("every", p) for p in range(1, 7)]
    events[0] = {**events[0], "state": SUCCEEDED}
    assert _oracles(_snapshot(), events) == ["ObserverPayload"]
    # "ends" subscribes to Succeeded / Dead-Lettered of wire "work": only position 3 (job a).
    assert _oracles(_snapshot(), [_seen("ends", 3)], ENDS) == []
    assert _oracles(_snapshot(), [_seen("ends", 3), _seen("ends", 6)], ENDS) == ["ObserverPayload"]
    assert _oracles(_snapshot(), [], ENDS) == ["ObserverSkipped"]


def test_an_unnumbered_entry_is_a_numbering_violation() -> None:
    events = [_seen("every", p) for p in range(1, 6)]
    assert _oracles(_snapshot(cursor=5, unnumbered=True), events) == ["ObserverNumbering"]
