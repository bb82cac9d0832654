"""The flow-control oracles (tests/torture/flow_audit.py) on hand-built logs: no database, no
processes. Each oracle is shown quiet on a legal history and red on the breach it exists for."""

from __future__ import annotations

import dataclasses
import itertools
from typing import Any

from tests.torture.audit import (
    DEAD_LETTERED,
    LEASED,
    SCHEDULED,
    SUCCEEDED,
    JobRow,
    Snapshot,
    Transition,
)
from tests.torture.flow_audit import FlowLimit, check_flow, lease_intervals

W1, W2 = "w1:1:a", "w2:2:b"
LIMITS = {
    "keyed": FlowLimit(concurrency=1),
    "pair": FlowLimit(concurrency=2),
    "rated": FlowLimit(rate=2, period=1.0),
}


class Log:
    """Builds jobs whose entries are numbered in the order they are written (like the log's ids),
    so interleavings across jobs are spelled out step by step."""

    def __init__(self) -> None:
        self.ids = itertools.count(1)
        self.entries: dict[str, list[Transition]] = {}

    def add(self, job: str, state: int, attempt: int, actor: str = W1, at: float = 0.0) -> None:
        log = self.entries.setdefault(job, [])
        log.append(
            Transition(id=next(self.ids), ordinal=len(log), state=state, attempt=attempt, actor=actor, recorded_at=at)
        )

    def enqueue(self, *jobs: str) -> None:
        for job in jobs:
            self.add(job, SCHEDULED, 0, "enqueue")

    def claim(self, job: str, at: float = 0.0, actor: str = W1) -> None:
        attempt = self.entries[job][-1].attempt + 1
        self.add(job, LEASED, attempt, actor, at)

    def end(self, job: str, state: int = SUCCEEDED, actor: str = W1) -> None:
        self.add(job, state, self.entries[job][-1].attempt, actor)


def snapshot(log: Log, keys: dict[str, list[tuple[str, str]]], **extra: Any) -> Snapshot:
    rows = {}
    for job, entries in log.entries.items():
        last = entries[-1]
        rows[job] = JobRow(
            job_id=job,
            wire_name="flow",
            queue="q",
            state=last.state,
            attempt=last.attempt,
            lease_owner=W1 if last.state == LEASED else None,
            lease_expiry=9.0 if last.state == LEASED else None,
            terminal_at=1.0 if last.state >= SUCCEEDED else None,
            terminal_cause=None,
            mode=0,
            limit_keys=tuple(keys.get(job, [])),
            partition=extra.get("partitions", {}).get(job),
        )
    return Snapshot(jobs=rows, transitions=log.entries, limit_leases=extra.get("leases", []))


def oracles(snap: Snapshot, events: list[dict[str, Any]] | None = None) -> list[str]:
    return sorted({v.oracle for v in check_flow(snap, events or [], LIMITS)})


def test_leases_of_one_bucket_that_follow_each_other_are_clean() -> None:
    log = Log()
    log.enqueue("a", "b")
    log.claim("a")
    log.end("a")
    log.claim("b")
    log.end("b")
    assert oracles(snapshot(log, {"a": [("keyed", "k1")], "b": [("keyed", "k1")]})) == []


def test_two_leases_live_at_once_in_a_bucket_of_one_are_a_breach() -> None:
    log = Log()
    log.enqueue("a", "b")
    log.claim("a")
    log.claim("b")  # a is still Leased
    log.end("a")
    log.end("b")
    snap = snapshot(log, {"a": [("keyed", "k1")], "b": [("keyed", "k1")]})
    found = check_flow(snap, [], LIMITS)
    assert [(v.oracle, v.job) for v in found] == [("FlowConcurrency", "b")]
    # Different buckets of the same limit do not count against each other.
    assert oracles(snapshot(log, {"a": [("keyed", "k1")], "b": [("keyed", "k2")]})) == []


def test_a_killed_workers_attempt_keeps_its_slot_until_the_sweeps_entry() -> None:
    log = Log()
    log.enqueue("a", "b")
    log.claim("a")  # its worker is killed: nothing written until the sweep
    log.claim("b", actor=W2)
    log.add("a", SCHEDULED, 1, "lease-expiry")
    log.end("b", actor=W2)
    assert oracles(snapshot(log, {"a": [("keyed", "k")], "b": [("keyed", "k")]})) == ["FlowConcurrency"]
    # Claimed only after the sweep moved it: clean.
    log = Log()
    log.enqueue("a", "b")
    log.claim("a")
    log.add("a", SCHEDULED, 1, "lease-expiry")
    log.claim("b", actor=W2)
    log.claim("a", actor=W1)  # a's second attempt, while b holds the slot
    log.end("b", actor=W2)
    log.end("a")
    found = check_flow(snapshot(log, {"a": [("keyed", "k")], "b": [("keyed", "k")]}), [], LIMITS)
    assert [(v.oracle, v.job) for v in found] == [("FlowConcurrency", "a")]


def test_a_concurrency_of_two_allows_two_and_not_three() -> None:
    log = Log()
    log.enqueue("a", "b", "c")
    log.claim("a")
    log.claim("b")
    log.end("a")
    log.claim("c")
    log.end("b")
    log.end("c")
    keys = {job: [("pair", "")] for job in "abc"}
    assert oracles(snapshot(log, keys)) == []
    log = Log()
    log.enqueue("a", "b", "c")
    for job in "abc":
        log.claim(job)
    for job in "abc":
        log.end(job)
    assert oracles(snapshot(log, keys)) == ["FlowConcurrency"]


def test_the_interval_of_a_claim_whose_end_aged_out_is_unknown_and_left_out() -> None:
    entries = [
        Transition(id=5, ordinal=3, state=LEASED, attempt=1, actor=W1, recorded_at=0.0),
        Transition(id=9, ordinal=5, state=SUCCEEDED, attempt=1, actor=W1, recorded_at=0.0),
        Transition(id=12, ordinal=6, state=SCHEDULED, attempt=0, actor="op", recorded_at=0.0),
        Transition(id=13, ordinal=7, state=LEASED, attempt=1, actor=W1, recorded_at=0.0),
    ]
    assert lease_intervals(entries) == [(13, None)]


def test_claims_over_the_rate_in_a_sliding_window_are_a_breach() -> None:
    log = Log()
    log.enqueue("a", "b", "c")
    for job, at in (("a", 100.0), ("b", 100.4), ("c", 100.99)):
        log.claim(job, at=at)
        log.end(job)
    keys = {job: [("rated", "")] for job in "abc"}
    found = check_flow(snapshot(log, keys), [], LIMITS)
    assert [(v.oracle, v.job) for v in found] == [("FlowRate", "c")]


def test_a_claim_exactly_one_period_later_is_outside_the_window() -> None:
    log = Log()
    log.enqueue("a", "b", "c", "d")
    for job, at in (("a", 100.0), ("b", 100.5), ("c", 101.0), ("d", 101.5)):
        log.claim(job, at=at)
        log.end(job)
    keys = {job: [("rated", "")] for job in "abcd"}
    assert oracles(snapshot(log, keys)) == []
    # Out of log order (a delayed worker stamped its claim earlier) changes nothing: windows are
    # judged on the stamps.
    log = Log()
    log.enqueue("a", "b", "c")
    for job, at in (("a", 100.9), ("b", 100.0), ("c", 100.5)):
        log.claim(job, at=at)
        log.end(job)
    assert oracles(snapshot(log, {job: [("rated", "")] for job in "abc"})) == ["FlowRate"]


def test_rate_starts_count_whatever_the_outcome_and_each_bucket_on_its_own() -> None:
    log = Log()
    log.enqueue("a", "b", "c")
    log.claim("a", at=10.0)
    log.add("a", SCHEDULED, 1, "lease-expiry")
    log.claim("a", at=10.2)
    log.end("a", DEAD_LETTERED)
    log.claim("b", at=10.3)
    log.end("b")
    keys: dict[str, list[tuple[str, str]]] = {"a": [("rated", "x")], "b": [("rated", "x")]}
    assert oracles(snapshot(log, keys)) == ["FlowRate"]
    keys["b"] = [("rated", "y")]
    assert oracles(snapshot(log, keys)) == []


def test_a_flow_job_whose_attempt_count_is_not_its_claims_spent_an_attempt_while_held() -> None:
    log = Log()
    log.enqueue("a")
    log.claim("a")
    log.end("a")
    snap = snapshot(log, {"a": [("keyed", "k")]})
    assert oracles(snap) == []
    held = snap.jobs["a"]
    snap.jobs["a"] = dataclasses.replace(held, attempt=2)
    assert oracles(snap) == ["FlowAttempts"]


def test_stored_buckets_and_partition_must_be_the_ones_the_enqueue_gave() -> None:
    log = Log()
    log.enqueue("a", "b")
    snap = snapshot(log, {"a": [("keyed", "k1")]}, partitions={"b": "t1"})
    good: list[dict[str, Any]] = [
        {"op": "enqueue", "job": "a", "result": "Ok", "limit_keys": [["keyed", "k1"]], "partition": None},
        {"op": "enqueue", "job": "b", "result": "Ok", "limit_keys": [], "partition": "t1"},
    ]
    assert oracles(snap, good) == []
    wrong = [{**good[0], "limit_keys": [["keyed", "k2"]]}, {**good[1], "partition": "t2"}]
    assert [v.job for v in check_flow(snap, wrong, LIMITS)] == ["a", "b"]
    # A duplicate (another client's enqueue of a pooled id) stored nothing of its own.
    assert oracles(snap, [{**wrong[0], "result": "Duplicate"}]) == []


def test_a_slot_left_behind_by_an_ended_lease_is_a_leak() -> None:
    log = Log()
    log.enqueue("a", "b")
    log.claim("a")
    log.end("a")
    log.claim("b")
    keys = {"a": [("keyed", "k")], "b": [("keyed", "k")]}
    assert oracles(snapshot(log, keys, leases=[("keyed", "k", "b")])) == []
    assert oracles(snapshot(log, keys, leases=[("keyed", "k", "a"), ("keyed", "k", "b")])) == ["FlowSlotLeak"]
    assert oracles(snapshot(log, keys, leases=[])) == ["FlowSlotLeak"]  # a Leased job without its slot
