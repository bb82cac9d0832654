"""The names of the write side's former job shapes still work (docs/upgrading.md): a prepared job
is a ``NewJob`` (``PreparedJob`` is its alias), ``.using(...)`` gives a ``JobWithOptions``
(``client.JobOptions`` warns and is its alias), and ``job_enqueued`` keeps its sender."""

from __future__ import annotations

import importlib
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.db import transaction

import backwave_django
from backwave_django import (
    EnqueueResult,
    JobDefinition,
    NewJob,
    PreparedJob,
    WorkflowDefinition,
    enqueue_many,
    signals,
    store,
)
from backwave_django.client import JobWithOptions
from backwave_django.models import JobRecord
from tests.jobsapp import jobs

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def test_a_prepared_job_is_a_new_job_and_prepared_job_names_it() -> None:
    prepared = jobs.echo.using(run_after=timedelta(minutes=1)).prepare("x")
    assert PreparedJob is NewJob
    assert backwave_django.PreparedJob is NewJob
    assert isinstance(prepared, PreparedJob)
    assert (prepared.wire_name, prepared.run_after) == ("test.echo", timedelta(minutes=1))


def test_job_options_warns_and_is_the_options_view() -> None:
    client = importlib.import_module("backwave_django.client")
    with pytest.warns(
        DeprecationWarning, match=r"JobOptions is deprecated: \.using\(\.\.\.\) returns a JobWithOptions"
    ):
        job_options = client.JobOptions
    assert job_options is JobWithOptions
    assert isinstance(jobs.echo.using(queue="eu"), job_options)
    with pytest.raises(AttributeError, match="has no attribute 'Nothing'"):
        client.Nothing  # noqa: B018


def test_new_job_warns_and_is_due_at() -> None:
    prepared = jobs.echo.using(run_after=timedelta(seconds=5)).prepare("x")
    with pytest.warns(DeprecationWarning, match=r"use \.due_at\(now\)"):
        due = prepared.new_job(NOW)
    assert due == prepared.due_at(NOW)
    assert (due.due_time, due.run_after) == (NOW + timedelta(seconds=5), None)


@pytest.mark.django_db(transaction=True)
def test_job_enqueued_is_still_sent_by_the_job_definition_class() -> None:
    senders: list[Any] = []

    def receive(sender: Any, **named: Any) -> None:
        senders.append(sender)

    signals.job_enqueued.connect(receive)
    try:
        with transaction.atomic():
            jobs.echo.enqueue("x")
            enqueue_many([jobs.echo.prepare("y")])
            built = NewJob(
                job_id=uuid.uuid4(), wire_name="test.echo", payload={"args": [], "kwargs": {}}, due_time=NOW
            )
            enqueue_many([built])  # not prepared by a definition: no definition class to name
    finally:
        signals.job_enqueued.disconnect(receive)
    assert senders == [JobDefinition, JobDefinition, None]


@pytest.mark.django_db
def test_the_store_refuses_a_prepared_job_whose_due_time_is_still_relative() -> None:
    prepared = jobs.echo.using(run_after=timedelta(minutes=5)).prepare("x")
    with pytest.raises(
        ValueError, match=r"new_jobs\[0\] is a prepared job whose due time counts from its enqueue"
    ):
        store.enqueue(prepared, now=NOW)
    with pytest.raises(ValueError, match=r"members\[0\] is a prepared job"):
        WorkflowDefinition(workflow_id=uuid.uuid4(), name=None, members=(prepared,))
    assert store.enqueue(prepared.due_at(NOW), now=NOW) is EnqueueResult.OK
    assert JobRecord.objects.get(job_id=prepared.job_id).due_time == NOW + timedelta(minutes=5)
