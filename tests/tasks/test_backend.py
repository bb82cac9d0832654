"""BackWaveBackend: enqueue, validation, options, results and the enqueue signal (no worker)."""

from __future__ import annotations

import re
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

pytest.importorskip("django.tasks", reason="the Django Tasks backend needs Django 6.0+")

from asgiref.sync import async_to_sync
from django.core.exceptions import ImproperlyConfigured
from django.db import transaction
from django.tasks import TaskResultStatus, task, task_backends
from django.tasks.base import Task
from django.tasks.exceptions import InvalidTask, TaskResultDoesNotExist, TaskResultMismatch
from django.utils import timezone

from backwave_django import Limit, operator, registry, store
from backwave_django.core.outcomes import Failure, Unroutable
from backwave_django.core.states import JobState
from backwave_django.models import JobRecord, JobTag
from backwave_django.tasks import BackWaveBackend, BackWaveTask, task_error
from tests.jobsapp import tasks
from tests.tasks.conftest import SignalLog, claim, report

pytestmark = pytest.mark.django_db

DETAIL = 'builtins.RuntimeError: boom\nTraceback (most recent call last):\n  File "x.py", line 1\nRuntimeError: boom\n'


def plain(x: int) -> int:
    """A module-level function for declaring throwaway tasks."""
    return x


def job_row(result_id: str) -> JobRecord:
    return JobRecord.objects.get(job_id=uuid.UUID(result_id))


def tags_of(result_id: str) -> set[tuple[str, str]]:
    return set(JobTag.objects.filter(job__job_id=uuid.UUID(result_id)).values_list("key", "value"))


# --- Enqueue ----------------------------------------------------------------------------------


def test_enqueue_stores_a_job_under_the_tasks_module_path() -> None:
    result = tasks.add.enqueue(1, b=2)

    row = job_row(result.id)
    assert row.wire_name == "tests.jobsapp.tasks.add"
    assert row.queue == "default"
    assert row.payload == {"args": [1], "kwargs": {"b": 2}}
    assert row.state == JobState.SCHEDULED
    assert row.due_time == row.enqueued_at
    assert result.status == TaskResultStatus.READY
    assert result.enqueued_at == row.enqueued_at
    assert (result.args, result.kwargs) == ([1], {"b": 2})
    assert result.task is tasks.add
    assert result.backend == "default"
    assert (result.worker_ids, result.errors, result.attempts) == ([], [], 0)


def test_enqueue_uses_the_tasks_queue_unless_using_overrides_it() -> None:
    declared = tasks.send_email.enqueue("a@example.com")
    overridden = tasks.send_email.using(queue_name="default").enqueue("b@example.com")

    assert job_row(declared.id).queue == "emails"
    assert job_row(overridden.id).queue == "default"


def test_run_after_becomes_the_due_time() -> None:
    later = timezone.now() + timedelta(hours=2)

    result = tasks.add.using(run_after=later).enqueue(1, 2)

    assert job_row(result.id).due_time == later
    assert tasks.add.get_result(result.id).task.run_after == later


def test_wire_name_option_names_the_job() -> None:
    result = tasks.flaky.enqueue(fail_until=1)

    assert job_row(result.id).wire_name == "test.tasks.flaky"


def test_tags_option_is_added_to_every_job() -> None:
    result = tasks.flaky.enqueue(fail_until=1)

    assert tags_of(result.id) == {("", "from-task"), ("team", "qa")}


def test_max_attempts_and_backoff_options_give_the_job_definition_its_retry_policy() -> None:
    definition = registry.get("test.tasks.flaky")

    assert definition is not None
    assert definition.retry is not None
    assert definition.retry.max_attempts == 3
    assert definition.retry.delay(1) == timedelta(0)
    assert definition.takes_context is True
    assert list(definition.signature.parameters) == ["fail_until"]


def test_task_with_default_options_uses_the_global_retry_policy() -> None:
    definition = registry.get("tests.jobsapp.tasks.add")

    assert definition is not None
    assert definition.retry is None
    assert definition.queue == "default"


def test_arguments_are_json_normalised_like_django_does() -> None:
    result = tasks.echo.enqueue((1, 2), key=("a", "b"))

    assert job_row(result.id).payload == {"args": [[1, 2]], "kwargs": {"key": ["a", "b"]}}
    assert result.args == [[1, 2]]


def test_arguments_that_are_not_json_are_refused_naming_the_argument() -> None:
    with pytest.raises(TypeError, match=re.escape("argument 'b' of job 'tests.jobsapp.tasks.add'")):
        tasks.add.enqueue(1, b=object())  # type: ignore[arg-type]

    assert not JobRecord.objects.exists()


def test_arguments_that_do_not_bind_are_refused_at_enqueue() -> None:
    with pytest.raises(TypeError, match=re.escape("tests.jobsapp.tasks.add: too many positional")):
        tasks.add.enqueue(1, 2, 3)  # type: ignore[call-arg]


def test_enqueue_joins_the_callers_transaction() -> None:
    with pytest.raises(RuntimeError), transaction.atomic():
        tasks.add.enqueue(1, 2)
        assert JobRecord.objects.count() == 1
        raise RuntimeError("roll back")

    assert not JobRecord.objects.exists()


def test_aenqueue_and_aget_result() -> None:
    async def scenario() -> tuple[Any, Any]:
        result = await tasks.add.aenqueue(2, 3)
        return result, await tasks.add.aget_result(result.id)

    enqueued, fetched = async_to_sync(scenario)()

    assert fetched.id == enqueued.id
    assert fetched.status == TaskResultStatus.READY
    assert job_row(enqueued.id).payload == {"args": [2, 3], "kwargs": {}}


# --- Priority ---------------------------------------------------------------------------------



def test_a_tasks_priority_is_its_jobs_priority() -> None:
    result = tasks.add.using(priority=7).enqueue(1, 2)

    assert job_row(result.id).priority == 7
    assert tags_of(result.id) == set()
    assert tasks.add.get_result(result.id).task.priority == 7


def test_a_job_stored_with_the_old_priority_tag_still_reports_it() -> None:
    result = tasks.add.enqueue(1, 2)
    JobTag.objects.create(job=job_row(result.id), key="priority", value="9")

    assert tasks.add.get_result(result.id).task.priority == 9


def test_priority_orders_claims_within_a_queue() -> None:
    low = tasks.add.using(priority=-50).enqueue(1, 2)
    high = tasks.add.using(priority=100).enqueue(3, 4)

    claimed = store.claim(
        worker_id="w", queues=["default"], max_jobs=2, lease_duration=timedelta(minutes=1), now=timezone.now()
    )

    assert [str(c.job_id) for c in claimed] == [high.id, low.id]


def test_backend_supports_priority() -> None:
    assert BackWaveBackend.supports_priority is True
    assert BackWaveBackend.supports_defer is True
    assert BackWaveBackend.supports_async_task is True
    assert BackWaveBackend.supports_get_result is True


# --- Validation -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"priority": 101}, "priority must be a whole number between -100 and 100, got 101"),
        ({"priority": -101}, "between -100 and 100"),
        ({"priority": 1.5}, "priority must be a whole number, got 1.5"),
        ({"queue_name": "unknown"}, "Queue 'unknown' is not valid for backend."),
        ({"run_after": datetime(2030, 1, 1)}, "run_after must be an aware datetime"),
    ],
)
def test_using_with_invalid_options_raises_invalid_task(changes: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidTask, match=message.replace("(", r"\(").replace(".", r"\.")):
        tasks.add.using(**changes)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"max_attempts": 0}, "at least one attempt"),
        ({"max_attempts": "3"}, "max_attempts must be an int"),
        ({"backoff": "fast"}, "backoff must be a list of seconds or a callable"),
        ({"backoff": [-1]}, "cannot be negative"),
        ({"tags": [""]}, "must be non-empty"),
        ({"tags": "single"}, "tags must be a list of tags"),
        ({"wire_name": ""}, "wire_name must be a non-empty string"),
        ({"wire_name": "x" * 129}, "is 129 characters; MAX_WIRE_NAME_LENGTH is 128"),
        ({"takes_context": True}, "first argument of 'context'"),
    ],
)
def test_invalid_task_options_raise_invalid_task(options: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidTask, match=message):
        task(**{"queue_name": "default", **options})(plain)

    assert registry.get("tests.tasks.test_backend.plain") is None


def test_queue_names_are_free_when_queues_is_empty(settings: Any) -> None:
    settings.TASKS = {"default": {"BACKEND": "backwave_django.tasks.BackWaveBackend", "QUEUES": []}}

    result = tasks.add.using(queue_name="anything-goes").enqueue(1, 2)

    assert job_row(result.id).queue == "anything-goes"


def test_overlong_queue_name_is_invalid_even_when_queues_is_empty(settings: Any) -> None:
    settings.TASKS = {"default": {"BACKEND": "backwave_django.tasks.BackWaveBackend", "QUEUES": []}}

    with pytest.raises(InvalidTask, match="queue_name is at most"):
        tasks.add.using(queue_name="q" * 300)


def test_a_task_may_not_take_a_jobs_wire_name() -> None:
    with pytest.raises(ImproperlyConfigured, match=re.escape("Duplicate Wire Name 'test.echo'")):
        task(wire_name="test.echo")(plain)  # type: ignore[call-overload]


def test_declaring_a_task_registers_it_once_and_using_copies_share_it() -> None:
    declared = task(wire_name="test.tasks.throwaway", max_attempts=4)(plain)  # type: ignore[call-overload]
    try:
        definition = registry.get("test.tasks.throwaway")
        declared.using(queue_name="emails", priority=3)

        assert registry.get("test.tasks.throwaway") is definition
        assert definition is not None
        assert definition.queue == "default"
        assert definition.retry is not None
        assert definition.retry.max_attempts == 4
    finally:
        registry.unregister("test.tasks.throwaway")


def test_a_plain_django_task_is_refused() -> None:
    with pytest.raises(InvalidTask, match="BackWaveTask"):
        Task(func=plain)


def test_backend_check_passes_for_a_plain_configuration() -> None:
    assert task_backends["default"].check() == []


def test_backend_check_rejects_options() -> None:
    backend = BackWaveBackend("other", {"OPTIONS": {"poll": 1}})

    assert [m.id for m in backend.check()] == ["backwave.tasks.E003"]


def test_backend_check_accepts_a_timeout_option_and_rejects_a_bad_one() -> None:
    assert BackWaveBackend("other", {"OPTIONS": {"TIMEOUT": 30}}).check() == []
    assert [m.id for m in BackWaveBackend("other", {"OPTIONS": {"TIMEOUT": 0}}).check()] == [
        "backwave.tasks.E004"
    ]


def test_a_task_with_a_bad_timeout_or_retry_on_is_refused() -> None:
    with pytest.raises(InvalidTask, match="timeout"):
        task(timeout=-1)(plain)  # type: ignore[call-overload]
    with pytest.raises(InvalidTask, match="retry_on"):
        task(retry_on=["ValueError"])(plain)  # type: ignore[call-overload]


def test_backend_check_rejects_overlong_queue_names() -> None:
    backend = BackWaveBackend("other", {"QUEUES": ["q" * 300]})

    assert [m.id for m in backend.check()] == ["backwave.tasks.E002"]


# --- Results ----------------------------------------------------------------------------------


def test_results_follow_the_job_through_a_retry_to_success() -> None:
    result = tasks.add.enqueue(1, 2)
    t1 = timezone.now() + timedelta(seconds=1)
    first = claim(result.id, worker="worker-1", now=t1)

    running = tasks.add.get_result(result.id)
    assert running.status == TaskResultStatus.RUNNING
    assert running.worker_ids == ["worker-1"]
    assert running.started_at == running.last_attempted_at == t1
    assert running.finished_at is None

    report(
        first, Failure(next_due_time=t1, error="boom"), now=t1 + timedelta(seconds=1), failure_detail=DETAIL
    )
    retrying = tasks.add.get_result(result.id)
    assert retrying.status == TaskResultStatus.READY
    assert [e.exception_class_path for e in retrying.errors] == ["builtins.RuntimeError"]
    assert retrying.errors[0].exception_class is RuntimeError
    assert retrying.errors[0].traceback.startswith("Traceback (most recent call last):")
    assert retrying.attempts == 1

    t2 = t1 + timedelta(seconds=2)
    second = claim(result.id, worker="worker-2", now=t2)
    report(second, now=t2 + timedelta(seconds=1), output=3)
    done = tasks.add.get_result(result.id)
    assert done.status == TaskResultStatus.SUCCESSFUL
    assert done.return_value == 3
    assert done.worker_ids == ["worker-1", "worker-2"]
    assert done.attempts == 2
    assert done.started_at == t1
    assert done.last_attempted_at == t2
    assert done.finished_at == t2 + timedelta(seconds=1)
    assert done.is_finished


def test_dead_lettered_job_is_failed_with_its_errors() -> None:
    result = tasks.add.enqueue(1, 2)
    claimed = claim(result.id)
    report(claimed, Failure(next_due_time=None, error="boom"), failure_detail=DETAIL)

    failed = tasks.add.get_result(result.id)

    assert failed.status == TaskResultStatus.FAILED
    assert failed.finished_at == job_row(result.id).terminal_at
    assert [e.exception_class_path for e in failed.errors] == ["builtins.RuntimeError"]
    with pytest.raises(ValueError, match="Task failed"):
        _ = failed.return_value


def test_cancelled_job_is_failed_without_an_error() -> None:
    result = tasks.add.enqueue(1, 2)
    operator.cancel(uuid.UUID(result.id), actor="alice")

    cancelled = tasks.add.get_result(result.id)

    assert cancelled.status == TaskResultStatus.FAILED
    assert cancelled.finished_at is not None
    assert cancelled.errors == []


def test_quarantined_job_is_failed() -> None:
    result = tasks.add.enqueue(1, 2)
    report(claim(result.id), Unroutable(reason="payload no longer decodes"))

    assert tasks.add.get_result(result.id).status == TaskResultStatus.FAILED


def test_job_awaiting_a_parent_is_ready() -> None:
    parent = tasks.add.enqueue(1, 2)
    definition = registry.get("tests.jobsapp.tasks.add")
    assert definition is not None
    child = definition.using(parents=[uuid.UUID(parent.id)]).enqueue(3, 4)

    assert job_row(str(child.job_id)).state == JobState.AWAITING_PARENT
    assert tasks.add.get_result(str(child.job_id)).status == TaskResultStatus.READY


def test_requeue_starts_a_new_life_for_attempts_and_errors() -> None:
    result = tasks.add.enqueue(1, 2)
    report(claim(result.id), Failure(next_due_time=None, error="boom"), failure_detail=DETAIL)
    operator.requeue(uuid.UUID(result.id), actor="alice")

    requeued = tasks.add.get_result(result.id)

    assert requeued.status == TaskResultStatus.READY
    assert (requeued.attempts, requeued.errors, requeued.finished_at) == (0, [], None)


def test_attempts_count_even_without_a_transition_log(backwave_settings: Any) -> None:
    backwave_settings(HISTORY="OFF")
    result = tasks.add.enqueue(1, 2)
    claimed = claim(result.id)
    report(claimed, Failure(next_due_time=timezone.now(), error="boom"), failure_detail=DETAIL)
    claim(result.id, now=timezone.now() + timedelta(seconds=1))

    running = tasks.add.get_result(result.id)

    assert running.status == TaskResultStatus.RUNNING
    assert running.worker_ids == ["", ""]
    assert running.attempts == 2
    assert running.started_at is None


def test_refresh_reloads_the_status() -> None:
    result = tasks.add.enqueue(1, 2)
    report(claim(result.id), output=3)

    result.refresh()

    assert result.status == TaskResultStatus.SUCCESSFUL
    assert result.return_value == 3


def test_unknown_result_ids_do_not_exist() -> None:
    with pytest.raises(TaskResultDoesNotExist):
        tasks.add.get_result(str(uuid.uuid4()))
    with pytest.raises(TaskResultDoesNotExist):
        tasks.add.get_result("not-a-uuid")


def test_a_native_jobs_id_is_not_a_task_result() -> None:
    definition = registry.get("test.echo")
    assert definition is not None
    job_id = definition.enqueue(1).job_id

    with pytest.raises(TaskResultDoesNotExist, match=re.escape("'test.echo' is not a task")):
        task_backends["default"].get_result(str(job_id))


def test_get_result_through_another_task_is_a_mismatch() -> None:
    result = tasks.add.enqueue(1, 2)

    with pytest.raises(TaskResultMismatch):
        tasks.send_email.get_result(result.id)


def test_result_task_reports_the_jobs_queue() -> None:
    result = tasks.send_email.enqueue("a@example.com")

    fetched = task_backends["default"].get_result(result.id)

    assert isinstance(fetched.task, BackWaveTask)
    assert fetched.task.func is tasks.send_email.func
    assert fetched.task.queue_name == "emails"
    assert fetched.task.run_after is None


def test_task_error_parses_a_failure_detail() -> None:
    error = task_error("myapp.errors.Boom: it broke\nTraceback ...\nmyapp.errors.Boom: it broke\n")

    assert error.exception_class_path == "myapp.errors.Boom"
    assert error.traceback == "Traceback ...\nmyapp.errors.Boom: it broke\n"


# --- task_enqueued ----------------------------------------------------------------------------


def test_task_enqueued_is_sent_when_the_transaction_commits(
    task_signals: SignalLog, django_capture_on_commit_callbacks: Any
) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        result = tasks.add.enqueue(1, 2)
        assert task_signals.names() == []

    assert task_signals.names() == [("enqueued", "READY")]
    assert task_signals.events[0][1] == result.id
    assert task_signals.events[0][3] is BackWaveBackend


def test_task_enqueued_is_not_sent_when_the_transaction_rolls_back(
    task_signals: SignalLog, django_capture_on_commit_callbacks: Any
) -> None:
    with (
        django_capture_on_commit_callbacks(execute=True) as callbacks,
        pytest.raises(RuntimeError),
        transaction.atomic(),
    ):
        tasks.add.enqueue(1, 2)
        raise RuntimeError("roll back")

    assert callbacks == []
    assert task_signals.names() == []


def test_run_after_in_the_past_is_accepted_and_due_at_once() -> None:
    past = datetime(2020, 1, 1, tzinfo=UTC)

    result = tasks.add.using(run_after=past).enqueue(1, 2)

    assert job_row(result.id).due_time == past


def limited_plain(customer_id: str, n: int = 0) -> int:
    return n


def test_a_task_under_limits_and_a_partition_stores_its_buckets() -> None:
    declared = task(  # type: ignore[call-overload]
        wire_name="test.tasks.limited",
        limits=[Limit("customer-sync", concurrency=1, key="customer_id")],
        partition=lambda customer_id, n=0: f"tenant-{n}",
    )(limited_plain)
    try:
        definition = registry.get("test.tasks.limited")
        assert definition is not None
        assert [limit.name for limit in definition.limits] == ["customer-sync"]
        result = declared.enqueue("acme", n=3)
        stored = JobRecord.objects.values_list("partition", "limit_keys").get(job_id=uuid.UUID(result.id))
        assert stored == ("tenant-3", [["customer-sync", "acme"]])
    finally:
        registry.unregister("test.tasks.limited")


def test_a_task_with_bad_limits_is_refused() -> None:
    with pytest.raises(InvalidTask, match=r"limits\[0\] must be a Limit"):
        task(wire_name="test.tasks.bad-limits", limits=["stripe"])(limited_plain)  # type: ignore[call-overload]
