"""The flow claim's statements on PostgreSQL never read the jobs a saturated bucket holds back:
with ``HELD`` jobs in one full bucket, what each statement reads (``EXPLAIN (ANALYZE, BUFFERS)``,
shared buffers hit or read) is bounded by the jobs it returns and the lanes, not by ``HELD``; and
a plain queue's claim pays one probe of the claim index past lane 0 (where it holds nothing)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from django.db import connection, transaction

from backwave_django import store
from backwave_django.core.limits import LimitValues, lane_of
from backwave_django.core.states import JobState
from backwave_django.models import JobRecord
from backwave_django.store.postgres import claims, flow
from backwave_django.store.postgres.connection import server_bound
from backwave_django.store.postgres.queues import queue_keys

from ..conftest import T0, lease, new_job
from .flow_jobs import declare
from .statement_params import claim_params

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.fast_path,
    pytest.mark.django_db,
    pytest.mark.usefixtures("job_statistics_restored"),
]

JOBS = "backwave_django_jobrecord"
#: The one claim index (backwave_django/models.py): every Scheduled job, keyed by lane.
CLAIM_INDEX = "backwave_job_claim"
HELD = 20_000
#: A tenth of ``HELD``: what the plain jobs' read costs behind it shows the cost is flat.
FEW_HELD = 2_000
PLAIN = 50
#: Buffers a statement may touch whatever the held count: index descents and the rows it returns.
BOUND = 200
BUSY = (("api", "busy"),)


@dataclass(frozen=True)
class Scene:
    """The queues of one test: names of their own, so that the rows an earlier test rolled back
    (dead until a vacuum) are never in the way of this one's index probes."""

    flow: str
    plain: str


@pytest.fixture(scope="module", autouse=True)
def vacuumed_after(django_db_blocker: Any) -> Iterator[None]:
    """After this module, the jobs table is vacuumed and its indexes rebuilt: its tests roll back
    tens of thousands of Scheduled rows, whose dead entries would otherwise swell the claim index
    (a vacuum frees its pages but keeps them) and price the plans of later tests
    (tests/admin/test_retrying.py) off it."""
    yield
    with django_db_blocker.unblock():
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute(f"VACUUM ANALYZE {JOBS}")
                cursor.execute(f"REINDEX TABLE {JOBS}")


@pytest.fixture
def saturated() -> Scene:
    """``HELD`` jobs in bucket ``api/busy`` (concurrency 1, one of its jobs Leased), then ``PLAIN``
    due plain jobs and one job of another bucket, all in one flow queue; analyzed."""
    return _saturate(HELD)


def _saturate(held_count: int) -> Scene:
    """The scene of :func:`saturated` with ``held_count`` jobs in the full bucket."""
    tail = uuid.uuid4().hex[:8]
    scene = Scene(flow=f"flow-{tail}", plain=f"plain-{tail}")
    declare(api=LimitValues(1, None, 1.0))
    # Each job is enqueued with its buckets: an update would leave every held job's old row version
    # (lane 0) in the index until a vacuum, where the plain jobs' read would step over them.
    store.enqueue_many([new_job(queue=scene.flow, limit_keys=BUSY) for _ in range(held_count)], now=T0)
    store.enqueue_many([new_job(queue=scene.flow) for _ in range(PLAIN)], now=T0)
    store.enqueue_many([new_job(queue=scene.flow, limit_keys=(("api", "other"),))], now=T0)
    with connection.cursor() as cursor:
        cursor.execute(f"ANALYZE {JOBS}")
    assert len(lease(scene.flow, max_jobs=1)) == 1  # the busy bucket's one slot (first in claim order)
    return scene


def _buffers(sql: str, params: dict[str, Any]) -> int:
    """Shared buffers (hit + read) the statement's generic plan touches when it runs; rolled back."""
    return _run(sql, params)[0]


def _run(sql: str, params: dict[str, Any]) -> tuple[int, set[str]]:
    """The buffers of :func:`_buffers`, and the names of the indexes the plan scans."""
    with transaction.atomic(), server_bound("default") as cursor:
        cursor.execute("SET LOCAL plan_cache_mode = force_generic_plan")
        cursor.execute("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + sql, params)
        (document,) = cursor.fetchone()
        transaction.set_rollback(True)
    found = document if isinstance(document, list) else json.loads(document)
    plan = found[0]["Plan"]
    return int(plan.get("Shared Hit Blocks", 0)) + int(plan.get("Shared Read Blocks", 0)), _index_names(plan)


def _index_names(node: dict[str, Any]) -> set[str]:
    names = {node["Index Name"]} if "Index Name" in node else set()
    for child in node.get("Plans", ()):
        names |= _index_names(child)
    return names


def test_the_lanes_are_found_without_reading_the_held_jobs(saturated: Scene) -> None:
    for name, sql, params in (
        ("FLOW_LANES", flow.FLOW_LANES, {"queue": saturated.flow}),
        ("FLOW_LOCK", flow.FLOW_LOCK, {"queue": saturated.flow, "queue_keys": [1]}),
        (
            "FLOW_USAGE",
            flow.FLOW_USAGE,
            {"queue": saturated.flow, "now": T0, "default_period": 1.0, "lanes": [0], "takes": [PLAIN]},
        ),
    ):
        touched, indexes = _run(sql, params)
        assert CLAIM_INDEX in indexes, (name, indexes)
        print(f"{name}: {touched} buffers with {HELD} held jobs")
        assert touched < BOUND, (name, touched)


def test_a_lane_with_room_is_read_up_to_its_room(saturated: Scene) -> None:
    other = lane_of(None, (("api", "other"),))
    params = {"queue": saturated.flow, "lanes": [other], "takes": [32], "now": T0}
    touched, indexes = _run(flow.FLOW_FETCH, params)
    assert indexes == {CLAIM_INDEX}, indexes
    print(f"FLOW_FETCH of a lane: {touched} buffers")
    assert touched < BOUND, touched


def test_the_plain_jobs_behind_the_held_ones_are_read_without_stepping_over_them(saturated: Scene) -> None:
    """The held jobs come first in claim order (enqueued before the plain ones, same priority and
    due time); reading the plain jobs costs the same behind ``HELD`` of them as behind a tenth."""
    params = {"queue": saturated.flow, "lanes": [0], "takes": [PLAIN], "now": T0}
    many, indexes = _run(flow.FLOW_FETCH, params)
    assert indexes == {CLAIM_INDEX}, indexes
    few = _buffers(flow.FLOW_FETCH, {**params, "queue": _saturate(FEW_HELD).flow})
    print(f"FLOW_FETCH of the plain jobs: {many} buffers behind {HELD} held jobs, {few} behind {FEW_HELD}")
    assert many < BOUND, many
    # Flat: page boundaries may differ by a page or two; stepping over the held jobs cost hundreds.
    assert abs(many - few) <= 10, (many, few)


def test_a_plain_queue_claim_pays_one_probe_past_its_lane(saturated: Scene) -> None:
    params = claim_params(saturated.plain)
    touched = _buffers(claims.CLAIM, params)
    print(f"CLAIM of an empty plain queue: {touched} buffers")
    assert touched < 20, touched
    after = {**params, "before": [saturated.flow], "through": [saturated.flow, saturated.plain]}
    touched = _buffers(claims.CLAIM, after)
    print(f"CLAIM of a plain queue after a flow queue: {touched} buffers")
    assert touched < 20, touched
    touched = _buffers(claims.CLAIM, {**params, "queue": saturated.flow, "through": [saturated.flow]})
    print(f"CLAIM of the flow queue (takes nothing): {touched} buffers")
    assert touched < 20, touched


def test_which_queues_are_flow_queues_is_a_probe_each(saturated: Scene) -> None:
    touched, indexes = _run(flow.HAS_FLOW_JOBS, {"queues": [saturated.flow, saturated.plain]})
    assert indexes == {CLAIM_INDEX}, indexes
    print(f"HAS_FLOW_JOBS: {touched} buffers")
    assert touched < 20, touched
    opening = {
        "queues": [saturated.flow, saturated.plain],
        "queue_keys": queue_keys([saturated.flow, saturated.plain]),
    }
    touched = _buffers(claims.PIPELINED_OPEN, opening)
    print(f"PIPELINED_OPEN: {touched} buffers")
    assert touched < 20, touched


def test_the_flow_claim_takes_the_plain_jobs_and_the_other_bucket_and_leaves_the_held_ones(
    saturated: Scene,
) -> None:
    got = [c.job_id for batch in (lease(saturated.flow), lease(saturated.flow)) for c in batch]
    assert len(got) == PLAIN + 1
    assert lease(saturated.flow) == []
    assert JobRecord.objects.filter(queue=saturated.flow, state=JobState.SCHEDULED).count() == HELD - 1
