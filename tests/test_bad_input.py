"""Bad input, table-driven: every refusal is a clear error (or a plain result) and writes nothing.

Each row names the call, the exception type it must raise and a pattern its message must match:
the message names the offending value and the limit or expectation, so the user knows what to
fix. Around every call the row counts of all backwave tables are compared. The same table is
documented in ``docs/errors.md``; keep the two in step.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.contrib import admin
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command
from django.urls import URLPattern, URLResolver

from backwave_django import (
    CancelResult,
    EnqueueError,
    EnqueueResult,
    Failure,
    OutcomeReport,
    OutputTooLarge,
    RequeueResult,
    RetryPolicy,
    ScheduleSpec,
    Success,
    TerminalStateClass,
    TriggerScheduleResult,
    Unique,
    WorkflowDefinition,
    WorkflowError,
    enqueue_many,
    job,
    operator,
    store,
    workflow,
)
from backwave_django.core.workflows import WorkflowCycleError
from backwave_django.registry import unregister
from tests.jobsapp import jobs
from tests.worker.conftest import Workers

from .conftest import LEASE, T0, WORKER, enqueue, lease, new_job, report
from .faults.conftest import row_counts, snapshot

pytestmark = pytest.mark.django_db

# --- The world the calls run against ----------------------------------------------------------


@dataclass(frozen=True)
class World:
    pending: uuid.UUID
    leased: uuid.UUID
    dead: uuid.UUID


@pytest.fixture
def world() -> World:
    pending = enqueue(due_time=T0 + timedelta(days=365 * 10))
    leased_job = enqueue(queue="busy")
    lease(queue="busy", now=T0)
    dead = enqueue(queue="dead")
    lease(queue="dead", now=T0)
    report(dead, Failure(next_due_time=None, error="boom"), now=T0)
    store.upsert_schedule(
        ScheduleSpec(schedule_id="nightly", cron="0 2 * * *", wire_name="test.echo", payload={}), now=T0
    )
    return World(pending=pending, leased=leased_job, dead=dead)


class Unserializable:
    """An object that would run code if it were ever unpickled; JSON refuses it."""

    def __reduce__(self) -> tuple[Any, ...]:
        return (print, ("unpickled!",))


def _ids(n: int) -> list[uuid.UUID]:
    return [uuid.uuid4() for _ in range(n)]


NAIVE = datetime(2026, 1, 1, 12, 0)
LONG_WIRE_NAME = "w" * 129


@pytest.fixture
def long_named_job() -> Iterator[Any]:
    definition = job(LONG_WIRE_NAME)(lambda: None)
    yield definition
    unregister(LONG_WIRE_NAME)


# --- The table --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Row:
    """One bad input: ``call(world)`` must raise ``error`` with a message matching ``message``."""

    id: str
    call: Callable[[World], Any]
    error: type[BaseException]
    message: str


def _report(world: World, **fields: Any) -> Any:
    fields.setdefault("outcome", Success())
    return store.report_outcome(
        OutcomeReport(job_id=world.leased, worker_id=WORKER, attempt=1, **fields), now=T0
    )


def _schedule(**fields: Any) -> None:
    spec = {"schedule_id": "bad", "cron": "0 2 * * *", "wire_name": "test.echo", "payload": {}, **fields}
    store.upsert_schedule(ScheduleSpec(**spec), now=T0)


CLIENT_ROWS = [
    Row(
        "payload-too-large",
        lambda w: jobs.echo.enqueue("x" * 70_000),
        EnqueueError,
        r"payload for wire name 'test\.echo' is 70,0\d\d bytes; MAX_PAYLOAD_BYTES is 65,536",
    ),
    Row(
        "too-many-parents",
        lambda w: jobs.echo.using(parents=_ids(17)).enqueue(),
        EnqueueError,
        r"has 17 parents; MAX_PARENTS_PER_JOB is 16",
    ),
    Row(
        "unknown-parent",
        lambda w: jobs.echo.using(parents=[uuid.UUID(int=7)]).enqueue(),
        EnqueueError,
        r"names parent job\(s\) that do not exist: 00000000-0000-0000-0000-000000000007",
    ),
    Row(
        "arg-is-a-set",
        lambda w: jobs.echo.enqueue({1, 2}),
        TypeError,
        r"argument 'args\[0\]' of job 'test\.echo' is not JSON-serializable",
    ),
    Row(
        "kwarg-is-a-datetime",
        lambda w: jobs.echo.enqueue(when=datetime.now(UTC)),
        TypeError,
        r"argument 'when' of job 'test\.echo' is not JSON-serializable",
    ),
    Row(
        "arg-with-__reduce__",
        lambda w: jobs.echo.enqueue(Unserializable()),
        TypeError,
        r"argument 'args\[0\]' of job 'test\.echo' is not JSON-serializable",
    ),
    Row(
        "arg-is-nan",
        lambda w: jobs.echo.enqueue(float("nan")),
        TypeError,
        r"argument 'args\[0\]' of job 'test\.echo' is not JSON-serializable",
    ),
    Row(
        "arg-is-a-tuple",
        lambda w: jobs.echo.enqueue((1, 2)),
        TypeError,
        r"does not survive a JSON round trip \(tuple comes back as list\)",
    ),
    Row(
        "arguments-do-not-bind",
        lambda w: jobs.flaky.enqueue(),  # type: ignore[call-arg]
        TypeError,
        r"test\.flaky: missing a required argument: 'fail_until'",
    ),
    Row(
        "naive-run-after",
        lambda w: jobs.echo.using(run_after=NAIVE).enqueue(),
        ValueError,
        r"run_after must be timezone-aware, got the naive datetime 2026-01-01T12:00:00",
    ),
    Row(
        "run-after-not-a-time",
        lambda w: jobs.echo.using(run_after=5).enqueue(),  # type: ignore[arg-type]
        TypeError,
        r"run_after must be a timedelta or an aware datetime, got 5",
    ),
    Row(
        "queue-name-too-long",
        lambda w: jobs.echo.using(queue="q" * 129).enqueue(),
        ValueError,
        r"queue is at most 128 characters, got 129",
    ),
    Row(
        "empty-label", lambda w: jobs.echo.using(tags=[""]).enqueue(), ValueError, r"value must be non-empty"
    ),
    Row(
        "empty-tag-key",
        lambda w: jobs.echo.using(tags=[("", "v")]).enqueue(),
        ValueError,
        r"key must be non-empty",
    ),
    Row(
        "job-id-not-uuid-or-str",
        lambda w: jobs.echo.using(job_id=42).enqueue(),  # type: ignore[arg-type]
        TypeError,
        r"job_id must be a UUID or a str key, got int",
    ),
    Row(
        "parent-not-a-uuid",
        lambda w: jobs.echo.using(parents=["not-a-uuid"]).enqueue(),  # type: ignore[list-item]
        TypeError,
        r"parents\[0\] must be a uuid\.UUID, got str",
    ),
    Row(
        "enqueue-many-not-prepared",
        lambda w: enqueue_many([jobs.echo.prepare(), "echo"]),  # type: ignore[list-item]
        TypeError,
        r"enqueue_many takes prepared jobs \(job\.prepare\(\.\.\.\)\); item 1 is 'echo'",
    ),
    Row(
        "enqueue-many-all-oversized",
        lambda w: enqueue_many([jobs.echo.prepare("x" * 70_000), jobs.echo.prepare("y" * 70_000)]),
        EnqueueError,
        r"MAX_PAYLOAD_BYTES is 65,536",
    ),
]

STORE_ROWS = [
    Row(
        "store-naive-now",
        lambda w: store.enqueue(new_job(), now=NAIVE),
        ValueError,
        r"now must be timezone-aware, got the naive datetime 2026-01-01T12:00:00",
    ),
    Row(
        "new-job-naive-due-time",
        lambda w: new_job(due_time=NAIVE),
        ValueError,
        r"due_time must be timezone-aware, got the naive datetime",
    ),
    Row(
        "new-job-payload-not-json",
        lambda w: new_job(payload={"when": datetime.now(UTC)}),
        TypeError,
        r"payload must be JSON-serializable: Object of type datetime is not JSON serializable",
    ),
    Row(
        "store-enqueue-not-a-newjob",
        lambda w: store.enqueue({}, now=T0),  # type: ignore[arg-type]
        TypeError,
        r"new_job must be a NewJob, got dict",
    ),
    Row(
        "claim-negative-max-jobs",
        lambda w: store.claim(
            worker_id=WORKER, queues=["default"], max_jobs=-1, lease_duration=LEASE, now=T0
        ),
        ValueError,
        r"max_jobs must be an int >= 0, got -1",
    ),
    Row(
        "claim-queues-is-a-string",
        lambda w: store.claim(worker_id=WORKER, queues="default", max_jobs=1, lease_duration=LEASE, now=T0),
        TypeError,
        r"queues must be a list of queue names, got 'default'",
    ),
    Row(
        "claim-zero-lease",
        lambda w: store.claim(
            worker_id=WORKER, queues=["default"], max_jobs=1, lease_duration=timedelta(0), now=T0
        ),
        ValueError,
        r"lease_duration must be greater than zero, got 0:00:00",
    ),
    Row(
        "claim-empty-worker-id",
        lambda w: store.claim(worker_id="", queues=["default"], max_jobs=1, lease_duration=LEASE, now=T0),
        ValueError,
        r"worker_id must be a non-empty string, got ''",
    ),
    Row(
        "expire-negative-max-jobs",
        lambda w: store.expire_leases(now=T0, queues=["busy"], retry=RetryPolicy(), max_jobs=-1),
        ValueError,
        r"max_jobs must be an int >= 0, got -1",
    ),
    Row(
        "purge-negative-max-jobs",
        lambda w: store.purge_terminal(
            TerminalStateClass.DEAD_LETTERED_OR_QUARANTINED, terminal_before=T0, max_jobs=-5
        ),
        ValueError,
        r"max_jobs must be an int >= 0, got -5",
    ),
    Row(
        "purge-unknown-state-class",
        lambda w: store.purge_terminal("dead", terminal_before=T0),  # type: ignore[arg-type]
        ValueError,
        r"state_class must be a TerminalStateClass .*got 'dead'",
    ),
    Row(
        "heartbeat-job-id-not-uuid",
        lambda w: store.heartbeat(worker_id=WORKER, job_ids=[str(w.leased)], lease_duration=LEASE, now=T0),  # type: ignore[list-item]
        TypeError,
        r"job_ids\[\] must be a uuid\.UUID, got str",
    ),
    Row(
        "output-too-large",
        lambda w: _report(w, output="x" * 70_000),
        OutputTooLarge,
        r"output of job .* is 70,002 bytes; MAX_OUTPUT_BYTES is 65,536",
    ),
    Row(
        "output-not-json",
        lambda w: _report(w, output={1, 2}),
        TypeError,
        r"output must be JSON-serializable: Object of type set is not JSON serializable",
    ),
    Row(
        "report-naive-retry-time",
        lambda w: _report(w, outcome=Failure(next_due_time=NAIVE, error="x")),
        ValueError,
        r"next_due_time must be timezone-aware",
    ),
]

OPERATOR_ROWS = [
    Row(
        "cancel-id-not-a-uuid",
        lambda w: operator.cancel(str(w.pending), actor="ops"),  # type: ignore[arg-type]
        TypeError,
        r"job_id must be a uuid\.UUID, got str",
    ),
    Row(
        "cancel-empty-actor",
        lambda w: operator.cancel(w.pending, actor=""),
        ValueError,
        r"actor must be a non-empty string naming who acts, got ''",
    ),
    Row(
        "requeue-id-not-a-uuid",
        lambda w: operator.requeue(123, actor="ops"),  # type: ignore[arg-type]
        TypeError,
        r"job_id must be a uuid\.UUID, got int",
    ),
    Row(
        "negative-concurrency-limit",
        lambda w: operator.set_concurrency_limit("busy", -1, actor="ops"),
        ValueError,
        r"limit must be None or an int >= 0, got -1",
    ),
    Row(
        "concurrency-limit-as-text",
        lambda w: operator.set_concurrency_limit("busy", "5", actor="ops"),  # type: ignore[arg-type]
        ValueError,
        r"limit must be None or an int >= 0, got '5'",
    ),
    Row(
        "concurrency-limit-as-bool",
        lambda w: operator.set_concurrency_limit("busy", True, actor="ops"),
        ValueError,
        r"limit must be None or an int >= 0, got True",
    ),
    Row(
        "pause-queue-name-too-long",
        lambda w: operator.pause_queue("q" * 129, actor="ops"),
        ValueError,
        r"queue is at most 128 characters, got 129",
    ),
    Row(
        "pause-queue-name-breaks-the-rule",
        lambda w: operator.pause_queue("bad queue!", actor="ops", create=True),
        ValueError,
        r"queue 'bad queue!' is not a valid queue name: a queue name is 1 to 128 characters .*; it contains ' '",
    ),
    Row(
        "pause-queue-nothing-uses",
        lambda w: operator.pause_queue("biling", actor="ops"),
        operator.UnknownQueueError,
        r"no declared job, schedule or stored job uses queue 'biling'; did you mean 'billing'\?",
    ),
    Row(
        "set-limit-nothing-uses",
        lambda w: operator.set_limit("paymnet-api", rate=5, actor="ops"),
        operator.UnknownLimitError,
        r"^no worker declares limit 'paymnet-api' and no job uses it$",
    ),
]

SCHEDULE_ROWS = [
    Row(
        "cron-garbage",
        lambda w: _schedule(cron="every day"),
        ValueError,
        r"Invalid cron expression 'every day'",
    ),
    Row("cron-macro", lambda w: _schedule(cron="@daily"), ValueError, r"Invalid cron expression '@daily'"),
    Row(
        "cron-never-fires",
        lambda w: _schedule(cron="0 0 30 2 *"),
        ValueError,
        r"'0 0 30 2 \*' never fires: February has no 30th",
    ),
    Row(
        "cron-out-of-range",
        lambda w: _schedule(cron="61 * * * *"),
        ValueError,
        r"Invalid cron expression '61 \* \* \* \*': .*'61' is out of range 0-59",
    ),
    Row(
        "cron-seven-fields",
        lambda w: _schedule(cron="0 0 0 * * * *"),
        ValueError,
        r"Invalid cron expression '0 0 0 \* \* \* \*'",
    ),
    Row(
        "unknown-time-zone",
        lambda w: _schedule(time_zone="Mars/Olympus_Mons"),
        ValueError,
        r"Unresolvable time-zone id 'Mars/Olympus_Mons'",
    ),
    Row(
        "schedule-payload-not-json",
        lambda w: _schedule(payload={"at": datetime.now(UTC)}),
        TypeError,
        r"payload must be JSON-serializable",
    ),
    Row(
        "schedule-wire-name-too-long",
        lambda w: _schedule(wire_name=LONG_WIRE_NAME),
        ValueError,
        r"is 129 characters; MAX_WIRE_NAME_LENGTH is 128",
    ),
]


def _cycle() -> Any:
    a, b = uuid.UUID(int=0xA), uuid.UUID(int=0xB)
    members = (new_job(job_id=a, parents=[b]), new_job(job_id=b, parents=[a]))
    return store.enqueue_workflow(WorkflowDefinition(workflow_id=uuid.uuid4(), members=members), now=T0)


def _leaky_workflow(outside: uuid.UUID) -> Any:
    wf = workflow(name="leaky")
    wf.add(jobs.echo.using(parents=[outside]).prepare())
    return wf.enqueue()


WORKFLOW_ROWS = [
    Row(
        "workflow-parent-outside",
        lambda w: _leaky_workflow(w.pending),
        WorkflowError,
        r"workflow 'leaky': job 'test\.echo' \(.*\) names parent\(s\) outside the workflow: "
        r"[0-9a-f-]{36}; a member's parents must be members too",
    ),
    Row("workflow-empty", lambda w: workflow(name="empty").enqueue(), WorkflowError, r"workflow 'empty' has no jobs"),
    Row(
        "workflow-cycle",
        lambda w: _cycle(),
        WorkflowCycleError,
        r"workflow members form a dependency cycle, so none of them could ever run: 'send-invoice' "
        r"\(00000000-0000-0000-0000-00000000000[ab]\) → ",
    ),
    Row(
        "workflow-member-not-a-newjob",
        lambda w: WorkflowDefinition(workflow_id=uuid.uuid4(), members=[{}]),  # type: ignore[arg-type]
        TypeError,
        r"members\[0\] must be a NewJob, got dict",
    ),
    Row(
        "workflow-unique-member",
        lambda w: workflow().add(jobs.echo.using(unique=Unique()).prepare()),
        ValueError,
        r"job 'test\.echo' is a unique job; a workflow member cannot be one",
    ),
    Row(
        "workflow-append-without-id",
        lambda w: workflow(append=True),
        ValueError,
        r"append=True needs the workflow_id of the workflow to add jobs to",
    ),
]


def _renewed(job_id: uuid.UUID) -> list[bool]:
    beats = store.heartbeat(worker_id=WORKER, job_ids=[job_id], lease_duration=LEASE, now=T0)
    return [beat.renewed for beat in beats]


ALL_ROWS = CLIENT_ROWS + STORE_ROWS + OPERATOR_ROWS + SCHEDULE_ROWS + WORKFLOW_ROWS


@pytest.mark.parametrize("bad", ALL_ROWS, ids=[r.id for r in ALL_ROWS])
def test_bad_input_is_refused_with_a_clear_error_and_writes_nothing(bad: Row, world: World) -> None:
    before = snapshot()
    with pytest.raises(bad.error) as raised:
        bad.call(world)
    assert type(raised.value) is bad.error, f"{type(raised.value).__name__}: {raised.value}"
    assert re.search(bad.message, str(raised.value)), str(raised.value)
    assert snapshot() == before


def test_a_wire_name_over_the_limit_is_refused_at_enqueue(long_named_job: Any, world: World) -> None:
    before = row_counts()
    with pytest.raises(EnqueueError, match=r"is 129 characters; MAX_WIRE_NAME_LENGTH is 128") as raised:
        long_named_job.enqueue()
    assert raised.value.result is EnqueueResult.WIRE_NAME_TOO_LONG
    assert row_counts() == before


def test_enqueue_many_with_one_refused_job_writes_none_of_its_batch(world: World) -> None:
    before = row_counts()
    batch = [jobs.echo.prepare(1), jobs.echo.prepare("x" * 70_000), jobs.echo.prepare(3)]
    with pytest.raises(EnqueueError, match=r"MAX_PAYLOAD_BYTES is 65,536"):
        enqueue_many(batch)
    assert row_counts() == before


@pytest.mark.parametrize(
    ("job", "expected"),
    [
        (lambda: new_job(payload={"blob": "x" * 70_000}), EnqueueResult.PAYLOAD_TOO_LARGE),
        (lambda: new_job(wire_name=LONG_WIRE_NAME), EnqueueResult.WIRE_NAME_TOO_LONG),
        (lambda: new_job(parents=tuple(_ids(17))), EnqueueResult.TOO_MANY_PARENTS),
        (lambda: new_job(parents=(uuid.UUID(int=7),)), EnqueueResult.UNKNOWN_PARENT),
    ],
    ids=["payload-too-large", "wire-name-too-long", "too-many-parents", "unknown-parent"],
)
def test_the_store_answers_a_broken_bound_with_its_result_and_stores_nothing(
    job: Any, expected: EnqueueResult, world: World
) -> None:
    before = snapshot()
    assert store.enqueue(job(), now=T0) is expected
    assert store.enqueue_many([job(), job()], now=T0) == [expected, expected]
    assert snapshot() == before


@pytest.mark.parametrize(
    ("call", "expected"),
    [
        (lambda w: jobs.echo.using(parents=_ids(17)).enqueue(), EnqueueResult.TOO_MANY_PARENTS),
        (lambda w: jobs.echo.using(parents=[uuid.UUID(int=7)]).enqueue(), EnqueueResult.UNKNOWN_PARENT),
        (lambda w: jobs.echo.enqueue("x" * 70_000), EnqueueResult.PAYLOAD_TOO_LARGE),
    ],
    ids=["too-many-parents", "unknown-parent", "payload-too-large"],
)
def test_enqueue_errors_carry_their_machine_readable_result(
    call: Any, expected: EnqueueResult, world: World
) -> None:
    with pytest.raises(EnqueueError) as raised:
        call(world)
    assert raised.value.result is expected


# --- Calls that answer with a result, not an error --------------------------------------------


@pytest.mark.parametrize(
    ("call", "expected"),
    [
        (lambda w: operator.cancel(uuid.UUID(int=1), actor="ops"), CancelResult.NOT_CANCELLABLE),
        (lambda w: operator.cancel(w.dead, actor="ops"), CancelResult.NOT_CANCELLABLE),
        (lambda w: operator.requeue(uuid.UUID(int=1), actor="ops"), RequeueResult.NOT_REQUEUEABLE),
        (lambda w: operator.requeue(w.pending, actor="ops"), RequeueResult.NOT_REQUEUEABLE),
        (
            lambda w: operator.trigger_schedule("no-such-schedule", actor="ops"),
            TriggerScheduleResult.SCHEDULE_NOT_FOUND,
        ),
        (lambda w: store.job_output(uuid.UUID(int=1)), None),
        (lambda w: store.claim(worker_id=WORKER, queues=[], max_jobs=5, lease_duration=LEASE, now=T0), []),
        (lambda w: store.expire_leases(now=T0 + LEASE, queues=[], retry=RetryPolicy()), 0),
        (lambda w: _renewed(uuid.UUID(int=1)), [False]),
        (lambda w: store.remove_schedule("no-such-schedule"), False),
    ],
    ids=[
        "cancel-unknown-id",
        "cancel-terminal-job",
        "requeue-unknown-id",
        "requeue-pending-job",
        "trigger-unknown-schedule",
        "output-of-unknown-job",
        "claim-no-queues",
        "expire-no-queues",
        "heartbeat-unknown-job",
        "remove-unknown-schedule",
    ],
)
def test_unknown_ids_and_empty_requests_answer_with_a_result_and_write_nothing(
    call: Any, expected: Any, world: World
) -> None:
    before = snapshot()
    assert call(world) == expected
    assert snapshot() == before


# --- Worker command flags ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--concurrency", "-1"], r"argument --concurrency: expected a positive integer, got -1"),
        (["--concurrency", "0"], r"argument --concurrency: expected a positive integer, got 0"),
        (["--concurrency", "many"], r"argument --concurrency: expected a positive integer, got 'many'"),
        (["--processes", "0"], r"argument --processes: expected a positive integer, got 0"),
        (["--max-jobs", "-3"], r"argument --max-jobs: expected a positive integer, got -3"),
        (
            ["--shutdown-timeout", "-1"],
            r"argument --shutdown-timeout: expected a number of seconds >= 0, got -1",
        ),
        (["--shutdown-timeout", "soon"], r"expected a number of seconds, got 'soon'"),
        (["--give-up-after", "-5"], r"argument --give-up-after: expected a number of seconds >= 0, got -5.0"),
        (["--frobnicate"], r"unrecognized arguments: --frobnicate"),
        (["--queues", ","], r"Strict dispatch needs at least one queue"),
        (["--queues", "q" * 129], r"queues\[\] is at most 128 characters, got 129"),
        (["--weighted", "a=0"], r"all weights >= 1"),
        (["--weighted", "a=x"], r"expected queue=weight \(a positive integer\), got 'a=x'"),
        (["--weighted", "a=1,a=2"], r"lists a queue twice"),
        (["--queues", "a", "--weighted", "a=1"], r"--queues and --weighted are alternatives"),
    ],
    ids=lambda value: " ".join(value) if isinstance(value, list) else None,
)
def test_bad_worker_flags_are_a_command_error_before_anything_runs(
    args: list[str], message: str, world: World
) -> None:
    before = snapshot()
    with pytest.raises(CommandError) as raised:
        call_command("backwave_worker", *args)
    assert re.search(message, str(raised.value)), str(raised.value)
    assert snapshot() == before


@pytest.mark.django_db(transaction=True)
def test_bad_flags_exit_with_status_2_from_the_command_line(tmp_path: Any) -> None:
    runner = Workers(tmp_path)
    for args in (["--concurrency", "-1"], ["--frobnicate"]):
        result = runner.run(*args, timeout=60)
        assert result.returncode == 2, result.stderr
        assert "backwave_worker: error:" in result.stderr
    refused = runner.run("--queues", ",", timeout=60)
    assert refused.returncode == 1
    assert "CommandError: Strict dispatch needs at least one queue." in refused.stderr
    assert sum(row_counts().values()) == 0


@pytest.mark.django_db(transaction=True)
def test_a_queue_no_job_uses_is_served_without_complaint(tmp_path: Any) -> None:
    """Queues are free-form names (``using(queue=...)`` can put a job anywhere): not an error."""
    job_id = jobs.echo.using(queue="made-up").enqueue().job_id
    result = Workers(tmp_path).run("--burst", "--queues", "no-such-queue,made-up", timeout=60)
    assert result.returncode == 0, result.stderr
    assert "queues no-such-queue,made-up" in result.stderr
    assert store.job_output(job_id) == {"args": [], "kwargs": {}}


@pytest.mark.django_db(transaction=True)
def test_an_empty_queues_flag_is_refused(tmp_path: Any) -> None:
    result = Workers(tmp_path).run("--burst", "--queues", "", timeout=60)
    assert result.returncode != 0
    assert "queue" in result.stderr


# --- Malformed admin POSTs --------------------------------------------------------------------

BACKWAVE_MODELS = ("jobrecord", "queuesettings", "recurringschedule", "workernode", "operatoraudit")
GARBAGE_IDS = ["abc", "-1", "99999999999999999999999", str(uuid.UUID(int=9)), "%3Cscript%3E", "1.5"]


def _object_routes() -> list[tuple[str, str]]:
    """Every backwave admin route that takes a path parameter: (format string with ``{}``, parameter name)."""
    routes: list[tuple[str, str]] = []
    for top in admin.site.get_urls():
        if not isinstance(top, URLResolver) or not str(top.pattern).startswith("backwave_django/"):
            continue
        for pattern in top.url_patterns:
            route = str(pattern.pattern)
            names = re.findall(r"<(?:\w+:)?(\w+)>", route)
            if isinstance(pattern, URLPattern) and names:
                routes.append(("/admin/" + str(top.pattern) + re.sub(r"<[^>]+>", "{}", route), names[0]))
    return routes


@pytest.fixture
def superuser_client(client: Any) -> Any:
    client.force_login(User.objects.create(username="root", is_staff=True, is_superuser=True))
    return client


@pytest.mark.parametrize(
    "data",
    [
        pytest.param({"action": "cancel_selected_jobs", "index": "0"}, id="no-selection"),
        pytest.param(
            {"action": "cancel_selected_jobs", "index": "0", "_selected_action": ["abc"]},
            id="non-numeric-id",
        ),
        pytest.param(
            {"action": "cancel_selected_jobs", "index": "0", "_selected_action": [str(uuid.UUID(int=3))]},
            id="uuid-for-numeric-pk",
        ),
        pytest.param(
            {"action": "cancel_selected_jobs", "index": "0", "_selected_action": ["99999999999"]},
            id="unknown-pk",
        ),
        pytest.param(
            {"action": "requeue_selected_jobs", "index": "0", "_selected_action": ["1;DROP TABLE x"]},
            id="sql-in-id",
        ),
        pytest.param(
            {"action": "no_such_action", "index": "0", "_selected_action": ["1"]}, id="unknown-action"
        ),
        pytest.param({"action": "", "index": "0", "_selected_action": ["1"]}, id="empty-action"),
        pytest.param({"index": "0", "_selected_action": ["1"]}, id="no-action"),
        pytest.param(
            {"action": "cancel_selected_jobs", "select_across": "garbage", "index": "x"},
            id="garbage-select-across",
        ),
        pytest.param(
            {"action": "delete_selected", "index": "0", "_selected_action": ["1"], "post": "yes"},
            id="delete-is-not-an-action",
        ),
    ],
)
def test_malformed_action_posts_answer_without_a_server_error_and_change_nothing(
    superuser_client: Any, world: World, data: dict[str, Any]
) -> None:
    before = snapshot()
    response = superuser_client.post("/admin/backwave_django/jobrecord/", data)
    assert response.status_code in (200, 302, 400, 403, 404), response.status_code
    assert snapshot() == before


@pytest.mark.parametrize("object_id", GARBAGE_IDS)
def test_object_urls_with_malformed_or_unknown_ids_answer_without_a_server_error(
    superuser_client: Any, world: World, object_id: str
) -> None:
    """Job, schedule, worker and audit ids that do not exist change nothing. Queue routes take a
    queue *name*, and any name is a queue (pausing an unknown queue creates its settings, see
    docs/errors.md), so there only the absence of a server error is asserted."""
    routes = _object_routes()
    assert any("jobrecord/{}/" in route for route, _ in routes)  # the discovery found something
    for route, parameter in routes:
        before = snapshot()
        url = route.format(*[object_id] * route.count("{}"))
        for method in (superuser_client.get, superuser_client.post):
            response = method(url)
            assert response.status_code < 500, (method.__name__, url, response.status_code)
        if parameter != "queue":
            assert snapshot() == before, url


def _messages(response: Any) -> list[str]:
    """The messages the page shows (rendered by the changelist, or by the page redirected to)."""
    return re.findall(r'<li class="[^"]*">(.*?)</li>', response.content.decode(), flags=re.S)


@pytest.mark.parametrize(
    ("url", "data", "expected"),
    [
        (
            "/admin/backwave_django/jobrecord/",
            {"action": "cancel_selected_jobs", "index": "0"},
            "Items must be selected in order to perform actions on them. No items have been changed.",
        ),
        (
            "/admin/backwave_django/jobrecord/",
            {"action": "no_such_action", "_selected_action": ["1"]},
            "No action selected.",
        ),
        ("/admin/backwave_django/jobrecord/abc/cancel/", {}, "No job with id “abc”; nothing was changed."),
        (f"/admin/backwave_django/jobrecord/{uuid.UUID(int=5)}/requeue/", {}, "nothing was changed"),
        (
            "/admin/backwave_django/recurringschedule/abc/trigger/",
            {},
            "No schedule with id “abc”; nothing was triggered.",
        ),
    ],
    ids=[
        "no-selection",
        "unknown-action",
        "cancel-unknown-job",
        "requeue-unknown-job",
        "trigger-unknown-schedule",
    ],
)
def test_malformed_admin_posts_say_what_happened(
    superuser_client: Any, world: World, url: str, data: dict[str, Any], expected: str
) -> None:
    before = snapshot()
    response = superuser_client.post(url, data, follow=True)
    assert response.status_code == 200
    assert any(expected in message for message in _messages(response)), _messages(response)
    assert snapshot() == before
