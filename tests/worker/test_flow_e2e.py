"""Flow control end to end (docs/flow-control.md): two real worker processes on PostgreSQL, and
what they did read back from the transition log.

The jobs are declared in tests/jobsapp/flow_jobs.py, which only the workers load
(``BACKWAVE_TEST_FLOW=1``); the test enqueues them through the store with the buckets and the
partition those declarations give. Nothing here asserts a duration: only orders and counts that
hold whatever the machine's speed (timing goals live in benchmarks/, the ``flow`` rows).

A lease is the interval from its claim entry (``Scheduled → Leased``) to the job's next entry; log
ids order those intervals (tests/torture/flow_audit.py explains why that order is sound).
"""

from __future__ import annotations

import uuid
from collections import defaultdict
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone

from backwave_django import JobState, NewJob, store
from backwave_django.core.limits import LimitKeys
from backwave_django.models import JobRecord, JobTransition, LimitLease

from .conftest import Workers, wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.postgres]

PER_KEY, RATE = "e2e-per-key", "e2e-rate"
RATE_LIMIT, RATE_PERIOD = 10, 1.0
#: Worker slots.
CONCURRENCY = 4


def enqueue(
    wire: str,
    queue: str,
    payloads: list[dict[str, object]],
    *,
    limit_keys: LimitKeys = (),
    partition: str | None = None,
) -> list[uuid.UUID]:
    """Enqueue one job per payload (``{"args": [...], "kwargs": {...}}``) in one batch."""
    now = timezone.now()
    jobs = [
        NewJob(
            job_id=uuid.uuid4(),
            wire_name=wire,
            payload=payload,
            queue=queue,
            due_time=now,
            limit_keys=limit_keys,
            partition=partition,
        )
        for payload in payloads
    ]
    store.enqueue_many(jobs, now=now, raise_refusals=True)
    return [job.job_id for job in jobs]


def start_two(workers: Workers, queue: str, **settings: object) -> None:
    workers.environ["BACKWAVE_TEST_FLOW"] = "1"
    for name in ("flow-1", "flow-2"):
        workers.start("--queues", queue, "--concurrency", str(CONCURRENCY), "--name", name, **settings)


def wait_succeeded(workers: Workers, ids: list[uuid.UUID], timeout: float = 90.0) -> None:
    def done() -> bool:
        return JobRecord.objects.filter(job_id__in=ids, state=JobState.SUCCEEDED).count() == len(ids)

    try:
        wait_for(done, timeout=timeout, what=f"{len(ids)} jobs Succeeded")
    except AssertionError:
        states = list(JobRecord.objects.filter(job_id__in=ids).values_list("state", flat=True))
        raise AssertionError(f"states {sorted(states)}\n{workers.logs()}") from None


def logs(ids: list[uuid.UUID]) -> dict[uuid.UUID, list[JobTransition]]:
    by_sequence = dict(JobRecord.objects.filter(job_id__in=ids).values_list("sequence", "job_id"))
    found: dict[uuid.UUID, list[JobTransition]] = defaultdict(list)
    for entry in JobTransition.objects.filter(job_id__in=by_sequence).order_by("job_id", "ordinal"):
        found[by_sequence[entry.job_id]].append(entry)
    return found


def leases(log: list[JobTransition]) -> list[tuple[int, int]]:
    """Each attempt's (claim entry id, id of the entry that ended it) of a job that has ended."""
    return [
        (entry.id, log[index + 1].id) for index, entry in enumerate(log) if entry.state == JobState.LEASED
    ]


def peak(intervals: list[tuple[int, int]]) -> int:
    """The most intervals live at one claim, in log order."""
    steps = sorted([(start, 1) for start, _ in intervals] + [(end, -1) for _, end in intervals])
    live = best = 0
    for _, step in steps:
        live += step
        best = max(best, live)
    return best


def assert_no_attempt_spent_while_held(found: dict[uuid.UUID, list[JobTransition]]) -> None:
    """Held jobs stay Scheduled with no entry and no attempt: each job has exactly one claim."""
    for job, log in found.items():
        assert [e.state for e in log] == [JobState.SCHEDULED, JobState.LEASED, JobState.SUCCEEDED], job
        assert log[-1].attempt == 1, job


def test_one_per_key_is_never_exceeded_and_different_keys_run_side_by_side(workers: Workers, tmp_path: Path) -> None:
    keys = ("k0", "k1", "k2")
    meet = tmp_path / "meet"
    meet.mkdir()
    by_key: dict[str, list[uuid.UUID]] = {}
    for key in keys:
        # The first job of each key waits until a job of another key runs at the same time.
        first = enqueue("flow.per-key", "flow-key", [{"args": [key], "kwargs": {"meet_dir": str(meet)}}],
                        limit_keys=((PER_KEY, key),))
        rest = enqueue("flow.per-key", "flow-key", [{"args": [key], "kwargs": {}} for _ in range(7)],
                       limit_keys=((PER_KEY, key),))
        by_key[key] = first + rest
    start_two(workers, "flow-key")
    every = [job for ids in by_key.values() for job in ids]
    wait_succeeded(workers, every)

    found = logs(every)
    assert_no_attempt_spent_while_held(found)
    per_key = {key: [lease for job in ids for lease in leases(found[job])] for key, ids in by_key.items()}
    assert {key: peak(intervals) for key, intervals in per_key.items()} == dict.fromkeys(keys, 1)
    # The limit does not serialise unrelated keys: leases of different keys were live together
    # (the first job of each key could only finish once another key's job ran beside it).
    assert peak([lease for intervals in per_key.values() for lease in intervals]) >= 2
    assert not LimitLease.objects.exists()  # every slot was given back with its lease


def test_a_rate_limit_holds_every_sliding_window_to_its_rate(workers: Workers) -> None:
    n = 40
    ids = enqueue("flow.rated", "flow-rate", [{"args": [i], "kwargs": {}} for i in range(n)],
                  limit_keys=((RATE, ""),))
    start_two(workers, "flow-rate")
    wait_succeeded(workers, ids)

    found = logs(ids)
    assert_no_attempt_spent_while_held(found)
    stamps = sorted(log[1].recorded_at for log in found.values())
    period = timedelta(seconds=RATE_PERIOD)
    windows = [sum(1 for s in stamps if t - period < s <= t) for t in stamps]
    assert max(windows) <= RATE_LIMIT
    # And the claims took as long as the rate demands: claim 10k+1 comes more than k periods after
    # the first, so the last of 40 more than 3 periods after it.
    assert stamps[-1] - stamps[0] > (n // RATE_LIMIT - 1) * period


def test_a_late_partition_is_claimed_in_the_first_batches_despite_a_big_backlog(workers: Workers) -> None:
    backlog = enqueue("flow.tenant", "flow-fair", [{"args": ["A", i], "kwargs": {}} for i in range(200)],
                      partition="A")
    late = enqueue("flow.tenant", "flow-fair", [{"args": ["B", i], "kwargs": {}} for i in range(3)],
                   partition="B")
    start_two(workers, "flow-fair")
    wait_succeeded(workers, backlog + late)

    found = logs(backlog + late)
    assert_no_attempt_spent_while_held(found)
    # A claim batch: the jobs one claim of one worker took, all logged with its actor and its now.
    batches: dict[tuple[str, object], list[tuple[int, str]]] = defaultdict(list)
    for job, log in found.items():
        claim = log[1]
        batches[(claim.actor, claim.recorded_at)].append((claim.id, "B" if job in late else "A"))
    in_order = sorted(batches.values(), key=min)
    last_b = max(index for index, batch in enumerate(in_order) if any(tenant == "B" for _, tenant in batch))
    # Each claim batch takes A and B in turn while both have due jobs, so B's three jobs were all
    # in the first claim batch, or in the first two when the two workers claimed side by side (one
    # skips the rows the other has locked). First in, first out would have taken all 200 of A first.
    described = [f"{len(b)} jobs, {sum(t == 'B' for _, t in b)} of B" for b in in_order[: last_b + 1]]
    assert last_b <= 1, described
