"""The torture suite's self-test: a short run goes red when the lease fence is sabotaged, or when
the flow claim stops checking buckets, and green on the same seed without the sabotage. Real
workers and clients on PostgreSQL."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SEED = 20261130

pytestmark = pytest.mark.postgres


def torture(tmp_path: Path, *extra: str) -> tuple[int, list[dict[str, object]], str]:
    """Run a small torture and return (exit code, violations, output)."""
    artifacts = tmp_path / "artifacts"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "tests.torture",
            "--seed",
            str(SEED),
            "--duration",
            "6",
            "--workers",
            "2",
            "--clients",
            "2",
            "--drain-bound",
            "20",
            "--artifacts",
            str(artifacts),
            "--database",
            f"bw_torture_selftest_{os.getpid()}",
            # Heavy fence pressure: half of all outcome batches are delivered twice.
            "--duplicate-delivery",
            "0.5",
            "--keep-artifacts",
            *extra,
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    output = result.stdout + result.stderr
    found = list(artifacts.glob("*/violations.json"))
    violations = json.loads(found[0].read_text()) if found else []
    return result.returncode, violations, output


def test_disabling_the_lease_fence_turns_the_torture_red(tmp_path: Path) -> None:
    code, violations, output = torture(tmp_path, "--sabotage", "fence")
    assert code == 1, output
    oracles = {v["oracle"] for v in violations}
    # Repeated and stale reports now apply: a second outcome on a finished job, or one by a
    # worker that no longer holds the lease.
    assert oracles & {"LegalTransition", "EffectOnce", "OutcomeProvenance"}, output


def test_skipping_the_flow_claims_bucket_check_turns_the_torture_red(tmp_path: Path) -> None:
    # Mostly limited jobs, so that a 6-second run presses on every bound.
    code, violations, output = torture(tmp_path, "--sabotage", "limits", "--flow-share", "0.8")
    assert code == 1, output
    oracles = {v["oracle"] for v in violations}
    # Claims that no longer count what a bucket holds: more Leased at once, or more claims in a
    # window, than the limit allows.
    assert oracles & {"FlowConcurrency", "FlowRate"}, output


@pytest.mark.parametrize("flow_share", ["0.3", "0.8"])
def test_the_same_run_without_sabotage_is_clean(tmp_path: Path, flow_share: str) -> None:
    code, violations, output = torture(tmp_path, "--flow-share", flow_share)
    assert code == 0, output
    assert violations == []
