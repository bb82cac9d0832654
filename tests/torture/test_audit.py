"""The auditor's oracles on hand-built transition logs: fast, no database, no processes."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from tests.torture.audit import (
    AWAITING_PARENT,
    CANCELLED,
    DEAD_LETTERED,
    LEASED,
    ON_ANY_TERMINAL,
    ON_SUCCESS,
    QUARANTINED,
    SCHEDULED,
    SUCCEEDED,
    AuditConfig,
    JobRow,
    Snapshot,
    Transition,
    audit,
    check_drained,
    check_stable,
)

CONFIG = AuditConfig(max_attempts=4, governed_queue="gov", unroutable_wires=frozenset({"bad"}))
W1, W2 = "w1:1:a", "w2:2:b"
_ids = itertools.count(1)


def log(*entries: tuple[int, int, str], start: int = 0, at: float = 0.0) -> list[Transition]:
    """Entries (state, attempt, actor) with consecutive ordinals from ``start``; ids in call order."""
    return [
        Transition(id=next(_ids), ordinal=start + i, state=s, attempt=a, actor=actor, recorded_at=at + i)
        for i, (s, a, actor) in enumerate(entries)
    ]


def row(job: str, entries: list[Transition], **fields: Any) -> JobRow:
    last = entries[-1]
    values: dict[str, Any] = {
        "job_id": job,
        "wire_name": "work",
        "queue": "q",
        "state": last.state,
        "attempt": last.attempt,
        "lease_owner": None,
        "lease_expiry": None,
        "terminal_at": 1.0 if last.state >= SUCCEEDED else None,
        "terminal_cause": None,
        "mode": ON_SUCCESS,
    }
    values.update(fields)
    return JobRow(**values)


def enqueued(job: str, *, result: str = "Ok", parents: tuple[str, ...] = (), mode: int = ON_SUCCESS) -> dict[str, Any]:
    return {"op": "enqueue", "job": job, "result": result, "parents": list(parents), "mode": mode, "t": 0.0}


def run(jobs: dict[str, list[Transition]], events: list[dict[str, Any]] | None = None, **snapshot: Any) -> list[str]:
    """Audit ``jobs`` (rows derived from their logs unless given) and return the oracle names hit."""
    rows = snapshot.pop("rows", {})
    snap = Snapshot(
        jobs={job: rows.get(job) or row(job, entries) for job, entries in jobs.items()},
        transitions=jobs,
        **snapshot,
    )
    journal = [enqueued(job) for job in jobs] if events is None else events
    return sorted({v.oracle for v in audit(snap, journal, CONFIG)})


SUCCESS_LOG = ((SCHEDULED, 0, "enqueue"), (LEASED, 1, W1), (SUCCEEDED, 1, W1))


def test_a_clean_lifecycle_with_a_retry_and_an_expiry_passes() -> None:
    entries = log(
        (SCHEDULED, 0, "enqueue"),
        (LEASED, 1, W1),
        (SCHEDULED, 1, W1),
        (LEASED, 2, W2),
        (SCHEDULED, 2, "lease-expiry"),
        (LEASED, 3, W1),
        (SUCCEEDED, 3, W1),
    )
    assert run({"a": entries}) == []


def test_a_job_born_leased_breaks_the_legal_initial_state() -> None:
    assert "LegalInitialState" in run({"a": log((LEASED, 1, W1), (SUCCEEDED, 1, W1))})


def test_a_second_outcome_after_a_terminal_state_is_an_illegal_edge() -> None:
    entries = log(*SUCCESS_LOG, (SUCCEEDED, 1, W1))
    assert "LegalTransition" in run({"a": entries})


def test_an_outcome_by_a_worker_that_does_not_hold_the_lease_is_flagged() -> None:
    entries = log((SCHEDULED, 0, "enqueue"), (LEASED, 1, W1), (SUCCEEDED, 1, W2))
    assert run({"a": entries}) == ["OutcomeProvenance"]


def test_a_claim_that_does_not_add_one_to_the_attempt_is_flagged() -> None:
    entries = log((SCHEDULED, 0, "enqueue"), (LEASED, 2, W1), (SUCCEEDED, 2, W1))
    assert run({"a": entries}) == ["AttemptMonotonic"]


def test_an_outcome_that_changes_the_attempt_is_flagged() -> None:
    entries = log((SCHEDULED, 0, "enqueue"), (LEASED, 1, W1), (SCHEDULED, 2, W1))
    assert "AttemptMonotonic" in run({"a": entries})


def test_requeue_resets_the_attempt_and_starts_a_new_life() -> None:
    entries = log(
        (SCHEDULED, 0, "enqueue"),
        (LEASED, 1, W1),
        (DEAD_LETTERED, 1, W1),
        (SCHEDULED, 0, "torture-op-1"),
        (LEASED, 1, W2),
        (SUCCEEDED, 1, W2),
    )
    events = [enqueued("a"), {"op": "requeue", "job": "a", "actor": "torture-op-1", "result": "Requeued"}]
    assert run({"a": entries}, events) == []


def test_a_requeue_nobody_journaled_is_flagged() -> None:
    entries = log((SCHEDULED, 0, "enqueue"), (LEASED, 1, W1), (DEAD_LETTERED, 1, W1), (SCHEDULED, 0, "ghost"))
    assert run({"a": entries}) == ["RequeueProvenance"]


def test_attempts_above_the_ceiling_are_flagged() -> None:
    entries = log(
        (SCHEDULED, 0, "enqueue"),
        *[e for n in range(1, 5) for e in ((LEASED, n, W1), (SCHEDULED, n, W1))],
        (LEASED, 5, W1),
        (DEAD_LETTERED, 5, W1),
    )
    assert run({"a": entries}) == ["AttemptCeiling"]


def test_a_ceiling_grown_by_given_back_attempts_allows_more_attempts() -> None:
    # Attempt 1 snoozed (no failure detail): given back, so the ceiling is 5 and attempt 5 is fine.
    entries = log(
        (SCHEDULED, 0, "enqueue"),
        *[e for n in range(1, 5) for e in ((LEASED, n, W1), (SCHEDULED, n, W1))],
        (LEASED, 5, W1),
        (DEAD_LETTERED, 5, W1),
    )
    for entry in entries[3:9]:  # the failed retries of attempts 2 to 4 carry failure detail
        if entry.state == SCHEDULED:
            object.__setattr__(entry, "failed", True)
    assert run({"a": entries}, rows={"a": row("a", entries, max_attempts=5)}) == []


def test_a_ceiling_grown_without_attempts_given_back_is_flagged() -> None:
    entries = log(*SUCCESS_LOG)
    assert run({"a": entries}, rows={"a": row("a", entries, max_attempts=6)}) == ["CeilingGrowth"]


def test_a_gap_from_aged_out_entries_is_skipped_not_judged() -> None:
    entries = log((LEASED, 3, W1), (SUCCEEDED, 3, W1), start=40)
    assert run({"a": entries}) == []


def test_row_and_log_must_agree_on_the_final_state() -> None:
    entries = log(*SUCCESS_LOG)
    rows = {"a": row("a", entries, state=DEAD_LETTERED)}
    assert run({"a": entries}, rows=rows) == ["TerminalStable"]


def test_terminal_rows_need_terminal_at_and_live_rows_must_not_have_it() -> None:
    done = log(*SUCCESS_LOG)
    waiting = log((SCHEDULED, 0, "enqueue"))
    rows = {"a": row("a", done, terminal_at=None), "b": row("b", waiting, terminal_at=5.0)}
    assert run({"a": done, "b": waiting}, rows=rows) == ["TerminalTimestamp"]


def test_lease_owner_is_present_exactly_while_leased() -> None:
    leased = log((SCHEDULED, 0, "enqueue"), (LEASED, 1, W1))
    done = log(*SUCCESS_LOG)
    rows = {"a": row("a", leased), "b": row("b", done, lease_owner=W1, lease_expiry=3.0)}
    assert run({"a": leased, "b": done}, rows=rows) == ["LeaseOwnerCleared", "LeaseOwnerPresent"]


def test_an_awaiting_parent_job_whose_parents_all_ended_is_an_orphan() -> None:
    parent = log(*SUCCESS_LOG)
    child = log((AWAITING_PARENT, 0, "enqueue"))
    assert "NoAwaitingParentOrphan" in run({"p": parent, "c": child})
    # With the edge still stored, the edge itself is the finding too: the latch never resolved.
    assert run({"p": parent, "c": child}, edges=[("p", "c")]) == ["DanglingEdge", "NoAwaitingParentOrphan"]


def test_an_awaiting_parent_job_with_a_live_parent_is_fine() -> None:
    parent = log((SCHEDULED, 0, "enqueue"))
    child = log((AWAITING_PARENT, 0, "enqueue"))
    assert run({"p": parent, "c": child}, edges=[("p", "c")]) == []


def test_duplicate_tag_and_edge_rows_are_flagged() -> None:
    parent = log((SCHEDULED, 0, "enqueue"))
    child = log((AWAITING_PARENT, 0, "enqueue"))
    found = run(
        {"p": parent, "c": child},
        edges=[("p", "c"), ("p", "c")],
        tags=[("c", "", "red"), ("c", "", "red"), ("c", "tenant", "red")],
    )
    assert found == ["DuplicateEdgeRows", "DuplicateTagRows"]


def test_enqueue_journal_cross_checks() -> None:
    jobs = {"a": log(*SUCCESS_LOG), "ghost": log(*SUCCESS_LOG)}
    events = [enqueued("a"), enqueued("a"), enqueued("lost")]
    assert run(jobs, events) == ["DuplicateEnqueueAccepted", "EnqueueDurability", "NoPhantomJobs"]


def test_an_uncertain_enqueue_explains_a_stored_job_but_need_not_be_stored() -> None:
    jobs = {"a": log(*SUCCESS_LOG)}
    assert run(jobs, [enqueued("a", result="uncertain"), enqueued("b", result="uncertain")]) == []


def test_cascade_cancel_needs_a_failed_on_success_parent() -> None:
    parent_ok = log(*SUCCESS_LOG)
    parent_failed = log((SCHEDULED, 0, "enqueue"), (LEASED, 1, W1), (DEAD_LETTERED, 1, W1))
    child = log((AWAITING_PARENT, 0, "enqueue"), (CANCELLED, 0, "cascade:p"))
    rows = {"c": row("c", child, terminal_cause="parent-failure:DeadLettered")}
    good = run({"p": parent_failed, "c": child}, [enqueued("p"), enqueued("c", parents=("p",))], rows=rows)
    assert good == []
    bad = run({"p": parent_ok, "c": child}, [enqueued("p"), enqueued("c", parents=("p",))], rows=rows)
    assert bad == ["CancelProvenance"]
    any_terminal = run(
        {"p": parent_failed, "c": child},
        [enqueued("p"), enqueued("c", parents=("p",), mode=ON_ANY_TERMINAL)],
        rows=rows,
    )
    assert any_terminal == ["CancelProvenance"]


def test_operator_cancel_must_be_journaled() -> None:
    entries = log((SCHEDULED, 0, "enqueue"), (CANCELLED, 0, "torture-op-2"))
    cancel = {"op": "cancel", "job": "a", "actor": "torture-op-2", "result": "CancelledImmediately"}
    assert run({"a": entries}, [enqueued("a"), cancel]) == []
    assert run({"a": entries}) == ["CancelProvenance"]


def test_cooperative_cancel_needs_a_cancel_request_and_the_operator_cancel_cause() -> None:
    entries = log((SCHEDULED, 0, "enqueue"), (LEASED, 1, W1), (CANCELLED, 1, W1))
    request = {"op": "cancel", "job": "a", "actor": "torture-op-1", "result": "CancellationRequested"}
    rows = {"a": row("a", entries, terminal_cause="operator-cancel")}
    assert run({"a": entries}, [enqueued("a"), request], rows=rows) == []
    assert run({"a": entries}, rows=rows) == ["CancelProvenance"]
    wrong_cause = {"a": row("a", entries, terminal_cause="torture-op-1")}
    assert run({"a": entries}, [enqueued("a"), request], rows=wrong_cause) == ["CancelProvenance"]


def test_only_designated_unroutable_wires_may_be_quarantined_and_they_never_run() -> None:
    entries = log((SCHEDULED, 0, "enqueue"), (LEASED, 1, W1), (QUARANTINED, 1, W1))
    assert run({"a": entries}) == ["QuarantineOnlyUnroutable"]
    rows = {"a": row("a", entries, wire_name="bad")}
    assert run({"a": entries}, rows=rows) == []
    executed = [enqueued("a"), {"op": "exec", "job": "a", "attempt": 1, "t": 1.0}]
    assert run({"a": entries}, executed, rows=rows) == ["QuarantineNotExecuted"]


def test_stray_probes_that_get_through_the_fence_are_flagged() -> None:
    jobs = {"a": log((SCHEDULED, 0, "enqueue"), (LEASED, 1, W1), (SUCCEEDED, 1, "stray:0"))}
    events = [enqueued("a"), {"op": "stray_report", "job": "a", "result": "Applied"}]
    assert run(jobs, events) == ["OutcomeProvenance", "StrayFenced"]


def test_client_exceptions_that_are_not_database_faults_are_findings() -> None:
    events = [enqueued("a"), {"op": "client_error", "job": None, "error": "enqueue: EnqueueError: boom"}]
    assert run({"a": log(*SUCCESS_LOG)}, events) == ["ClientException"]


def _governed(job: str, claim_id: int, end_id: int, at: float) -> tuple[list[Transition], JobRow]:
    entries = [
        Transition(id=claim_id - 1, ordinal=0, state=SCHEDULED, attempt=0, actor="enqueue", recorded_at=at - 1),
        Transition(id=claim_id, ordinal=1, state=LEASED, attempt=1, actor=W1, recorded_at=at),
        Transition(id=end_id, ordinal=2, state=SUCCEEDED, attempt=1, actor=W1, recorded_at=at + 1),
    ]
    return entries, row(job, entries, queue="gov")


def _limit(limit: int | None, t0: float, t1: float, ok: bool = True) -> dict[str, Any]:
    return {"op": "limit", "queue": "gov", "limit": limit, "t0": t0, "t1": t1, "ok": ok, "t": t0}


@pytest.mark.parametrize(
    ("limit", "expected"),
    [(1, ["ConcurrencyLimit"]), (2, []), (None, [])],
)
def test_overlapping_leases_on_the_governed_queue_are_judged_against_the_limit(
    limit: int | None, expected: list[str]
) -> None:
    a, row_a = _governed("a", claim_id=10, end_id=30, at=100.0)
    b, row_b = _governed("b", claim_id=20, end_id=40, at=100.5)
    events = [enqueued("a"), enqueued("b"), _limit(limit, 0.0, 0.1)]
    assert run({"a": a, "b": b}, events, rows={"a": row_a, "b": row_b}) == expected


def test_leases_that_follow_each_other_never_overlap() -> None:
    a, row_a = _governed("a", claim_id=10, end_id=15, at=100.0)
    b, row_b = _governed("b", claim_id=20, end_id=40, at=100.5)
    events = [enqueued("a"), enqueued("b"), _limit(1, 0.0, 0.1)]
    assert run({"a": a, "b": b}, events, rows={"a": row_a, "b": row_b}) == []


def test_a_limit_raised_just_before_a_claim_may_be_the_one_in_force() -> None:
    a, row_a = _governed("a", claim_id=10, end_id=30, at=100.0)
    b, row_b = _governed("b", claim_id=20, end_id=40, at=100.5)
    raised = [enqueued("a"), enqueued("b"), _limit(1, 0.0, 0.1), _limit(2, 100.2, 100.3)]
    assert run({"a": a, "b": b}, raised, rows={"a": row_a, "b": row_b}) == []
    # A raise long after the claim does not excuse it.
    late = [enqueued("a"), enqueued("b"), _limit(1, 0.0, 0.1), _limit(2, 500.0, 500.1)]
    assert run({"a": a, "b": b}, late, rows={"a": row_a, "b": row_b}) == ["ConcurrencyLimit"]


def test_drain_and_stability_checks() -> None:
    done = log(*SUCCESS_LOG)
    live = log((SCHEDULED, 0, "enqueue"))
    before = Snapshot(jobs={"a": row("a", done), "b": row("b", live)}, transitions={"a": done, "b": live})
    assert [v.oracle for v in check_drained(before)] == ["DrainLiveness"]
    changed = Snapshot(jobs={"a": row("a", done, terminal_cause="late write"), "b": row("b", live)}, transitions={})
    assert [v.oracle for v in check_stable(before, changed)] == ["TerminalStable"]
    assert check_stable(before, before) == []
