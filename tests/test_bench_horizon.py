"""The long-horizon scenario's pure parts (benchmarks/horizon.py, benchmarks/cluster.py): phases,
``/proc`` parsing, the per-phase arithmetic, the report and the command line. Made-up samples and
a made-up ``/proc``: no server, no timing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from benchmarks import harness, horizon, run
from benchmarks.cluster import server_options

# A postgres backend whose command name holds a space and a parenthesis: fields after the last ")".
STAT = "4242 (postgres: x) y) S 100 4242 4242 0 -1 4194560 500 0 0 0 {ut} {st} {cut} {cst} 20 0 1 0 99 0 0"


def stat_line(ppid: int, pgrp: int, ut: int, st: int, cut: int = 0, cst: int = 0) -> str:
    return STAT.replace("S 100 4242", f"S {ppid} {pgrp}").format(ut=ut, st=st, cut=cut, cst=cst)


def test_a_stat_line_gives_parent_group_and_cpu_ticks_past_the_command_name() -> None:
    parsed = harness.parse_stat(stat_line(ppid=7, pgrp=9, ut=30, st=12, cut=5, cst=1))
    assert parsed == harness.ProcStat(ppid=7, pgrp=9, ticks=42, children_ticks=6)


def test_read_stats_reads_every_process_and_skips_what_it_cannot_parse(tmp_path: Path) -> None:
    for pid, text in ((10, stat_line(1, 10, 3, 4)), (11, stat_line(10, 10, 1, 1)), (12, "garbage")):
        (tmp_path / str(pid)).mkdir()
        (tmp_path / str(pid) / "stat").write_text(text)
    (tmp_path / "self").mkdir()  # not a process id: not read
    stats = horizon.read_stats(tmp_path)
    assert sorted(stats) == [10, 11]
    assert stats[10].ticks == 7


def test_the_cluster_counts_its_postmaster_reaped_backends_and_live_children_only() -> None:
    stats = {
        100: harness.ProcStat(ppid=1, pgrp=100, ticks=10, children_ticks=50),  # postmaster
        101: harness.ProcStat(ppid=100, pgrp=100, ticks=7, children_ticks=0),  # a backend
        102: harness.ProcStat(ppid=100, pgrp=100, ticks=3, children_ticks=0),  # autovacuum
        200: harness.ProcStat(ppid=1, pgrp=200, ticks=1000, children_ticks=0),  # another server
        300: harness.ProcStat(ppid=1, pgrp=300, ticks=20, children_ticks=4),  # worker supervisor
        301: harness.ProcStat(ppid=300, pgrp=300, ticks=6, children_ticks=0),  # its child
    }
    assert horizon.cluster_ticks(stats, postmaster=100) == 70
    assert horizon.group_ticks(stats, pgrp=300) == 30


def test_the_servers_cpu_is_split_by_the_role_of_each_process() -> None:
    roles = {
        101: horizon.role_of("client backend", horizon.WORKER_APP),
        102: horizon.role_of("client backend", horizon.PRODUCER_APP),
        103: horizon.role_of("client backend", "psql"),
        104: horizon.role_of("autovacuum worker", ""),
        105: horizon.role_of("walwriter", ""),
    }
    assert list(roles.values()) == ["worker", "producer", "harness", "autovacuum", "background"]
    stats = {
        100: harness.ProcStat(ppid=1, pgrp=100, ticks=10, children_ticks=50),  # postmaster
        **{pid: harness.ProcStat(ppid=100, pgrp=100, ticks=pid - 100, children_ticks=0) for pid in roles},
        106: harness.ProcStat(ppid=100, pgrp=100, ticks=9, children_ticks=0),  # started since the read
        200: harness.ProcStat(ppid=1, pgrp=200, ticks=1000, children_ticks=0),  # another server
    }
    split = horizon.cpu_by_role(stats, 100, roles)
    assert split == {
        "worker": 1,
        "producer": 2,
        "harness": 3,
        "autovacuum": 4,
        "background": 5 + 9,
        "ended": 60,
    }
    assert sum(split.values()) == horizon.cluster_ticks(stats, postmaster=100)


def test_the_phases_are_clean_held_recovery_with_the_hold_its_own_length() -> None:
    assert horizon.phase_plan(60, 300) == [("clean", 60), ("held", 300), ("recovery", 60)]
    with pytest.raises(ValueError, match="positive"):
        horizon.phase_plan(0, 300)


def sample(at: float, **values: Any) -> horizon.Sample:
    fields: dict[str, Any] = dict.fromkeys(horizon.Sample.__dataclass_fields__, 0)
    fields.update(
        {
            "at": at,
            "by_statement": {},
            "time_by_statement": {},
            "plans_by_statement": {},
            "plan_time_by_statement": {},
            "postgres_cpu_by_role": {},
            **values,
        }
    )
    return horizon.Sample(**fields)


def test_a_phase_divides_its_counter_deltas_by_the_jobs_it_completed() -> None:
    before = sample(
        1000.0,
        postgres_cpu_s=5.0,
        worker_cpu_s=2.0,
        statements=100,
        table_bytes=8192,
        postgres_cpu_by_role={"worker": 1.0, "producer": 2.0},
    )
    after = sample(
        1010.0,
        postgres_cpu_s=6.0,
        worker_cpu_s=2.5,
        statements=800,
        table_bytes=8192 + 50_000,
        index_bytes=20_000,
        claim_calls=40,
        claim_ms=8.0,
        claim_hits=2000,
        autovacuums=1,
        postgres_cpu_by_role={"worker": 1.4, "producer": 2.5, "autovacuum": 0.1},
    )
    figures = horizon.phase_figures(
        "held",
        before,
        after,
        enqueued=1010,
        completed=1000,
        claim_ms=[float(ms) for ms in range(200, 0, -1)],  # 1 … 200 ms, out of order
        not_started=10,
    )
    assert figures["completion_rate"] == 100.0
    assert figures["enqueue_rate"] == 101.0
    assert figures["claim_p50_ms"] == 100.0
    assert figures["claim_p99_ms"] == 198.0
    assert figures["claim_max_ms"] == 200.0
    assert figures["postgres_cpu_ms_per_job"] == pytest.approx(1.0)
    assert figures["postgres_cores"] == pytest.approx(0.1)
    by_role = figures["postgres_cpu_ms_per_job_by_role"]
    assert by_role["worker"] == pytest.approx(0.4)
    assert by_role["producer"] == pytest.approx(0.5)
    assert by_role["autovacuum"] == pytest.approx(0.1)
    assert by_role["harness"] == 0.0
    assert figures["worker_cpu_ms_per_job"] == pytest.approx(0.5)
    assert figures["statements_per_job"] == 0.7
    assert figures["table_bytes_per_job"] == 50.0
    assert figures["index_bytes_per_job"] == 20.0
    assert figures["claim_mean_ms"] == 0.2
    assert figures["claim_hits_per_call"] == 50.0
    assert figures["autovacuums"] == 1
    assert figures["not_started_at_end"] == 10


def test_the_statements_behind_the_count_are_ranked_by_calls_per_job_in_the_phase() -> None:
    before = sample(0.0, by_statement={"COMMIT": 500, "SELECT claim": 10, "idle": 4})
    after = sample(10.0, by_statement={"COMMIT": 2500, "SELECT claim": 210, "INSERT job": 1000, "idle": 4})
    assert horizon.top_statements(before, after, jobs=1000, top=2) == [("COMMIT", 2.0), ("INSERT job", 1.0)]
    assert horizon.top_statements(before, after, jobs=0) == []
    report = result(4.0, 6.0)
    report["phases"][0]["top_statements_per_job"] = horizon.top_statements(before, after, jobs=1000)
    assert horizon.details(report) == [
        "clean: statements per job `COMMIT` 2.00; `INSERT job` 1.00; `SELECT claim` 0.20"
    ]


def test_where_the_servers_time_goes_is_ranked_by_ms_per_job_in_the_phase() -> None:
    before = sample(0.0, time_by_statement={"SELECT claim": 100.0, "REPORT": 50.0})
    after = sample(10.0, time_by_statement={"SELECT claim": 600.0, "REPORT": 250.0, "INSERT job": 300.0})
    ranked = horizon.statement_time(before, after, jobs=1000)
    assert ranked == [("SELECT claim", 0.5), ("INSERT job", 0.3), ("REPORT", 0.2)]
    assert horizon.statement_time(before, after, jobs=0) == []
    report = result(4.0, 6.0)
    report["phases"][0]["statement_ms_per_job"] = ranked[:1]
    assert horizon.details(report) == ["clean: execution time per job `SELECT claim` 0.500 ms"]


def test_the_statements_planned_at_each_call_are_listed_with_their_planning_time() -> None:
    before = sample(
        0.0, plans_by_statement={"SELECT open": 10, "REPORT": 5}, plan_time_by_statement={"SELECT open": 3.0}
    )
    after = sample(
        10.0,
        plans_by_statement={"SELECT open": 1010, "REPORT": 5, "INSERT job": 100},
        plan_time_by_statement={"SELECT open": 303.0, "INSERT job": 20.0},
    )
    ranked = horizon.planning(before, after, jobs=1000)
    assert ranked == [("SELECT open", 1.0, 0.3), ("INSERT job", 0.1, 0.02)]
    assert horizon.planning(before, after, jobs=0) == []
    report = result(4.0, 6.0)
    report["phases"][0]["plans_per_job"] = ranked[:1]
    assert horizon.details(report) == ["clean: plans per job `SELECT open` 1.00 (0.300 ms)"]


def test_the_producers_timings_are_split_by_the_phase_their_enqueue_began_in() -> None:
    timings = horizon.read_timings("100.5 1.250\n101.0 3.000\n\n109.999 2.5\n110.0 9.0\n")
    assert timings == [(100.5, 1.25), (101.0, 3.0), (109.999, 2.5), (110.0, 9.0)]
    in_phase = horizon.enqueue_ms(timings, 100.0, 110.0)
    assert in_phase == [1.25, 3.0, 2.5]
    figures = horizon.phase_figures(
        "clean",
        sample(100.0),
        sample(110.0),
        enqueued=3,
        completed=3,
        claim_ms=[1.0],
        not_started=0,
        enqueue_ms=in_phase,
    )
    assert (figures["enqueue_p50_ms"], figures["enqueue_p99_ms"]) == (2.5, 3.0)


def test_a_phase_without_jobs_or_claims_has_no_per_job_figures() -> None:
    figures = horizon.phase_figures(
        "held", sample(0.0), sample(5.0), enqueued=0, completed=0, claim_ms=[], not_started=0
    )
    assert figures["completion_rate"] == 0.0
    for key in (
        "claim_p99_ms",
        "postgres_cpu_ms_per_job",
        "statements_per_job",
        "claim_mean_ms",
        "enqueue_p99_ms",
    ):
        assert figures[key] is None


def result(clean_p99: float | None, held_p99: float | None) -> dict[str, Any]:
    phases = []
    for name, p99 in (("clean", clean_p99), ("held", held_p99), ("recovery", clean_p99)):
        figures = horizon.phase_figures(
            name, sample(0.0), sample(10.0), enqueued=10, completed=10, claim_ms=[], not_started=0
        )
        phases.append({**figures, "claim_p99_ms": p99})
    server = {"server_version": "15", "kind": "private cluster", "port": 5999, "autovacuum": "on"}
    return {
        "server": server,
        "rate": 200.0,
        "concurrency": 8,
        "phase_s": 10.0,
        "hold_s": 10.0,
        "held_xid": 7,
        "phases": phases,
    }


def test_the_report_has_a_column_per_phase_and_a_row_per_figure() -> None:
    report = result(4.0, 6.5)
    text = horizon.markdown(report)
    lines = text.splitlines()
    assert lines[0] == "| Figure | clean (10 s) | held (10 s) | recovery (10 s) |"
    assert len(lines) == 2 + len(horizon.FIGURES)
    assert "| Claim latency p99 | 4.0 ms | 6.5 ms | 4.0 ms |" in lines
    assert "| Completion rate | 1 jobs/s | 1 jobs/s | 1 jobs/s |" in lines
    assert "| Claim statement mean time | — | — | — |" in lines
    assert "autovacuum=on" in horizon.heading(report)
    assert horizon.ratio(report, "claim_p99_ms") == pytest.approx(6.5 / 4.0)
    assert horizon.ratio(result(None, 6.5), "claim_p99_ms") is None


@pytest.mark.parametrize(("held", "status"), [(6.0, "PASS"), (6.1, "MISS")])
def test_the_main_table_marks_claim_p99_under_the_hold_against_one_and_a_half_times_clean(
    held: float, status: str
) -> None:
    args = run.parse_args(["--only", "horizon"])
    (row,) = run.rows({"horizon": result(4.0, held)}, args)
    assert row["status"] == status
    assert row["target"] == "≤ 150% of clean"


def test_the_command_line_wires_the_scenario_and_its_lengths() -> None:
    full = run.parse_args(["--only", "horizon"])
    assert full.selected == ["horizon"]
    assert (full.horizon_rate, full.horizon_phase, full.horizon_hold) == (200.0, 60.0, 300.0)
    assert "horizon" not in run.parse_args(["--quick"]).selected
    quick = run.parse_args(["--quick", "--only", "horizon"])
    assert quick.selected == ["horizon"]
    assert (quick.horizon_phase, quick.horizon_hold) == (20.0, 60.0)
    chosen = run.parse_args(["--horizon-rate", "50", "--horizon-phase", "25", "--horizon-hold", "40"])
    assert (chosen.horizon_rate, chosen.horizon_phase, chosen.horizon_hold) == (50.0, 25.0, 40.0)
    with pytest.raises(SystemExit):
        run.parse_args(["--horizon-hold", "0"])
    assert full.horizon_batch_window == 0.0
    assert run.parse_args(["--horizon-batch-window", "20"]).horizon_batch_window == 20.0
    with pytest.raises(SystemExit):
        run.parse_args(["--horizon-batch-window", "1500"])


def test_the_heading_names_a_batch_window_only_when_one_was_measured() -> None:
    assert "BATCH_WINDOW" not in horizon.heading(result(4.0, 6.5))
    windowed = {**result(4.0, 6.5), "batch_window_ms": 20.0}
    assert "`backwave_worker --concurrency 8` with `BATCH_WINDOW` 20 ms, phases" in horizon.heading(windowed)


def test_the_private_server_gets_its_port_socket_folder_and_settings() -> None:
    options = server_options(5999, Path("/tmp/x"), {"autovacuum": "on", "track_io_timing": "on"})
    assert options == "-p 5999 -k /tmp/x -c autovacuum=on -c track_io_timing=on"
