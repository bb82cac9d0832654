"""The retention scenario's pure parts (benchmarks/retention.py): when it samples, the verdict on
made-up size curves, the bytes per job, the report and the command line. No server, no timing."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, replace
from typing import Any

import pytest

from benchmarks import retention, run

INDEXES = ("backwave_django_jobrecord_pkey", "backwave_job_claim")


def point(
    at: float, total_mb: float, *, completed: int = 0, retained: int = 0, heap_share: float = 0.5
) -> retention.SizeSample:
    """A sample whose total is ``total_mb``: a share on the heap, the rest split between the two
    indexes and the transition log."""
    total = int(total_mb * 1024 * 1024)
    heap = int(total * heap_share)
    index = (total - heap) // 4
    return retention.SizeSample(
        at=at,
        heap_bytes=heap,
        index_bytes=dict.fromkeys(INDEXES, index),
        transitions_bytes=total - heap - 2 * index,
        live_tuples=retained,
        dead_tuples=0,
        transitions_live_tuples=3 * retained,
        transitions_dead_tuples=0,
        enqueued=completed + 10,
        completed=completed,
        retained=retained,
        oldest_ended_s=None,
        autovacuums=0,
        transitions_autovacuums=0,
    )


def curve(totals_mb: Sequence[float], interval: float = 30.0) -> list[retention.SizeSample]:
    return [point(i * interval, mb, completed=i * 6000) for i, mb in enumerate(totals_mb)]


def test_samples_are_taken_at_the_start_every_interval_and_at_the_end() -> None:
    assert retention.sample_times(10, 30) == [30.0 * i for i in range(21)]
    assert retention.sample_times(1, 25) == [0.0, 25.0, 50.0, 60.0]
    with pytest.raises(ValueError, match="positive"):
        retention.sample_times(0, 30)
    with pytest.raises(ValueError, match="positive"):
        retention.sample_times(10, 0)


def test_a_curve_that_levels_off_is_steady() -> None:
    # Grows for two minutes (retention not yet purging), then hovers around 20 MB.
    samples = curve(
        [0.2, 6, 12, 18, 20, 21, 20, 20.5, 21, 20, 21, 20.5, 21, 20.8, 21, 20.9, 21, 21, 20.7, 21, 21.5]
    )
    v = retention.verdict(samples)
    assert v["steady"] is True
    assert (v["from_s"], v["to_s"]) == (
        390.0,
        600.0,
    )  # the last third: from 2/3 of 600 s (400 s) back to a sample
    assert v["growth"] == pytest.approx(21.5 / 20.8 - 1, rel=1e-3)
    assert "at most 10%" in v["rule"]


def test_a_curve_that_keeps_growing_is_not_steady_and_names_what_grows() -> None:
    samples = curve([0.2 + 2 * i for i in range(21)])
    grown = samples[-1]
    # Only the claim index grows faster than the rest.
    samples[-1] = replace(grown, index_bytes={**grown.index_bytes, "backwave_job_claim": 10 * 1024 * 1024})
    v = retention.verdict(samples)
    assert v["steady"] is False
    assert v["growth"] > 0.10
    relations = v["by_relation"]
    assert set(relations) == {
        "job table heap",
        "index backwave_django_jobrecord_pkey",
        "index backwave_job_claim",
        "transition log",
    }
    assert relations["index backwave_job_claim"]["growth"] > relations["job table heap"]["growth"] > 0.10


@pytest.mark.parametrize(("end_mb", "steady"), [(22.0, True), (22.1, False)])
def test_the_bound_is_ten_percent_over_the_last_third_inclusive(end_mb: float, steady: bool) -> None:
    samples = curve([5, 20, 20, 20, end_mb], interval=60.0)  # last third: from 160 s → the 120 s sample
    v = retention.verdict(samples)
    assert v["from_s"] == 120.0
    assert v["steady"] is steady


def test_a_shrinking_curve_is_steady_and_an_empty_start_is_not() -> None:
    assert retention.verdict(curve([10, 30, 30, 25, 20]))["steady"] is True
    v = retention.verdict(curve([0, 0, 0, 0, 1]))
    assert v["growth"] is None
    assert v["steady"] is False


def test_a_curve_needs_three_samples() -> None:
    with pytest.raises(ValueError, match="at least 3 samples"):
        retention.verdict(curve([1, 2]))


def test_bytes_per_job_in_the_first_minute_and_in_the_last_third() -> None:
    samples = [
        point(0, 0.0, completed=0),
        point(30, 6.0, completed=6000),
        point(60, 12.0, completed=12_000),
        point(90, 12.5, completed=18_000),
        point(120, 12.0, completed=24_000, retained=12_000),
    ]
    figures = retention.per_job(samples)
    assert figures["first_s"] == 60.0
    assert figures["first_minute"] == pytest.approx(12 * 1024 * 1024 / 12_000)
    # From the 60 s sample (the last at or before 2/3 of 120 s) to the end: no growth.
    assert figures["last_third"] == pytest.approx(0.0, abs=1e-3)
    assert figures["footprint_per_retained_job"] == pytest.approx(12 * 1024 * 1024 / 12_000, rel=1e-6)
    idle = [point(0, 1.0), point(60, 1.0), point(120, 1.0)]
    assert retention.per_job(idle) == {
        "first_s": 60.0,
        "first_minute": None,
        "last_third": None,
        "footprint_per_retained_job": None,
    }


def result(totals_mb: Sequence[float]) -> dict[str, Any]:
    samples = curve(totals_mb)
    server = {
        "server_version": "15",
        "kind": "private cluster",
        "port": 5999,
        "autovacuum": "on",
        "autovacuum_naptime": "1min",
        "autovacuum_vacuum_scale_factor": "0.2",
        "autovacuum_vacuum_threshold": "50",
    }
    # Through JSON and back, as the harness writes and the report reads it.
    return json.loads(
        json.dumps(
            {
                "server": server,
                "rate": 200.0,
                "concurrency": 20,
                "minutes": 2.0,
                "keep_s": 60.0,
                "interval_s": 30.0,
                "samples": [{**asdict(s), "total_bytes": s.total_bytes, "purged": s.purged} for s in samples],
                "verdict": retention.verdict(samples),
                "per_job": retention.per_job(samples),
            }
        )
    )


def test_the_report_has_a_row_per_sample_and_states_the_rule() -> None:
    report = result([1, 4, 8, 8, 8.5])
    assert retention.samples_of(report)[-1].total_bytes == int(8.5 * 1024 * 1024)
    lines = retention.curve(report).splitlines()
    assert len(lines) == 2 + 5
    assert lines[0].startswith("| t (s) | enqueued | completed | retained | purged | heap MB |")
    assert lines[-1].startswith("| 120 | 24,010 | 24,000 | 0 | 24,000 | 4.25 |")
    index_lines = retention.index_curve(report).splitlines()
    assert index_lines[0] == "| t (s) | backwave_django_jobrecord_pkey | backwave_job_claim |"
    summary = retention.summary(report)
    assert summary[0].startswith("Verdict: STEADY: total size 8.00 → 8.50 MB from 60 s to 120 s (+6.2%)")
    assert "Rule: steady when the total size" in summary[0]
    assert summary[1].endswith("nothing")
    assert summary[3] == (
        "Over 120 s the producer enqueued 200 jobs/s (offered 200) and the worker completed 200 jobs/s; "
        "10 not ended at the end"
    )
    assert "autovacuum=on (naptime 1min" in retention.heading(report)
    printed = retention.report(report)
    assert printed.startswith(retention.heading(report) + "\n\n| t (s) |")
    assert printed.endswith("\n- " + summary[-1])
    growing = retention.summary(result([1, 4, 8, 10, 12]))
    assert growing[0].startswith("Verdict: GROWING")
    assert "job table heap +50.0% (4,096 → 6,144 kB)" in growing[1]


@pytest.mark.parametrize(("totals", "status"), [([1, 4, 8, 8, 8.5], "PASS"), ([1, 4, 8, 10, 12], "MISS")])
def test_the_main_table_marks_the_last_thirds_growth_against_ten_percent(
    totals: list[float], status: str
) -> None:
    args = run.parse_args(["--only", "retention"])
    (row,) = run.rows({"retention": result(totals)}, args)
    assert row["status"] == status
    assert row["target"] == "≤ 10% growth"


def test_the_command_line_wires_the_scenario_and_its_options() -> None:
    full = run.parse_args(["--only", "retention"])
    assert full.selected == ["retention"]
    assert (full.retention_rate, full.retention_minutes, full.retention_keep, full.retention_interval) == (
        200.0,
        10.0,
        60.0,
        30.0,
    )
    assert "retention" not in run.parse_args(["--quick"]).selected
    assert "retention" in run.parse_args([]).selected
    assert run.parse_args(["--quick", "--only", "retention"]).retention_minutes == 3.0
    chosen = run.parse_args(
        [
            "--retention-rate",
            "50",
            "--retention-minutes",
            "4",
            "--retention-keep",
            "20",
            "--retention-interval",
            "10",
        ]
    )
    assert (
        chosen.retention_rate,
        chosen.retention_minutes,
        chosen.retention_keep,
        chosen.retention_interval,
    ) == (
        50.0,
        4.0,
        20.0,
        10.0,
    )
    for option in ("--retention-minutes", "--retention-keep", "--retention-interval", "--retention-rate"):
        with pytest.raises(SystemExit):
            run.parse_args([option, "0"])
