"""The flow step's pure parts (benchmarks/flow.py) and its rows in the report (benchmarks/run.py):
made-up claim times and results, no server, no timing."""

from __future__ import annotations

from typing import Any

import pytest

from benchmarks import run
from benchmarks.flow import rate_use


def test_flow_is_a_measurement_of_its_own() -> None:
    assert run.parse_args(["--only", "flow"]).selected == ["flow"]
    assert "flow" in run.parse_args([]).selected
    assert "flow" in run.parse_args(["--quick"]).selected


def test_a_limiter_that_fills_each_period_in_a_burst_uses_all_of_the_rate() -> None:
    # 3 bursts of 4 claims, one period apart (a hair more, as a real limiter's are).
    stamps = [k * 1.001 + i * 0.0001 for k in range(3) for i in range(4)]
    use = rate_use(stamps, rate=4, period=1.0)
    assert (use["whole_periods"], use["claims_in_whole_periods"], use["used"]) == (2, 8, 1.0)
    assert use["most_in_a_window"] == 4


def test_evenly_spread_claims_at_half_the_rate_use_half_of_it() -> None:
    stamps = [i * 0.5 for i in range(9)]  # 2 a period, for 4 periods
    use = rate_use(stamps, rate=4, period=1.0)
    assert use["used"] == pytest.approx(0.5)
    assert use["most_in_a_window"] == 2


def test_a_window_is_open_at_its_start() -> None:
    assert rate_use([0.0, 1.0, 2.0], rate=1, period=1.0)["most_in_a_window"] == 1
    assert rate_use([0.0, 0.999, 2.0], rate=1, period=1.0)["most_in_a_window"] == 2
    assert rate_use([5.0], rate=1, period=1.0)["used"] is None  # no whole period: no figure


def _results(loose_ratio: float, used: float) -> dict[str, Any]:
    plain = {"jobs": 10_000, "rate": 5_000.0}
    return {
        "flow": {
            "runs": {"plain": [plain, plain], "loose": [plain, plain]},
            "plain_rate": 5_000.0,
            "loose_rate": 5_000.0 * loose_ratio,
            "loose_ratio": loose_ratio,
            "paced": {
                "jobs": 2_000,
                "rate_limit": 200,
                "period_s": 1.0,
                "whole_periods": 9,
                "claims_in_whole_periods": round(9 * 200 * used),
                "used": used,
                "most_in_a_window": 200,
            },
        }
    }


@pytest.mark.parametrize(("loose_ratio", "used", "verdicts"), [(0.9, 0.97, ["PASS", "PASS"]), (0.79, 0.94, ["MISS", "MISS"])])
def test_the_flow_rows_are_the_reference_and_two_targets(loose_ratio: float, used: float, verdicts: list[str]) -> None:
    table = run.rows(_results(loose_ratio, used), run.parse_args(["--only", "flow"]))
    assert [row["status"] for row in table] == ["info", *verdicts]
    reference, loose, paced = table
    assert reference["measurement"].startswith("Flow: processing, 1 process, plain noops")
    assert (loose["target"], loose["ratio"]) == ("≥ 80% of plain", f"{loose_ratio:.0%}")
    assert loose["baseline"] == "5,000 jobs/s (plain noops, alternating)"
    assert (paced["target"], paced["ratio"]) == ("≥ 95% of the rate", f"{used:.0%}")
    assert "200/1 s" in paced["measurement"]
    assert "at most 200 claims in any window" in paced["measurement"]


def test_a_failed_flow_step_is_an_error_row() -> None:
    table = run.rows({"flow": {"error": "RuntimeError: boom"}}, run.parse_args(["--only", "flow"]))
    assert [(row["measurement"], row["status"]) for row in table] == [("flow", "ERROR")]
