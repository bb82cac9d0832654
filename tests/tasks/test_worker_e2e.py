"""A real ``backwave_worker`` subprocess runs Django tasks; results are read back in this process."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("django.tasks", reason="the Django Tasks backend needs Django 6.0+")

from django.tasks import TaskResultStatus

from tests.jobsapp import tasks
from tests.worker.conftest import Workers

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def task_workers(tmp_path: Path) -> Iterator[Workers]:
    """Ordinary ``backwave_worker`` processes: they find tests/jobsapp/tasks.py by autodiscovery."""
    pool = Workers(tmp_path)
    yield pool
    pool.stop_all()


def test_worker_runs_tasks_and_results_become_successful(task_workers: Workers) -> None:
    added = tasks.add.enqueue(20, 22)
    emailed = tasks.send_email.enqueue("ops@example.com")
    doubled = tasks.async_double.enqueue(4)
    flaky = tasks.flaky.enqueue(fail_until=3)
    identified = tasks.whoami.enqueue()

    done = task_workers.run("--burst", "--name", "tasks-e2e")  # default queues include "emails"

    assert done.returncode == 0, done.stdout + done.stderr
    assert tasks.add.get_result(added.id).return_value == 42
    assert tasks.send_email.get_result(emailed.id).return_value == {"sent": "ops@example.com"}
    async_result: Any = tasks.async_double.get_result(doubled.id)  # stubs: a coroutine's value
    assert async_result.return_value == 8
    retried = tasks.flaky.get_result(flaky.id)
    assert retried.status == TaskResultStatus.SUCCESSFUL
    assert retried.return_value == 3
    assert retried.attempts == 3
    assert [e.exception_class_path for e in retried.errors] == ["builtins.RuntimeError"] * 2
    assert all(worker_id.startswith("tasks-e2e:") for worker_id in retried.worker_ids)
    assert retried.started_at is not None
    assert retried.last_attempted_at is not None
    assert retried.finished_at is not None
    assert retried.started_at < retried.last_attempted_at <= retried.finished_at
    me = tasks.whoami.get_result(identified.id)
    assert me.return_value["id"] == identified.id
    assert me.return_value["worker_ids"] == me.worker_ids


def test_worker_dead_letters_a_task_that_keeps_failing(task_workers: Workers) -> None:
    failing = tasks.always_fails.enqueue()

    done = task_workers.run("--burst")

    assert done.returncode == 0, done.stdout + done.stderr
    result = tasks.always_fails.get_result(failing.id)
    assert result.status == TaskResultStatus.FAILED
    assert result.attempts == 2
    assert [e.exception_class_path for e in result.errors] == ["builtins.ValueError"] * 2
    assert result.finished_at is not None
