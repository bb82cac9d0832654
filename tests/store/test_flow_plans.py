"""The flow claim's statements on PostgreSQL never read the jobs a saturated bucket holds back:
with ``HELD`` jobs in one full bucket, what each statement reads (``EXPLAIN (ANALYZE, BUFFERS)``,
shared buffers hit or read) is bounded by the jobs it returns and the lanes, not by ``HELD``; and
a plain queue's claim pays one probe of the (empty) lane index."""

from __future__ import annotations

import json
import uuid
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

from ..conftest import LEASE, T0, WORKER, lease, new_job
from .flow_jobs import declare

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.fast_path,
    pytest.mark.django_db,
    pytest.mark.usefixtures("job_statistics_restored"),
]

JOBS = "backwave_django_jobrecord"
HELD = 20_000
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


@pytest.fixture
def saturated() -> Scene:
    """``HELD`` jobs in bucket ``api/busy`` (concurrency 1, one of its jobs Leased), then ``PLAIN``
    due plain jobs and one job of another bucket, all in one flow queue; analyzed."""
    tail = uuid.uuid4().hex[:8]
    scene = Scene(flow=f"flow-{tail}", plain=f"plain-{tail}")
    declare(api=LimitValues(1, None, 1.0))
    store.enqueue_many([new_job(queue=scene.flow) for _ in range(HELD)], now=T0)
    held = JobRecord.objects.filter(queue=scene.flow)
    held.update(limit_keys=[list(BUSY[0])], lane=lane_of(None, BUSY))
    store.enqueue_many([new_job(queue=scene.flow) for _ in range(PLAIN)], now=T0)
    store.enqueue_many([new_job(queue=scene.flow)], now=T0)
    last = held.order_by("-sequence").values_list("sequence", flat=True)[0]
    other = (("api", "other"),)
    JobRecord.objects.filter(sequence=last).update(limit_keys=[list(other[0])], lane=lane_of(None, other))
    with connection.cursor() as cursor:
        cursor.execute(f"ANALYZE {JOBS}")
    assert len(lease(scene.flow, max_jobs=1)) == 1  # the busy bucket's one slot (first in claim order)
    return scene


def _buffers(sql: str, params: dict[str, Any]) -> int:
    """Shared buffers (hit + read) the statement's generic plan touches when it runs; rolled back."""
    with transaction.atomic(), server_bound("default") as cursor:
        cursor.execute("SET LOCAL plan_cache_mode = force_generic_plan")
        cursor.execute("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + sql, params)
        (document,) = cursor.fetchone()
        transaction.set_rollback(True)
    found = document if isinstance(document, list) else json.loads(document)
    plan = found[0]["Plan"]
    return int(plan.get("Shared Hit Blocks", 0)) + int(plan.get("Shared Read Blocks", 0))


def test_the_lanes_are_found_without_reading_the_held_jobs(saturated: Scene) -> None:
    touched = _buffers(flow.FLOW_LANES, {"queue": saturated.flow})
    print(f"FLOW_LANES: {touched} buffers with {HELD} held jobs")
    assert touched < BOUND, touched


def test_a_lane_with_room_is_read_up_to_its_room(saturated: Scene) -> None:
    other = lane_of(None, (("api", "other"),))
    touched = _buffers(flow.FLOW_FETCH_LANE, {"queue": saturated.flow, "lane": other, "take": 32, "now": T0})
    print(f"FLOW_FETCH_LANE: {touched} buffers")
    assert touched < BOUND, touched


def test_a_plain_queue_claim_pays_one_probe_of_the_empty_lane_index(saturated: Scene) -> None:
    params = {
        "queue": saturated.plain,
        "now": T0,
        "take": 32,
        "worker": WORKER,
        "expiry": T0 + LEASE,
        "history": True,
        "cap": 64,
        "before": [],
        "through": [saturated.plain],
    }
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
    touched = _buffers(flow.HAS_FLOW_JOBS, {"queues": [saturated.flow, saturated.plain]})
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
