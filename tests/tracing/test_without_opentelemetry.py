"""Without the ``otel`` extra: a process where OpenTelemetry cannot be imported enqueues and runs
jobs as before, and stores no trace context (docs/tracing.md)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from django.db import connection

from backwave_django.core.states import JobState
from backwave_django.models import JobRecord
from tests.worker.conftest import ROOT, database_leg

#: Runs in a fresh interpreter: OpenTelemetry made unimportable before Django (and so the app)
#: is set up, then one job enqueued and drained by the worker's own loop.
SCRIPT = """
import sys
sys.modules["opentelemetry"] = None  # any import of it now raises ImportError

import django
django.setup()

from backwave_django import tracing
from backwave_django.core.dispatch import StrictDispatch
from backwave_django.worker import Worker, WorkerOptions
from tests.jobsapp import jobs

assert not tracing.ENABLED
receipt = jobs.echo.enqueue("without opentelemetry")
code = Worker(WorkerOptions(dispatch=StrictDispatch(["default"]), concurrency=1, burst=True)).run()
print(receipt.job_id, code, "opentelemetry" in sys.modules and sys.modules["opentelemetry"] is None)
"""


@pytest.mark.django_db(transaction=True)
def test_without_opentelemetry_jobs_enqueue_and_run_with_no_trace_context():
    result = subprocess.run(
        [sys.executable, "-c", SCRIPT],
        env={
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "tests.settings",
            "PYTHONPATH": str(ROOT),
            "BACKWAVE_TEST_DB": database_leg(),
            "BACKWAVE_DB_NAME": str(connection.settings_dict["NAME"]),
        },
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    job_id, exit_code, blocked = result.stdout.split()
    assert (exit_code, blocked) == ("0", "True")
    record = JobRecord.objects.get(job_id=job_id)
    assert (record.state, record.trace_context, record.output) == (
        JobState.SUCCEEDED,
        None,
        {"args": ["without opentelemetry"], "kwargs": {}},
    )
