"""``backwave_worker --metrics-port``: a real worker subprocess serving /metrics and /healthz."""

from __future__ import annotations

import socket
import sys
import urllib.error
import urllib.request

import pytest
from django.core.management import CommandError, call_command
from django.db import connection

from backwave_django.core.states import JobState
from backwave_django.models import JobRecord
from tests.jobsapp import jobs
from tests.worker.conftest import wait_for, workers  # noqa: F401  (the fixture)

from .conftest import samples, value

pytestmark = pytest.mark.django_db(transaction=True)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _free_port_pair() -> int:
    """A port that is free, and the one after it too."""
    for _ in range(50):
        port = _free_port()
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port + 1))
            except OSError:
                continue
        return port
    raise AssertionError("no two adjacent free ports found")


def _get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()
    except OSError:
        return 0, ""


def _ended(*job_ids) -> bool:
    return not JobRecord.objects.filter(job_id__in=job_ids, state__lt=JobState.SUCCEEDED).exists()


def test_a_worker_serves_its_outcome_counters_histograms_and_health(workers):  # noqa: F811
    succeeded = [jobs.echo.enqueue(n).job_id for n in range(3)]
    failing = jobs.always_fails.enqueue().job_id  # two attempts: retried, then dead-lettered
    port = _free_port()
    workers.start("--queues", "default", "--concurrency", "4", "--metrics-port", str(port))

    wait_for(lambda: _ended(*succeeded, failing), what="the jobs to end")

    def scraped() -> dict | None:
        status, text = _get(port, "/metrics")
        found = samples(text) if status == 200 else {}
        done = value(found, "backwave_job_outcomes_total", wire_name="test.always-fails",
                     queue="default", result="dead_lettered")
        return found if done == 1 else None

    found = wait_for(scraped, what="the outcomes on /metrics")
    assert value(found, "backwave_job_outcomes_total", wire_name="test.echo", queue="default",
                 result="succeeded") == 3
    assert value(found, "backwave_job_outcomes_total", wire_name="test.always-fails", queue="default",
                 result="retried") == 1
    assert value(found, "backwave_job_run_seconds_count", wire_name="test.echo") == 3
    assert value(found, "backwave_job_run_seconds_count", wire_name="test.always-fails") == 2
    assert value(found, "backwave_job_run_seconds_bucket", wire_name="test.echo", le="+Inf") == 3
    assert value(found, "backwave_job_start_latency_seconds_count", queue="default") == 5
    assert value(found, "backwave_worker_up") == 1
    assert value(found, "backwave_worker_slots") == 4
    assert (value(found, "backwave_worker_last_heartbeat_timestamp_seconds") or 0) > 0
    assert value(found, "backwave_workers_live") == 1  # the count gauges are served too
    assert value(found, "backwave_jobs_ended", state="succeeded") is not None
    if connection.vendor == "postgresql":  # the horizon gauges too
        assert value(found, "backwave_database_horizon_age_transactions") is not None

    status, body = _get(port, "/healthz")
    assert (status, body.startswith("ok")) == (200, True), body
    assert _get(port, "/nothing-here")[0] == 404


def test_a_worker_without_the_flag_serves_nothing(workers):  # noqa: F811
    job_id = jobs.echo.enqueue(1).job_id
    result = workers.run("--burst", "--queues", "default")
    assert result.returncode == 0, result.stderr
    assert _ended(job_id)
    assert "metrics" not in result.stderr.lower()


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--metrics-port", "abc"], "argument --metrics-port: expected a TCP port (1-65535), got 'abc'"),
        (["--metrics-port", "0"], "argument --metrics-port: expected a TCP port (1-65535), got 0"),
        (["--metrics-port", "70000"], "argument --metrics-port: expected a TCP port (1-65535), got 70000"),
        (["--metrics-port", "65535", "--processes", "2"], "needs ports up to 65536, past 65535"),
    ],
)
def test_bad_metrics_flags_are_refused_with_a_clear_message(workers, flags, message):  # noqa: F811
    result = workers.run("--burst", *flags)
    assert result.returncode != 0
    assert message in result.stderr
    assert "Traceback" not in result.stderr


def test_a_taken_port_is_refused_before_any_work(workers):  # noqa: F811
    job_id = jobs.echo.enqueue(1).job_id
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = workers.run("--burst", "--queues", "default", "--metrics-port", str(port))
    assert result.returncode == 1
    assert f"--metrics-port: cannot listen on 127.0.0.1:{port}" in result.stderr
    assert "Traceback" not in result.stderr
    assert not _ended(job_id)


def test_without_prometheus_client_the_flag_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "prometheus_client", None)
    with pytest.raises(CommandError, match=r"pip install 'prometheus_client>=0.20'"):
        call_command("backwave_worker", "--burst", "--metrics-port", "9100")


def test_with_processes_each_process_serves_the_next_port(workers):  # noqa: F811
    job_ids = [jobs.echo.enqueue(n).job_id for n in range(6)]
    port = _free_port_pair()
    workers.start("--queues", "default", "--processes", "2", "--metrics-port", str(port))

    wait_for(lambda: _ended(*job_ids), what="the jobs to end")

    def healthy_both() -> bool:
        return all(_get(p, "/healthz")[0] == 200 for p in (port, port + 1))

    wait_for(healthy_both, what="both processes' /healthz")

    def succeeded_total() -> float:
        total = 0.0
        for p in (port, port + 1):
            found = samples(_get(p, "/metrics")[1])
            total += value(found, "backwave_job_outcomes_total", wire_name="test.echo", queue="default",
                           result="succeeded") or 0.0
        return total

    assert wait_for(lambda: succeeded_total() == 6, what="6 outcomes over both endpoints")
