"""The monitor's reads of flow control (monitor/limits.py): the overview and a held job's reason."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from backwave_django import monitor, store
from backwave_django.core.limits import LimitValues
from backwave_django.core.states import JobState

from ..conftest import T0
from ..flow_rows import declare, job_under, leased, started

pytestmark = pytest.mark.django_db

NOW = T0 + timedelta(minutes=1)


def _limit(name: str) -> monitor.LimitOverview:
    [found] = [entry for entry in monitor.limits_overview(now=NOW).limits if entry.name == name]
    return found


def test_a_full_concurrency_bucket_holds_its_due_jobs_and_others_do_not():
    declare("customer-sync", concurrency=1)
    running = job_under((("customer-sync", "acme"),), state=JobState.LEASED)
    leased("customer-sync", "acme", running)
    for _ in range(3):
        job_under((("customer-sync", "acme"),))
    job_under((("customer-sync", "globex"),))
    job_under((("customer-sync", "acme"),), due=NOW + timedelta(hours=1))  # not due: not counted
    limit = _limit("customer-sync")
    assert (limit.leased, limit.due, limit.held, limit.buckets_in_use) == (1, 4, 3, 2)
    acme, globex = limit.buckets
    assert (acme.bucket, acme.leased, acme.due, acme.full, acme.held) == ("acme", 1, 3, True, 3)
    assert (globex.bucket, globex.full, globex.held, globex.due) == ("globex", False, 0, 1)
    assert acme.describe() == "limit customer-sync, bucket acme"


def test_a_rate_window_counts_only_starts_inside_it():
    declare("payment-api", rate=2, period=10)
    started("payment-api", "", at=NOW - timedelta(seconds=10))  # on the edge: outside
    started("payment-api", "", at=NOW - timedelta(seconds=9), times=2)
    job_under((("payment-api", ""),))
    limit = _limit("payment-api")
    assert (limit.started, limit.held) == (2, 1)
    assert limit.started_per_second == pytest.approx(0.2)
    [whole] = limit.buckets
    assert whole.describe() == "limit payment-api"


def test_an_override_is_in_force_and_named_with_who_set_it():
    declare("stripe", rate=100)
    store.set_limit("stripe", rate=1, actor="alice", now=T0)
    started("stripe", "", at=NOW)
    job_under((("stripe", ""),))
    limit = _limit("stripe")
    assert limit.declared == LimitValues(None, 100, 1.0)
    assert limit.in_force == LimitValues(None, 1, 1.0)
    assert (limit.overridden_by, limit.overridden_at, limit.held) == ("alice", T0, 1)


def test_an_undeclared_limit_holds_all_its_jobs():
    job_under((("ghost", "x"),))
    limit = _limit("ghost")
    assert (limit.declared, limit.in_force, limit.held) == (None, None, 1)


def test_a_job_under_two_limits_counts_in_each_and_partitions_alone_are_not_limits():
    declare("a", concurrency=1)
    declare("b", concurrency=5)
    leased("a", "x", job_under((("a", "x"),), state=JobState.LEASED))
    job_under((("a", "x"), ("b", "y")), partition="tenant-1")
    job_under((), partition="tenant-2")
    overview = monitor.limits_overview(now=NOW)
    assert [entry.name for entry in overview.limits] == ["a", "b"]
    assert overview.complete
    assert (_limit("a").held, _limit("b").held, _limit("b").due) == (1, 0, 1)


def test_the_busiest_buckets_come_first_and_are_bounded():
    declare("sync", concurrency=2)
    for index in range(5):
        bucket = f"c{index}"
        for _ in range(index % 3):
            leased("sync", bucket, job_under((("sync", bucket),), state=JobState.LEASED))
        job_under((("sync", bucket),))
    overview = monitor.limits_overview(now=NOW, top=3)
    [limit] = overview.limits
    assert limit.buckets_in_use == 5
    assert [use.bucket for use in limit.buckets] == ["c2", "c1", "c4"]  # full, then by use
    assert limit.buckets[0].full
    assert limit.held == 1


def test_the_overview_reads_lanes_not_jobs():
    declare("sync", concurrency=1)
    for index in range(30):
        job_under((("sync", f"c{index % 3}"),))
    with CaptureQueriesContext(connection) as queries:
        [limit] = monitor.limits_overview(now=NOW).limits
    assert (limit.due, limit.buckets_in_use) == (30, 3)
    assert len(queries) <= 5
    lane_reads = [q["sql"] for q in queries if "limit_keys" in q["sql"]]
    assert len(lane_reads) == 1  # the buckets of one job per lane, in one read


def test_held_reason_names_the_full_bucket():
    declare("stripe", concurrency=1)
    declare("zeta", rate=1)
    leased("stripe", "acme", job_under((("stripe", "acme"),), state=JobState.LEASED))
    started("zeta", "", at=NOW)
    job = job_under((("stripe", "acme"), ("zeta", "")))
    hold = monitor.held_reason(job, now=NOW)
    assert hold is not None
    assert hold.text == "held by limit stripe, bucket acme (1 / 1 leased)"
    free = job_under((("zeta", ""),), due=T0)
    text = monitor.held_reason(free, now=NOW)
    assert text is not None
    assert text.text == "held by limit zeta (1 / 1 started in the last 1 s)"


def test_held_reason_is_none_for_a_free_bucket_a_future_job_or_a_plain_one():
    declare("stripe", concurrency=2)
    leased("stripe", "acme", job_under((("stripe", "acme"),), state=JobState.LEASED))
    assert monitor.held_reason(job_under((("stripe", "acme"),)), now=NOW) is None
    leased("stripe", "acme", job_under((("stripe", "acme"),), state=JobState.LEASED))
    assert monitor.held_reason(job_under((("stripe", "acme"),), due=NOW + timedelta(seconds=1)), now=NOW) is None
    assert monitor.held_reason(job_under(()), now=NOW) is None
    assert monitor.held_reason(job_under((("stripe", "acme"),)), now=NOW) is not None


def test_held_reason_for_an_undeclared_limit():
    hold = monitor.held_reason(job_under((("ghost", "x"),)), now=NOW)
    assert hold is not None
    assert not hold.declared
    assert "limit ghost is not declared by any worker" in hold.text


def test_jobs_enqueued_through_their_definitions_are_counted_in_their_buckets():
    """The rows the enqueue path writes (partition, limit_keys, lane) read as the overview expects."""
    from django.utils import timezone

    from backwave_django.models import JobRecord
    from tests.jobsapp import jobs

    now = timezone.now()
    declare("customer-sync", concurrency=1)
    first = jobs.limited_sync.enqueue("acme").job_id
    jobs.limited_sync.enqueue(customer_id="acme")
    jobs.limited_sync.enqueue("globex")
    jobs.tenant_import.enqueue("t1", 1)  # a partition alone: no limit
    leased("customer-sync", "acme", JobRecord.objects.get(job_id=first))
    JobRecord.objects.filter(job_id=first).update(state=JobState.LEASED)
    [limit] = monitor.limits_overview(now=now + timedelta(seconds=1)).limits
    assert (limit.name, limit.leased, limit.due, limit.held) == ("customer-sync", 1, 2, 1)
    assert [(use.bucket, use.held) for use in limit.buckets] == [("acme", 1), ("globex", 0)]
    held = JobRecord.objects.filter(state=JobState.SCHEDULED, limit_keys__isnull=False).order_by("sequence")
    hold = monitor.held_reason(held[0], now=now + timedelta(seconds=1))
    assert hold is not None
    assert hold.text == "held by limit customer-sync, bucket acme (1 / 1 leased)"
