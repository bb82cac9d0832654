"""The side-by-side report's verdicts on the targets (benchmarks/peer_report.py): each ratio of the
run against its minimum, PASS or MISS. Built from made-up results: no database, no timing."""

from __future__ import annotations

from typing import Any

from benchmarks import peer_report

SETTINGS = ["c10_p1", "c10_p2", "default_p1", "default_p2"]


def results(ratios: dict[str, float | None], pgqueuer: dict[str, Any] | None = None) -> dict[str, Any]:
    queues: dict[str, Any] = {"backwave_django": {}, "pgqueuer": pgqueuer if pgqueuer is not None else {}}
    return {"peers": {"settings": SETTINGS, "queues": queues, "ratios": {"pgqueuer": ratios}}}


def test_each_target_is_marked_pass_or_miss_at_its_own_minimum() -> None:
    ratios: dict[str, float | None] = {
        "enqueue_single": 1.19,  # needs 1.2
        "enqueue_bulk": 1.0,  # needs 1.0: at the minimum passes
        "c10_p1_from_spawn": 2.01,
        "c10_p2_from_spawn": 1.99,
        "default_p1_from_spawn": 2.5,
        "default_p2_from_spawn": None,  # not measured (the run failed)
        "default_p2_steady": 9.0,  # steady state has no target
    }
    line = peer_report.targets(results(ratios))
    assert line.startswith("Against the targets (backwave_django over pgqueuer): ")
    assert line.split(": ", 1)[1].split("; ") == [
        "one per transaction 119% (≥ 120%) MISS",
        "bulk 100% (≥ 100%) PASS",
        "1 process, concurrency 10, from spawn 201% (≥ 200%) PASS",
        "2 processes, concurrency 10 each, from spawn 199% (≥ 200%) MISS",
        "1 process, default concurrency, from spawn 250% (≥ 200%) PASS",
        "2 processes, default concurrency, from spawn — (≥ 200%) —",
    ]


def test_settings_the_run_left_out_have_no_verdict() -> None:
    report = results({"enqueue_single": 1.3, "enqueue_bulk": 1.1, "c10_p1_from_spawn": 2.2})
    report["peers"]["settings"] = ["c10_p1"]
    line = peer_report.targets(report)
    assert "concurrency 10, from spawn 220% (≥ 200%) PASS" in line
    assert "default" not in line
    assert "2 processes" not in line


def test_without_pgqueuer_there_is_no_verdict_and_the_line_says_why() -> None:
    skipped = results({}, pgqueuer={"skipped": "not installed: pip install 'backwave-django[bench]'"})
    assert peer_report.targets(skipped) == (
        "Against the targets: no verdicts, pgqueuer not installed: pip install 'backwave-django[bench]'"
    )
    failed = results({}, pgqueuer={"error": "set-up: RuntimeError: boom"})
    assert peer_report.targets(failed) == "Against the targets: no verdicts, pgqueuer ERROR"
    left_out = results({})
    del left_out["peers"]["queues"]["pgqueuer"]
    assert peer_report.targets(left_out) == "Against the targets: no verdicts, pgqueuer not run"
