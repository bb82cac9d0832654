"""OpenTelemetry tracing (docs/tracing.md): the enqueuing span's context stored with the job, and
each attempt run by the worker's own loop in a CONSUMER span that is its child.

Spans are captured by a real SDK (tests/tracing/conftest.py). The worker runs in this process
(``Worker.run`` in burst mode, the loop ``backwave_worker --burst`` runs), so its spans land in
the same exporter. Runs on PostgreSQL (where batches without parents take the one-statement
path) and on SQLite (the portable path).
"""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from backwave_django import Unique, enqueue_many, job, monitor, store, workflow
from backwave_django.core.outcomes import (
    Cancelled,
    Failure,
    ScheduleSpec,
    Snoozed,
    Success,
    Unroutable,
    outcome_name,
)
from backwave_django.core.states import JobState, RequeueResult
from backwave_django.models import JobRecord
from backwave_django.testing import BackWaveHarness
from tests.conftest import T0, enqueue, lease, new_job, report
from tests.jobsapp import jobs

from .conftest import run_worker

#: A traceparent from elsewhere (an HTTP header, another system): sampled, remote parent.
FOREIGN = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


@job("tracing.nested", queue="tracing")
def nested() -> str:
    """Opens a span of its own: it must be a child of the attempt's span."""
    with trace.get_tracer("tests.tracing").start_as_current_span("inside the handler"):
        return "ok"


@job("tracing.async-nested", queue="tracing")
async def async_nested() -> str:
    with trace.get_tracer("tests.tracing").start_as_current_span("inside the async handler"):
        await asyncio.sleep(0)
        return "ok"


def traceparent(span: Any) -> str:
    """The traceparent of a span, or of a span context (a finished span's ``parent``)."""
    context = span if isinstance(span, trace.SpanContext) else span.get_span_context()
    return f"00-{context.trace_id:032x}-{context.span_id:016x}-{int(context.trace_flags):02x}"


def stored(job_id: uuid.UUID) -> str | None:
    return JobRecord.objects.values_list("trace_context", flat=True).get(job_id=job_id)


def runs(spans: InMemorySpanExporter, wire_name: str) -> list[Any]:
    """The attempt spans (``ReadableSpan``) of a wire name, by attempt."""
    found = [s for s in spans.get_finished_spans() if s.name == f"backwave.run {wire_name}"]
    return sorted(found, key=lambda s: s.attributes["backwave.job.attempt"])


def named(spans: InMemorySpanExporter, name: str) -> Any:
    [span] = [s for s in spans.get_finished_spans() if s.name == name]
    return span


# --- The worker's spans ------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_the_handler_runs_in_a_consumer_span_that_is_a_child_of_the_enqueuing_span(spans, tracer):
    with tracer.start_as_current_span("checkout") as parent:
        job_id = jobs.echo.enqueue("hello").job_id
    assert stored(job_id) == traceparent(parent)

    run_worker("default")

    [run] = runs(spans, "test.echo")
    assert run.parent is not None
    assert run.parent.span_id == parent.get_span_context().span_id
    assert run.context.trace_id == parent.get_span_context().trace_id
    assert run.kind is SpanKind.CONSUMER
    assert dict(run.attributes) == {
        "backwave.job.id": str(job_id),
        "backwave.job.wire_name": "test.echo",
        "backwave.job.queue": "default",
        "backwave.job.attempt": 1,
        "backwave.job.outcome": "succeeded",
    }
    assert run.status.status_code is StatusCode.UNSET
    assert run.events == ()
    assert JobRecord.objects.get(job_id=job_id).state == JobState.SUCCEEDED


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(("handler", "inner"), [(nested, "inside the handler"), (async_nested, "inside the async handler")])
def test_spans_the_handler_opens_are_children_of_its_attempt_span(spans, tracer, handler, inner):
    with tracer.start_as_current_span("request"):
        handler.enqueue()

    run_worker("tracing")

    [run] = runs(spans, handler.wire_name)
    assert named(spans, inner).parent.span_id == run.context.span_id
    assert run.attributes["backwave.job.outcome"] == "succeeded"


@pytest.mark.django_db(transaction=True)
def test_a_failed_attempt_records_its_exception_and_errors_and_the_retry_keeps_the_context(spans, tracer):
    with tracer.start_as_current_span("checkout") as parent:
        job_id = jobs.always_fails.enqueue().job_id  # two attempts, no backoff

    run_worker("default")

    first, second = runs(spans, "test.always-fails")
    for attempt, run in enumerate((first, second), start=1):
        assert run.attributes["backwave.job.attempt"] == attempt
        assert run.parent.span_id == parent.get_span_context().span_id
        assert run.context.trace_id == parent.get_span_context().trace_id
        assert (run.status.status_code, run.status.description) == (StatusCode.ERROR, "gateway timeout")
        [event] = run.events
        assert event.name == "exception"
        assert event.attributes["exception.type"] == "ValueError"
        assert event.attributes["exception.message"] == "gateway timeout"
    assert first.attributes["backwave.job.outcome"] == "retried"
    assert second.attributes["backwave.job.outcome"] == "dead_lettered"
    record = JobRecord.objects.get(job_id=job_id)
    assert (record.state, record.trace_context) == (JobState.DEAD_LETTERED, traceparent(parent))


@pytest.mark.django_db(transaction=True)
def test_a_timed_out_attempt_errors_with_the_timeout(spans, tracer):
    with tracer.start_as_current_span("checkout"):
        jobs.busy.using(timeout=0.3, max_attempts=1).enqueue(60)

    run_worker("slow")

    [run] = runs(spans, "test.busy")
    assert run.attributes["backwave.job.outcome"] == "dead_lettered"
    assert (run.status.status_code, run.status.description) == (StatusCode.ERROR, "timed out after 0.3s")
    assert run.events[0].attributes["exception.type"].endswith(".JobTimeout")


@pytest.mark.django_db(transaction=True)
def test_snoozed_discarded_and_quarantined_attempts_say_so(spans, tracer):
    with tracer.start_as_current_span("checkout"):
        jobs.snoozer.enqueue(1, 0)
        jobs.discarder.enqueue("order o-9 no longer exists")
    store.enqueue(new_job(wire_name="tracing.unknown", trace_context=FOREIGN), now=T0)

    run_worker("default")

    snoozed, then = runs(spans, "test.snoozer")
    assert (snoozed.attributes["backwave.job.outcome"], snoozed.status.status_code) == ("snoozed", StatusCode.UNSET)
    assert then.attributes["backwave.job.outcome"] == "succeeded"
    [discarded] = runs(spans, "test.discarder")
    assert discarded.attributes["backwave.job.outcome"] == "dead_lettered"
    assert discarded.status.description == "order o-9 no longer exists"
    assert discarded.events[0].attributes["exception.type"].endswith(".Discard")
    # No handler: the span is the outcome's alone, still a child of the stored context.
    [quarantined] = runs(spans, "tracing.unknown")
    assert quarantined.attributes["backwave.job.outcome"] == "quarantined"
    assert quarantined.status.status_code is StatusCode.ERROR
    assert traceparent(quarantined.parent) == FOREIGN
    assert quarantined.parent.is_remote


@pytest.mark.django_db(transaction=True)
def test_a_job_enqueued_outside_any_span_stores_none_and_runs_in_a_root_span(spans):
    job_id = jobs.echo.enqueue("untraced").job_id
    assert stored(job_id) is None

    run_worker("default")

    [run] = runs(spans, "test.echo")
    assert run.parent is None
    assert run.attributes["backwave.job.id"] == str(job_id)


@pytest.mark.django_db
def test_the_test_harness_runs_the_handler_in_the_same_span(spans, tracer):
    with BackWaveHarness() as harness:
        with tracer.start_as_current_span("checkout") as parent:
            jobs.echo.enqueue("inline")
        harness.run_until_idle()

    [run] = runs(spans, "test.echo")
    assert run.parent.span_id == parent.get_span_context().span_id
    assert run.attributes["backwave.job.outcome"] == "succeeded"


@pytest.mark.parametrize(
    ("outcome", "name"),
    [
        (Success(), "succeeded"),
        (Failure(next_due_time=T0, error="boom"), "retried"),
        (Failure(next_due_time=None, error="boom"), "dead_lettered"),
        (Snoozed(next_due_time=T0), "snoozed"),
        (Cancelled(cause="operator-cancel"), "cancelled"),
        (Unroutable(reason="unknown wire name"), "quarantined"),
    ],
)
def test_the_outcome_attribute_names_what_the_outcome_does_to_the_job(outcome, name):
    assert outcome_name(outcome) == name


# --- What enqueue stores ---------------------------------------------------------------------


@pytest.mark.django_db
def test_every_enqueue_path_stores_the_current_span(tracer):
    with tracer.start_as_current_span("checkout") as parent:
        one = jobs.echo.enqueue(1).job_id  # PostgreSQL: the single-job statement
        batch = [r.job_id for r in enqueue_many([jobs.echo.prepare(n) for n in range(3)])]  # the array one
        child = jobs.echo.using(parents=[one]).enqueue(2).job_id  # with parents: the portable path
        unique = jobs.echo.using(unique=Unique()).enqueue(3).job_id  # unique: the portable path too
        with workflow(name="checkout") as wf:
            first = wf.add(jobs.echo.prepare(4))
            second = wf.add(jobs.echo.prepare(5), after=[first])
    expected = traceparent(parent)
    for job_id in (one, *batch, child, unique, first.job_id, second.job_id):
        assert stored(job_id) == expected, job_id


@pytest.mark.django_db(transaction=True)
def test_aenqueue_stores_the_current_span(tracer):
    async def scenario() -> list[uuid.UUID]:
        from asgiref.sync import sync_to_async
        from django.db import connections

        receipt = await jobs.echo.aenqueue("async")
        many = await jobs.echo.using(queue="elsewhere").aenqueue(2)
        await sync_to_async(connections.close_all, thread_sensitive=True)()
        return [receipt.job_id, many.job_id]

    with tracer.start_as_current_span("async view") as parent:
        job_ids = asyncio.run(scenario())
    assert [stored(j) for j in job_ids] == [traceparent(parent)] * 2


@pytest.mark.django_db
def test_a_django_task_stores_the_current_span(tracer):
    pytest.importorskip("django.tasks", reason="the Django Tasks backend needs Django 6.0+")
    from tests.jobsapp import tasks

    with tracer.start_as_current_span("view") as parent:
        result = tasks.add.enqueue(2, 3)
    assert stored(uuid.UUID(result.id)) == traceparent(parent)


@pytest.mark.django_db
def test_a_given_trace_context_is_stored_as_given_instead_of_the_current_span(tracer):
    with tracer.start_as_current_span("checkout"):
        job_id = jobs.echo.using(trace_context=FOREIGN).enqueue(1).job_id
        [receipt] = enqueue_many([jobs.echo.using(trace_context=FOREIGN).prepare(2)])
    assert stored(job_id) == stored(receipt.job_id) == FOREIGN


@pytest.mark.django_db
def test_a_malformed_trace_context_is_refused_before_anything_is_stored():
    with pytest.raises(ValueError, match="trace_context must be a W3C traceparent"):
        jobs.echo.using(trace_context="00-not-a-traceparent")
    with pytest.raises(ValueError, match="trace_context must be a W3C traceparent"):
        new_job(trace_context=FOREIGN.upper())
    with pytest.raises(TypeError, match="trace_context must be a W3C traceparent string, got bytes"):
        new_job(trace_context=FOREIGN.encode())
    assert not JobRecord.objects.exists()


@pytest.mark.parametrize(
    "value",
    [
        FOREIGN.upper(),  # uppercase hex
        f" {FOREIGN}",  # surrounding whitespace is not stored
        "00-00000000000000000000000000000000-b7ad6b7169203331-01",  # zero trace id
        "00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01",  # zero span id
        "ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",  # the invalid version
        f"{FOREIGN}-extra",  # version 00 has exactly four fields
        "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331",  # no flags
        "",
        "01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-" + "x" * 500,  # too long
    ],
)
def test_trace_contexts_that_are_not_w3c_traceparents_are_refused(value):
    with pytest.raises(ValueError, match="W3C traceparent"):
        new_job(trace_context=value)


def test_a_later_version_may_carry_more_fields():
    later = "01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-what-comes-next"
    assert new_job(trace_context=later).trace_context == later


@pytest.mark.django_db
def test_a_minted_schedule_instance_has_no_trace_context(tracer):
    spec = ScheduleSpec(schedule_id="tracing.tick", cron="* * * * *", wire_name="test.echo", payload={"args": [], "kwargs": {}})
    with tracer.start_as_current_span("maintenance"):
        store.upsert_schedule(spec, now=T0)
        assert store.mint_due(now=T0 + timedelta(minutes=2)) == 2
        store.trigger_schedule("tracing.tick", actor="alice", now=T0 + timedelta(minutes=2, seconds=30))
    minted = JobRecord.objects.filter(schedule_id="tracing.tick")
    assert minted.count() == 3
    assert set(minted.values_list("trace_context", flat=True)) == {None}


# --- The store: stored verbatim, returned by the claim and the monitor ----------------------


def _round_trip() -> None:
    job_id = enqueue(trace_context=FOREIGN)
    untraced = enqueue()
    claimed = {c.job_id: c for c in lease()}
    assert (claimed[job_id].trace_context, claimed[untraced].trace_context) == (FOREIGN, None)
    read = monitor.get_job(job_id)
    assert read is not None
    assert read.trace_context == FOREIGN
    assert {j.job_id: j.trace_context for j in monitor.list_jobs()} == {job_id: FOREIGN, untraced: None}
    # A retry and an operator's requeue keep the job's context.
    report(job_id, Failure(next_due_time=T0, error="boom"))
    [retried] = [c for c in lease() if c.job_id == job_id]
    assert (retried.attempt, retried.trace_context) == (2, FOREIGN)
    report(job_id, Failure(next_due_time=None, error="boom"), attempt=2)
    assert store.requeue(job_id, actor="alice", now=T0) is RequeueResult.REQUEUED
    [requeued] = [c for c in lease() if c.job_id == job_id]
    assert requeued.trace_context == FOREIGN
    assert stored(job_id) == FOREIGN


@pytest.mark.django_db
def test_the_claim_returns_the_stored_context_inside_a_transaction():
    _round_trip()  # on PostgreSQL: the claim statement run in the caller's transaction


@pytest.mark.django_db(transaction=True)
def test_the_claim_returns_the_stored_context_as_its_own_transaction():
    _round_trip()  # on PostgreSQL: the pipelined claim
