"""The Django Tasks backend: Django's ``@task`` functions run as BackWave jobs.

``TASKS = {"default": {"BACKEND": "backwave_django.tasks.BackWaveBackend"}}`` makes
``my_task.enqueue(...)`` store a job through the same client and store as ``@job`` (it joins the
caller's transaction), the worker run it through the same execution path, and
``get_result(id)`` read the job back as a ``TaskResult``. There is no second queue: a task *is* a
job definition in :mod:`backwave_django.registry`, found by its wire name (the task's
``module_path`` unless ``@task(wire_name=...)`` says otherwise).

Needs Django 6.0 or later (6.1 for the ``@task(...)`` keyword options). Nothing else in the
package imports this module, so BackWave itself still runs on Django 5.2.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, fields
from datetime import datetime, timedelta
from functools import partial
from typing import TYPE_CHECKING, Any

from django.apps import apps
from django.core.checks import CheckMessage, Error
from django.core.exceptions import ImproperlyConfigured
from django.db import transaction
from django.utils import timezone

try:
    from django.tasks import TaskContext, TaskResult, TaskResultStatus
    from django.tasks.backends.base import BaseTaskBackend
    from django.tasks.base import DEFAULT_TASK_PRIORITY, TASK_MAX_PRIORITY, TASK_MIN_PRIORITY, Task, TaskError
    from django.tasks.exceptions import InvalidTask, TaskResultDoesNotExist
    from django.tasks.signals import task_enqueued, task_finished, task_started
    from django.utils.json import normalize_json  # added with django.tasks in 6.0
except ImportError as exc:  # Django < 6.0 has no django.tasks
    import django

    raise ImproperlyConfigured(
        f"backwave_django.tasks.BackWaveBackend needs Django 6.0 or later (this is Django "
        f"{django.get_version()}). Declare jobs with backwave_django.job instead, or upgrade Django."
    ) from exc

from . import clock, registry
from .conf import get_settings
from .context import JobContext
from .core.limits import KeySource, Limit
from .core.outcomes import Outcome, outcome_effect
from .core.retry import DEFAULT_MAX_ATTEMPTS, Backoff, RetryPolicy
from .core.states import JobState
from .core.tags import Tag, normalize_tags
from .core.validation import require_timeout, validate_queue_name
from .database import jobs_database

__all__ = ["BACKEND_OPTIONS", "PRIORITY_TAG", "BackWaveBackend", "BackWaveTask"]

#: The backend's ``OPTIONS`` keys: ``TIMEOUT``, the time limit of its tasks that set none.
BACKEND_OPTIONS = ("TIMEOUT",)

#: The keyed tag in which releases before the ``priority`` column recorded a task's priority;
#: still read for jobs stored then (a job's ``priority`` column is what claims order by).
PRIORITY_TAG = "priority"

#: JobState → TaskResultStatus. Django has no "cancelled" status: every non-success end is FAILED.
STATUS_OF_STATE: dict[JobState, TaskResultStatus] = {
    JobState.SCHEDULED: TaskResultStatus.READY,
    JobState.AWAITING_PARENT: TaskResultStatus.READY,
    JobState.LEASED: TaskResultStatus.RUNNING,
    JobState.SUCCEEDED: TaskResultStatus.SUCCESSFUL,
    JobState.CANCELLED: TaskResultStatus.FAILED,
    JobState.DEAD_LETTERED: TaskResultStatus.FAILED,
    JobState.QUARANTINED: TaskResultStatus.FAILED,
}

#: Where a job's life (re)starts in its transition log: the enqueue entry, or an operator requeue.
_LIFE_STARTS = frozenset({JobState.SCHEDULED, JobState.AWAITING_PARENT})

if TYPE_CHECKING:
    _TaskBase = Task[Any, Any]
else:
    _TaskBase = Task  # django.tasks.Task is generic only in django-stubs


@dataclass(frozen=True, slots=True, kw_only=True)
class BackWaveTask(_TaskBase):
    """The backend's ``task_class``: Django's ``Task`` plus BackWave's per-task options.

    Django 6.1 passes extra ``@task(...)`` keywords here: ``@task(wire_name="send-invoice",
    max_attempts=5, backoff=[1, 5, 30], tags=["billing"])``. Constructing one (that is, decorating
    a function) registers it as a job definition, so the worker can route its jobs.
    """

    #: The job's identity in storage; default: the task's ``module_path``.
    wire_name: str | None = None
    #: The task's own retry policy; without both, ``BACKWAVE["RETRY"]`` applies.
    max_attempts: int | None = None
    backoff: Backoff | None = None
    #: Added to every job of this task (labels as strings, keyed tags as ``(key, value)``).
    tags: Sequence[Tag] = ()
    #: Seconds (or a timedelta) the function may run before it is stopped; None: the backend's
    #: ``OPTIONS["TIMEOUT"]``, else ``BACKWAVE["JOB_TIMEOUT"]``.
    timeout: float | timedelta | None = None
    #: Exceptions that retry (None: all but ``discard_on``) and that dead-letter at once.
    retry_on: Sequence[type[BaseException]] | None = None
    discard_on: Sequence[type[BaseException]] = ()
    #: Flow control (docs/flow-control.md): the limits its jobs are under, and their partition
    #: (an argument's name or a callable), as for ``@job(limits=..., partition=...)``.
    limits: Sequence[Limit] = ()
    partition: KeySource | None = None

    def __post_init__(self) -> None:
        # Lists would make the frozen dataclass unhashable; the values are validated by the backend.
        if isinstance(self.tags, list):
            object.__setattr__(self, "tags", tuple(tuple(t) if isinstance(t, list) else t for t in self.tags))
        for name in ("backoff", "retry_on", "discard_on", "limits"):
            if isinstance(getattr(self, name), list):
                object.__setattr__(self, name, tuple(getattr(self, name)))
        Task.__post_init__(self)  # the backend's validate_task(); zero-arg super() breaks with slots
        _register(self)

    @property
    def job_wire_name(self) -> str:
        """The wire name this task's jobs are stored and routed under."""
        return self.wire_name if self.wire_name is not None else self.module_path

    @property
    def definition(self) -> registry.JobDefinition[Any, Any] | None:
        """This task's job definition in the registry (None if another function took the name)."""
        definition = registry.get(self.job_wire_name)
        if definition is None or definition.func is not self.func:
            return None
        return definition


def _register(task: BackWaveTask) -> None:
    """Declare ``task`` as a job definition, once; ``.using(...)`` copies share the first one."""
    existing = registry.get(task.job_wire_name)
    if existing is not None and existing.func is task.func:
        return
    wire_name, hooks = task.job_wire_name, _TaskHooks(task)
    options: dict[str, Any] = {
        "queue": task.queue_name,
        "max_attempts": task.max_attempts,
        "backoff": task.backoff,
        "tags": task.tags,
        "hooks": hooks,
        "timeout": task.timeout,
        "retry_on": task.retry_on,
        "discard_on": task.discard_on,
        "limits": task.limits,
        "partition": task.partition,
    }
    # With takes_context the payload binds to the signature after Django's ``context`` parameter.
    declare: Any = registry.job  # (its overloads are typed for literal takes_context values)
    declare(wire_name, takes_context=task.takes_context, **options)(task.func)


def _unchecked_copy(task: BackWaveTask, **changes: Any) -> BackWaveTask:
    """A copy with some fields changed, without ``__post_init__`` (no validation, no registration).

    ``get_result`` describes stored jobs, which must stay readable after settings change, and
    ``validate_task`` runs Django's checks on a copy with the priority it handles itself.
    """
    copy = object.__new__(type(task))
    for field in fields(task):
        object.__setattr__(copy, field.name, changes.get(field.name, getattr(task, field.name)))
    return copy


# --- Mapping a job to a TaskResult --------------------------------------------------------------


def task_error(failure_detail: str) -> TaskError:
    """A ``TaskError`` from a recorded failure detail (``{qualified type}: {message}\\n{traceback}``)."""
    first_line, _, traceback = failure_detail.partition("\n")
    exception_class_path = first_line.partition(":")[0].strip()
    return TaskError(exception_class_path=exception_class_path, traceback=traceback)


def _priority_from(values: Iterable[str]) -> int:
    for value in values:
        try:
            priority = int(value)
        except ValueError:
            continue
        if TASK_MIN_PRIORITY <= priority <= TASK_MAX_PRIORITY:
            return priority
    return DEFAULT_TASK_PRIORITY


def _result_of(
    task: BackWaveTask,
    job: Mapping[str, Any],
    history: Sequence[tuple[int, int, str, str | None, datetime]],
    priority: int,
    backend_alias: str,
) -> TaskResult[Any, Any]:
    """Map one job row and its transition log to the ``TaskResult`` Django code expects."""
    state = JobState(job["state"])
    worker_ids: list[str] = []
    claimed_at: list[datetime] = []
    errors: list[TaskError] = []
    for entry_state, attempt, actor, failure_detail, recorded_at in history:
        if attempt == 0 and entry_state in _LIFE_STARTS:  # enqueued, or requeued by an operator
            worker_ids, claimed_at, errors = [], [], []
        elif entry_state == JobState.LEASED:
            worker_ids.append(actor)
            claimed_at.append(recorded_at)
        if failure_detail is not None:
            errors.append(task_error(failure_detail))
    # Attempts whose claim is not in the log (HISTORY=OFF, or trimmed at MAX_TRANSITIONS_PER_JOB)
    # still count: TaskResult.attempts is len(worker_ids).
    worker_ids = [""] * (job["attempt"] - len(worker_ids)) + worker_ids
    payload = job["payload"] if isinstance(job["payload"], dict) else {}
    due_time: datetime = job["due_time"]
    result: TaskResult[Any, Any] = TaskResult(
        task=_unchecked_copy(
            task,
            queue_name=job["queue"],
            priority=priority,
            run_after=due_time if due_time != job["enqueued_at"] else None,
        ),
        id=str(job["job_id"]),
        status=STATUS_OF_STATE[state],
        enqueued_at=job["enqueued_at"],
        started_at=claimed_at[0] if claimed_at else None,
        finished_at=job["terminal_at"],
        last_attempted_at=claimed_at[-1] if claimed_at else None,
        args=payload.get("args", []),
        kwargs=payload.get("kwargs", {}),
        backend=backend_alias,
        errors=errors,
        worker_ids=worker_ids,
    )
    if state is JobState.SUCCEEDED:
        object.__setattr__(result, "_return_value", job["output"])
    return result


def _task_of(wire_name: str) -> BackWaveTask | None:
    definition = registry.get(wire_name)
    hooks = definition.hooks if definition is not None else None
    return hooks.task if isinstance(hooks, _TaskHooks) else None


# --- The worker side: Django's context and signals around each attempt --------------------------


@dataclass(frozen=True, eq=False)
class _TaskHooks:
    """Execution hooks of a task's job definition (see ``registry.ExecutionHooks``)."""

    task: BackWaveTask

    def start(self, context: JobContext) -> _TaskAttempt:
        """Read the job back as a RUNNING ``TaskResult`` and send ``task_started``."""
        backend = self.task.get_backend()
        result = backend.get_result(str(context.job_id))
        task_started.send(sender=type(backend), task_result=result)
        return _TaskAttempt(result=result, sender=type(backend))


@dataclass(frozen=True, eq=False)
class _TaskAttempt:
    result: TaskResult[Any, Any]
    sender: type[BaseTaskBackend]

    @property
    def handler_context(self) -> TaskContext[Any, Any]:
        return TaskContext(task_result=self.result)

    def finish(self, outcome: Outcome, output: Any, failure_detail: str | None) -> None:
        """Update the attempt's ``TaskResult`` to what its outcome makes it; send ``task_finished``.

        A failure with a retry left is READY again (with the new error); Django's ``FAILED`` is
        reserved for the end. Called inside the handler's ``except`` block where there is one, so
        Django's logging receiver attaches the traceback.
        """
        result = self.result
        state = outcome_effect(outcome).state
        object.__setattr__(result, "status", STATUS_OF_STATE[state])
        if state.is_terminal:
            # The worker's clock (the harness's virtual one in tests), as the job's terminal_at.
            object.__setattr__(result, "finished_at", clock.now())
        if failure_detail is not None:
            result.errors.append(task_error(failure_detail))
        if state is JobState.SUCCEEDED:
            object.__setattr__(result, "_return_value", normalize_json(output))
        task_finished.send(sender=self.sender, task_result=result)


# --- The backend --------------------------------------------------------------------------------


class BackWaveBackend(BaseTaskBackend):
    """Django Tasks on BackWave: tasks are jobs, results are read from the job and its log."""

    task_class = BackWaveTask

    supports_defer = True
    supports_async_task = True
    supports_get_result = True
    #: Django's -100…100 is the job's priority: higher is claimed first within a queue.
    supports_priority = True

    def validate_task(self, task: Task[Any, Any]) -> None:
        """Django's checks, plus BackWave's: options, queue name, wire name length, aware run_after."""
        if not isinstance(task, BackWaveTask):
            raise InvalidTask(
                f"BackWaveBackend runs tasks of its task_class BackWaveTask (declare them with @task "
                f"while TASKS names this backend), got {type(task).__name__}."
            )
        priority = task.priority
        if isinstance(priority, bool) or not isinstance(priority, int):
            raise InvalidTask(f"priority must be a whole number, got {priority!r}.")
        super().validate_task(_unchecked_copy(task, priority=DEFAULT_TASK_PRIORITY))
        if not TASK_MIN_PRIORITY <= priority <= TASK_MAX_PRIORITY:
            raise InvalidTask(
                f"priority must be a whole number between {TASK_MIN_PRIORITY} and {TASK_MAX_PRIORITY}, "
                f"got {priority}."
            )
        if task.run_after is not None and (
            not isinstance(task.run_after, datetime) or timezone.is_naive(task.run_after)
        ):
            raise InvalidTask(f"run_after must be an aware datetime, got {task.run_after!r}.")
        try:
            validate_queue_name(task.queue_name, "queue_name")
            normalize_tags(task.tags)
            if task.max_attempts is not None or task.backoff is not None:
                RetryPolicy(
                    max_attempts=DEFAULT_MAX_ATTEMPTS if task.max_attempts is None else task.max_attempts,
                    backoff=task.backoff,
                )
            if task.timeout is not None:
                require_timeout(task.timeout)
            if task.retry_on is not None:
                registry.exception_classes("retry_on", task.retry_on)
            registry.exception_classes("discard_on", task.discard_on)
            registry.limit_list(task.job_wire_name, task.limits)
        except (TypeError, ValueError) as exc:
            raise InvalidTask(f"Task {task.module_path}: {exc}") from None
        wire_name = task.job_wire_name
        if not isinstance(wire_name, str) or not wire_name.strip():
            raise InvalidTask(f"wire_name must be a non-empty string, got {wire_name!r}.")
        limit = get_settings().max_wire_name_length
        if len(wire_name) > limit:
            raise InvalidTask(
                f"The wire name of task {task.module_path} is {len(wire_name)} characters; "
                f"MAX_WIRE_NAME_LENGTH is {limit}. Give it a shorter one with @task(wire_name=...)."
            )

    def enqueue(self, task: Task[Any, Any], args: Any, kwargs: Any) -> TaskResult[Any, Any]:
        """Store the task as a job (in the caller's transaction); ``task_enqueued`` follows the commit."""
        from .models import JobRecord

        self.validate_task(task)
        assert isinstance(task, BackWaveTask)  # validate_task refuses anything else
        definition = task.definition
        if definition is None:
            raise InvalidTask(
                f"Wire name {task.job_wire_name!r} belongs to another job, not to {task.module_path}."
            )
        # Django hands tasks JSON-normalised arguments (a tuple arrives as a list); so do we.
        # A value that cannot be normalised is left for encode() to refuse, naming the argument.
        try:
            args, kwargs = normalize_json(list(args)), normalize_json(dict(kwargs))
        except (TypeError, ValueError):
            args, kwargs = list(args), dict(kwargs)
        receipt = definition.using(
            queue=task.queue_name,
            run_after=task.run_after,
            priority=task.priority,
            timeout=task.timeout if task.timeout is not None else self.default_timeout,
        ).enqueue(*args, **kwargs)
        using = jobs_database()
        enqueued_at = (
            JobRecord.objects.using(using)
            .filter(job_id=receipt.job_id)
            .values_list("enqueued_at", flat=True)
            .get()
        )
        result: TaskResult[Any, Any] = TaskResult(
            task=task,
            id=str(receipt.job_id),
            status=TaskResultStatus.READY,
            enqueued_at=enqueued_at,
            started_at=None,
            finished_at=None,
            last_attempted_at=None,
            args=args,
            kwargs=kwargs,
            backend=self.alias,
            errors=[],
            worker_ids=[],
        )
        # The job exists for workers only once the caller's transaction commits (at once outside one).
        transaction.on_commit(partial(task_enqueued.send, type(self), task_result=result), using=using)
        return result

    def get_result(self, result_id: str) -> TaskResult[Any, Any]:
        """The task's job as a ``TaskResult``; ``TaskResultDoesNotExist`` for an unknown id.

        Also raised for a job that is not a task of this process's registry (a ``@job`` job, or a
        task whose module this process never imported).
        """
        from .models import JobRecord, JobTag, JobTransition

        try:
            job_id = uuid.UUID(str(result_id))
        except ValueError:
            raise TaskResultDoesNotExist(result_id) from None
        using = jobs_database()
        job = (
            JobRecord.objects.using(using)
            .filter(job_id=job_id)
            .values(
                "sequence",
                "job_id",
                "wire_name",
                "queue",
                "payload",
                "state",
                "due_time",
                "attempt",
                "terminal_at",
                "output",
                "enqueued_at",
                "priority",
            )
            .first()
        )
        if job is None:
            raise TaskResultDoesNotExist(result_id)
        task = _task_of(job["wire_name"])
        if task is None:
            raise TaskResultDoesNotExist(
                f"{result_id}: job with wire name {job['wire_name']!r} is not a task registered in this "
                "process (import the module that defines the task)"
            )
        history = list(
            JobTransition.objects.using(using)
            .filter(job_id=job["sequence"])
            .order_by("ordinal")
            .values_list("state", "attempt", "actor", "failure_detail", "recorded_at")
        )
        priority = job["priority"]
        if priority == DEFAULT_TASK_PRIORITY:  # maybe a job stored before the column: its tag
            priority = _priority_from(
                JobTag.objects.using(using)
                .filter(job_id=job["sequence"], key=PRIORITY_TAG)
                .values_list("value", flat=True)
            )
        return _result_of(task, job, history, priority, self.alias)

    def check(self, **kwargs: Any) -> list[CheckMessage]:
        """System checks for this backend (collected by Django's ``check_tasks``)."""
        messages: list[CheckMessage] = []
        obj = f"settings.TASKS[{self.alias!r}]"
        if not apps.is_installed("backwave_django"):
            messages.append(
                Error(
                    "BackWaveBackend stores tasks in backwave_django's tables, but the app is not installed.",
                    hint="Add 'backwave_django' to INSTALLED_APPS and run migrate.",
                    obj=obj,
                    id="backwave.tasks.E001",
                )
            )
        for queue in sorted(self.queues):
            try:
                validate_queue_name(queue)
            except (TypeError, ValueError) as exc:
                messages.append(
                    Error(
                        f"QUEUES entry {queue!r}: {exc}",
                        hint='Use names that follow the queue-name rule (docs/cli.md, "Queues").',
                        obj=obj,
                        id="backwave.tasks.E002",
                    )
                )
        unknown = sorted(set(self.options) - set(BACKEND_OPTIONS))
        if unknown:
            messages.append(
                Error(
                    f"BackWaveBackend has unknown OPTIONS {unknown}; it takes only "
                    f"{', '.join(BACKEND_OPTIONS)}.",
                    hint="Configure leases, retries and limits in settings.BACKWAVE; per-task options go "
                    "in @task(max_attempts=..., backoff=..., timeout=..., tags=..., wire_name=...).",
                    obj=obj,
                    id="backwave.tasks.E003",
                )
            )
        try:
            self.default_timeout  # noqa: B018 (validates OPTIONS["TIMEOUT"])
        except (TypeError, ValueError) as exc:
            messages.append(
                Error(
                    f"OPTIONS['TIMEOUT']: {exc}",
                    hint="Give seconds greater than zero, a timedelta, or None.",
                    obj=obj,
                    id="backwave.tasks.E004",
                )
            )
        return messages

    @property
    def default_timeout(self) -> float | None:
        """``OPTIONS["TIMEOUT"]``: the time limit of this backend's tasks that set none themselves."""
        value = self.options.get("TIMEOUT")
        return None if value is None else require_timeout(value, "OPTIONS['TIMEOUT']")
