"""The benchmark's peers step (benchmarks/peers.py) run for real, tiny: ``python -m benchmarks.run
--only peers`` in a subprocess, on scratch databases of its own, its JSON written to a temporary
folder. Rates are only checked to be positive: timing goals live in the harness, not in tests.

A peer that is not installed must be reported as skipped (simulated by blocking its import in the
subprocess). The run with the peers needs the ``bench`` extra, which CI does not install: there it
is skipped, with the reason shown in the summary (``-ra``).
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]
PEERS = ("pgqueuer", "procrastinate")

pytestmark = pytest.mark.skipif(
    os.environ.get("BACKWAVE_TEST_DB", "postgres") != "postgres",
    reason="the harness runs on scratch databases of its own on PostgreSQL: once, on the PostgreSQL leg",
)


def run_peers(tmp_path: Path, *, block: tuple[str, ...] = ()) -> tuple[dict[str, Any], str]:
    """The peers step with n=50; ``block`` makes those modules unimportable in the subprocess."""
    code = (
        "import sys\n"
        + "".join(f"sys.modules[{name!r}] = None\n" for name in block)
        + "from benchmarks.run import main\nsys.exit(main(sys.argv[1:]))\n"
    )
    scratch = f"{os.environ.get('BACKWAVE_PG_TEST_NAME', 'test_backwave')}_bench_peers"
    options = ["--only", "peers", "--n", "50", "--enqueue-n", "20", "--db", scratch, "--results-dir", str(tmp_path)]
    result = subprocess.run(
        [sys.executable, "-c", code, *options],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return json.loads((tmp_path / "latest.json").read_text()), result.stdout


#: The enqueue figures of each queue: the noop's, then the job with four keyword arguments'.
ENQUEUE_PATHS = ("single", "bulk", "single_args", "bulk_args")


def positive_rates(queue: dict[str, Any]) -> list[float]:
    assert list(queue["enqueue"]) == list(ENQUEUE_PATHS), queue["enqueue"]
    runs = [*(queue["enqueue"][path] for path in ENQUEUE_PATHS), *queue["processing"].values()]
    assert all("error" not in run for run in runs), runs
    rates = [run["rate"] for run in runs] + [run["steady_rate"] for run in queue["processing"].values()]
    assert len(queue["processing"]) == 4  # concurrency 10 and default, 1 and 2 processes
    # The CPU each run cost per job, its workers' (start-up alone is some) and PostgreSQL's (from
    # /proc, counted in clock ticks: a tiny run may round to zero), both measured.
    for run in queue["processing"].values():
        assert run["cpu_us_per_job"]["workers"] > 0, run
        assert run["cpu_us_per_job"]["postgres"] >= 0, run
    return rates


def test_a_peer_that_is_not_installed_is_reported_as_skipped(tmp_path: Path) -> None:
    report, stdout = run_peers(tmp_path, block=PEERS)
    queues = report["results"]["peers"]["queues"]
    for peer in PEERS:
        assert queues[peer] == {"skipped": "not installed: pip install 'backwave-django[bench]'"}
    assert report["results"]["peers"]["ratios"] == {}
    # backwave_django itself is still measured, and every row of the side-by-side table says so.
    assert all(rate > 0 for rate in positive_rates(queues["backwave_django"]))
    table = report["peers_table"]
    # Four enqueue rows (one per transaction and bulk, without and with arguments); from spawn,
    # steady and CPU per job for each setting.
    assert len(table) == 16
    assert [row["measurement"] for row in table[:4]] == [
        "Enqueue, one job per transaction, n=20",
        "Enqueue, bulk path, 1,000 per call, n=50",
        "Enqueue with 4 keyword arguments, one job per transaction, n=20",
        "Enqueue with 4 keyword arguments, bulk path, 1,000 per call, n=50",
    ]
    assert all(row["pgqueuer"] == "skipped" and row["procrastinate"] == "skipped" for row in table)
    assert "| backwave_django | pgqueuer | procrastinate |" in stdout
    assert "Against the targets: no verdicts, pgqueuer not installed" in stdout


@pytest.mark.skipif(
    not all(importlib.util.find_spec(peer) for peer in PEERS),
    reason="pgqueuer/procrastinate not installed (pip install 'backwave-django[bench]'): the peers' run is untested",
)
def test_installed_peers_are_measured_beside_backwave(tmp_path: Path) -> None:
    report, stdout = run_peers(tmp_path)
    peers = report["results"]["peers"]
    for name in ("backwave_django", *PEERS):
        assert all(rate > 0 for rate in positive_rates(peers["queues"][name])), name
        assert all(run["exit_codes"] for run in peers["queues"][name]["processing"].values())
    for peer in PEERS:
        assert all(ratio > 0 for ratio in peers["ratios"][peer].values()), peers["ratios"][peer]
        assert {f"enqueue_{path}" for path in ENQUEUE_PATHS} <= set(peers["ratios"][peer])
    assert not any("skipped" in row.values() or "ERROR" in row.values() for row in report["peers_table"])
    assert "| backwave / pgqueuer | backwave / procrastinate |" in stdout
    # Every target gets a verdict (which one is the harness's business, not the test's).
    [verdicts] = [line for line in stdout.splitlines() if line.startswith("Against the targets (")]
    assert len(verdicts.split("; ")) == 8, verdicts
    assert "one per transaction with arguments" in verdicts
    assert "bulk with arguments" in verdicts
    assert "—" not in verdicts, verdicts
    assert report["environment"]["peers_targets"] == verdicts
