"""factory_boy factories for rows in arbitrary states (tests only: production writes go through the store)."""

from __future__ import annotations

import uuid

import factory

from backwave_django.core.states import JobState
from backwave_django.models import JobRecord, JobTag, QueueSettings

from .conftest import T0


class JobRecordFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = JobRecord

    job_id = factory.LazyFunction(uuid.uuid4)
    wire_name = "send-invoice"
    queue = "default"
    payload = factory.LazyFunction(lambda: {"args": [], "kwargs": {}})
    state = JobState.SCHEDULED
    due_time = T0
    enqueued_at = T0
    next_ordinal = 0

    class Params:
        terminal = factory.Trait(terminal_at=T0)


class JobTagFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = JobTag

    job = factory.SubFactory(JobRecordFactory)
    key = ""
    value = factory.Sequence(lambda n: f"label-{n}")


class QueueSettingsFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = QueueSettings

    queue = factory.Sequence(lambda n: f"queue-{n}")


class JobTransitionFactory(factory.django.DjangoModelFactory):
    """A transition-log entry (the store writes these; tests use it for rows with awkward content)."""

    class Meta:
        model = "backwave_django.JobTransition"

    job = factory.SubFactory(JobRecordFactory)
    ordinal = factory.Sequence(lambda n: n)
    recorded_at = T0
    state = JobState.SCHEDULED
    attempt = 0
    actor = "enqueue"


class WorkerNodeFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = "backwave_django.WorkerNode"

    worker_id = factory.Sequence(lambda n: f"host:{1000 + n}:abc{n}")
    hostname = "host"
    pid = factory.Sequence(lambda n: 1000 + n)
    queues = factory.LazyFunction(lambda: ["default"])
    concurrency = 20
    started_at = T0
    last_seen_at = T0
