"""Every insert path stores a job's flow-control columns (docs/flow-control.md): its partition,
its buckets (``limit_keys``, ``[[name, bucket], ...]`` or null) and its lane; a plain job stores
null, null and lane 0. Run on the PostgreSQL fast path and the portable path (tests/store/conftest.py)."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

import pytest

from backwave_django import (
    EnqueueResult,
    ScheduleSpec,
    Unique,
    WorkflowDefinition,
    WorkflowEnqueueResult,
    enqueue_many,
    monitor,
    store,
)
from backwave_django.client import ENQUEUE_MANY_BATCH
from backwave_django.core.limits import PLAIN_LANE, lane_of
from backwave_django.models import JobRecord, RecurringSchedule
from backwave_django.worker.maintenance import settings_schedule_spec
from tests.jobsapp import jobs

from ..conftest import T0, new_job

pytestmark = pytest.mark.django_db

SYNC_ACME = (("customer-sync", "acme"),)
PLAIN = (None, None, PLAIN_LANE)


def columns(job_id: uuid.UUID) -> tuple[Any, Any, int]:
    return JobRecord.objects.filter(job_id=job_id).values_list("partition", "limit_keys", "lane").get()


def flow(partition: str | None, keys: tuple[tuple[str, str], ...]) -> tuple[Any, Any, int]:
    """The columns a job with this partition and these buckets is stored with."""
    return partition, [list(pair) for pair in keys] or None, lane_of(partition, keys)


def test_a_single_enqueue_stores_buckets_partition_and_lane():
    keyed = jobs.limited_sync.enqueue("acme").job_id
    rated = jobs.rated_call.enqueue("a").job_id
    tenant = jobs.tenant_import.enqueue("acme", 1).job_id
    assert columns(keyed) == flow(None, SYNC_ACME) == (None, [["customer-sync", "acme"]], columns(keyed)[2])
    assert columns(rated) == flow(None, (("payment-api", ""),))
    assert columns(tenant) == flow("acme", ())
    assert len({columns(keyed)[2], columns(rated)[2], columns(tenant)[2], PLAIN_LANE}) == 4


def test_a_plain_enqueue_stores_nulls_and_lane_zero():
    assert columns(jobs.echo.enqueue(1).job_id) == PLAIN
    assert columns(jobs.echo.using(tags=["x"]).enqueue(1).job_id) == PLAIN


def test_using_overrides_are_stored():
    job_id = jobs.limited_sync.using(partition="acme", limit_keys={"customer-sync": "vip"}).enqueue("c").job_id
    assert columns(job_id) == flow("acme", (("customer-sync", "vip"),))
    tagged = jobs.echo.using(partition="p", tags=["t"]).enqueue().job_id
    assert columns(tagged) == flow("p", ())


def test_store_enqueue_stores_a_new_jobs_columns():
    made = new_job(partition="acme", limit_keys=[("payment-api", ""), ("customer-sync", "x")])
    assert store.enqueue(made, now=T0) is EnqueueResult.OK
    assert columns(made.job_id) == flow("acme", (("customer-sync", "x"), ("payment-api", "")))
    plain = new_job()
    assert store.enqueue(plain, now=T0) is EnqueueResult.OK
    assert columns(plain.job_id) == PLAIN


def test_a_batch_mixing_plain_and_flow_jobs_stores_each_ones_columns():
    prepared = [
        jobs.echo.prepare(0),
        jobs.limited_sync.prepare("acme"),
        jobs.echo.using(tags=["t"]).prepare(1),
        jobs.tenant_import.prepare("globex", 2),
        jobs.limited_sync.using(unique=Unique()).prepare("initech"),
    ]
    receipts = enqueue_many(prepared)
    assert [columns(r.job_id) for r in receipts] == [
        PLAIN,
        flow(None, SYNC_ACME),
        PLAIN,
        flow("globex", ()),
        flow(None, (("customer-sync", "initech"),)),
    ]


def test_a_batch_of_plain_jobs_stores_nulls():
    receipts = jobs.echo.enqueue_many([{"n": n} for n in range(3)])
    assert {columns(r.job_id) for r in receipts} == {PLAIN}


def test_enqueue_many_over_several_batches_stores_every_jobs_columns():
    calls = [{"customer_id": f"c{n % 3}"} for n in range(ENQUEUE_MANY_BATCH + 5)]
    receipts = jobs.limited_sync.enqueue_many(calls)
    stored = dict(
        JobRecord.objects.filter(job_id__in=[r.job_id for r in receipts]).values_list("job_id", "limit_keys")
    )
    assert [stored[r.job_id] for r in receipts] == [[["customer-sync", c["customer_id"]]] for c in calls]


def test_a_duplicate_flow_job_is_not_stored_twice():
    first = jobs.limited_sync.using(job_id="sync-acme").enqueue("acme")
    again = jobs.limited_sync.using(job_id="sync-acme").enqueue("acme")
    assert again.duplicate
    assert again.job_id == first.job_id
    assert columns(first.job_id) == flow(None, SYNC_ACME)


def test_a_unique_flow_job_stores_its_columns_and_stays_unique():
    options = jobs.limited_sync.using(unique=Unique(keys=["customer_id"]))
    first = options.enqueue("acme")
    assert options.enqueue("acme").duplicate
    other = options.enqueue("globex")
    assert columns(first.job_id) == flow(None, SYNC_ACME)
    assert columns(other.job_id) == flow(None, (("customer-sync", "globex"),))


def test_workflow_members_store_their_columns():
    fetch = jobs.tenant_import.prepare("acme", 1).due_at(T0, None)
    sync = new_job(parents=(fetch.job_id,), limit_keys=[("customer-sync", "acme")])
    plain = new_job(parents=(fetch.job_id,))
    workflow = WorkflowDefinition(workflow_id=uuid.uuid4(), members=(fetch, sync, plain))
    assert store.enqueue_workflow(workflow, now=T0) is WorkflowEnqueueResult.OK
    assert columns(fetch.job_id) == flow("acme", ())
    assert columns(sync.job_id) == flow(None, SYNC_ACME)
    assert columns(plain.job_id) == PLAIN


def test_a_child_job_stores_its_columns():
    parent = jobs.echo.enqueue(1).job_id
    child = jobs.limited_sync.using(parents=[parent]).enqueue("acme").job_id
    assert columns(child) == flow(None, SYNC_ACME)


def _spec(**fields: Any) -> ScheduleSpec:
    return ScheduleSpec(
        schedule_id=fields.pop("schedule_id", "flow-sync"),
        cron="0 * * * *",
        wire_name=fields.pop("wire_name", "test.limited-sync"),
        payload=fields.pop("payload", {"args": ["acme"], "kwargs": {}}),
        **fields,
    )


def test_a_schedule_stores_its_columns_and_its_instances_carry_them():
    store.upsert_schedule(_spec(limit_keys=SYNC_ACME, partition="p"), now=T0)
    stored = RecurringSchedule.objects.values_list("partition", "limit_keys", "lane").get()
    assert stored == flow("p", SYNC_ACME)
    assert store.mint_due(now=T0 + timedelta(hours=1)) == 1
    (instance,) = JobRecord.objects.filter(schedule_id="flow-sync").values_list("job_id", flat=True)
    assert columns(instance) == flow("p", SYNC_ACME)


def test_a_plain_schedules_instances_store_nulls():
    store.upsert_schedule(_spec(schedule_id="plain", wire_name="test.echo"), now=T0)
    assert RecurringSchedule.objects.values_list("partition", "limit_keys", "lane").get() == PLAIN
    assert store.mint_due(now=T0 + timedelta(hours=1)) == 1
    (instance,) = JobRecord.objects.filter(schedule_id="plain").values_list("job_id", flat=True)
    assert columns(instance) == PLAIN


def test_a_redefined_schedule_takes_its_new_columns():
    store.upsert_schedule(_spec(limit_keys=SYNC_ACME), now=T0)
    store.upsert_schedule(_spec(), now=T0)
    assert RecurringSchedule.objects.values_list("partition", "limit_keys", "lane").get() == PLAIN


def test_a_settings_schedule_of_a_flow_job_gets_the_jobs_buckets():
    spec = settings_schedule_spec("s", {"job": "test.limited-sync", "cron": "0 * * * *", "args": ["acme"]})
    assert (spec.partition, spec.limit_keys) == (None, SYNC_ACME)
    spec = settings_schedule_spec("t", {"job": "test.tenant-import", "cron": "0 * * * *", "args": ["a", 1]})
    assert (spec.partition, spec.limit_keys) == ("a", ())
    spec = settings_schedule_spec("e", {"job": "test.echo", "cron": "0 * * * *"})
    assert (spec.partition, spec.limit_keys) == (None, ())


def test_schedule_specs_check_their_columns():
    with pytest.raises(ValueError, match="partition must be 1 to 200 characters"):
        _spec(partition="")
    with pytest.raises(TypeError, match="limit_keys must hold"):
        _spec(limit_keys=["customer-sync"])


def test_the_monitor_reads_partition_and_buckets():
    keyed = monitor.get_job(jobs.limited_sync.enqueue("acme").job_id)
    tenant = monitor.get_job(jobs.tenant_import.enqueue("acme", 1).job_id)
    plain = monitor.get_job(jobs.echo.enqueue(1).job_id)
    assert keyed is not None
    assert tenant is not None
    assert plain is not None
    assert (keyed.partition, keyed.limit_keys) == (None, SYNC_ACME)
    assert (tenant.partition, tenant.limit_keys) == ("acme", ())
    assert (plain.partition, plain.limit_keys) == (None, ())
    (found,) = monitor.find_jobs(wire_name="test.limited-sync")
    assert found.limit_keys == SYNC_ACME
