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
        "enqueue_single_args": 1.2,  # needs 1.2
        "enqueue_bulk_args": 1.49,  # needs 1.5
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
        "one per transaction with arguments 120% (≥ 120%) PASS",
        "bulk with arguments 149% (≥ 150%) MISS",
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


def _processing(rate: float, first: float | None = None, steady: float | None = None) -> dict[str, Any]:
    return {"rate": rate, "first_done_after_s": first, "steady_rate": steady}


def test_a_missed_processing_target_says_what_steady_rate_it_needed() -> None:
    report = results({"c10_p1_from_spawn": 2.5, "default_p1_from_spawn": 1.5, "default_p2_from_spawn": 1.4})
    report["peers"]["n"] = 10_000
    report["peers"]["settings"] = ["c10_p1", "default_p1", "default_p2"]
    report["peers"]["queues"]["pgqueuer"]["processing"] = {
        "c10_p1": _processing(2_000.0),
        "default_p1": _processing(4_000.0),  # twice: 10,000 jobs in 1.25 s
        "default_p2": _processing(6_000.0),  # twice: 10,000 jobs in 0.83 s
    }
    report["peers"]["queues"]["backwave_django"]["processing"] = {
        "c10_p1": _processing(5_000.0, 0.4, 7_000.0),  # met: no line
        "default_p1": _processing(6_000.0, 0.25, 8_000.0),  # 1.0 s left: 10,000 jobs/s
        "default_p2": _processing(8_400.0, 0.9, 12_000.0),  # its start-up alone is past 0.83 s
    }
    report["processing"] = {"raw_batch_1": {"steady_rate": 20_000.0}, "raw_batch_2": {"error": "boom"}}
    assert peer_report.needs(report) == [
        "1 process, default concurrency: 2 times pgqueuer's 4,000 jobs/s from spawn is 10,000 jobs in "
        "1.25 s; after backwave_django's 0.25 s to its first job that needs 10,000 jobs/s in steady "
        "state, 125% of its own steady rate (8,000 jobs/s) and 50% of the raw claim-32 loop's "
        "(20,000 jobs/s)",
        "2 processes, default concurrency: 2 times pgqueuer's 6,000 jobs/s from spawn is 10,000 jobs in "
        "0.83 s; backwave_django's first job alone took 0.90 s after spawn",
    ]


def test_without_the_figures_no_need_is_worked_out() -> None:
    report = results({"default_p1_from_spawn": 1.5})
    report["peers"]["n"] = 10_000
    report["peers"]["settings"] = ["default_p1"]
    report["peers"]["queues"]["pgqueuer"]["processing"] = {"default_p1": _processing(4_000.0)}
    report["peers"]["queues"]["backwave_django"]["processing"] = {"default_p1": {"error": "exit 1"}}
    assert peer_report.needs(report) == []
    del report["peers"]["queues"]["pgqueuer"]
    assert peer_report.needs(report) == []
