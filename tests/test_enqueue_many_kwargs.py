"""``job.enqueue_many([...])`` and ``job.using(...).enqueue_many([...])`` (client.py): one job per
dict of keyword arguments, each prepared as ``job.prepare(**kwargs)`` would, all of them before
anything is written, then stored by ``backwave_django.enqueue_many`` in its batches."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.db import connections

from backwave_django import EnqueueResult, client
from backwave_django.models import JobRecord
from tests.jobsapp import jobs


def _rows() -> list[tuple[Any, ...]]:
    return list(JobRecord.objects.order_by("sequence").values_list("job_id", "queue", "priority", "payload"))


@pytest.mark.django_db
def test_one_job_per_dict_in_input_order_over_several_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(client, "ENQUEUE_MANY_BATCH", 2)
    calls = [{"seconds": n / 2, "marker": f"m{n}"} for n in range(5)]
    receipts = jobs.sleep.enqueue_many(calls)
    assert {r.enqueue_result for r in receipts} == {EnqueueResult.OK}
    assert _rows() == [
        (r.job_id, "slow", 0, {"args": [], "kwargs": call}) for r, call in zip(receipts, calls, strict=True)
    ]
    assert jobs.sleep.enqueue_many([]) == []


@pytest.mark.django_db
def test_the_options_of_using_apply_to_every_job() -> None:
    receipts = jobs.sleep.using(queue="eu", priority=3).enqueue_many([{"seconds": 1}, {"seconds": 2}])
    assert _rows() == [
        (receipts[0].job_id, "eu", 3, {"args": [], "kwargs": {"seconds": 1}}),
        (receipts[1].job_id, "eu", 3, {"args": [], "kwargs": {"seconds": 2}}),
    ]
    keyed = jobs.sleep.using(job_id="the-one").enqueue_many([{"seconds": 1}, {"seconds": 1}])
    assert [r.enqueue_result for r in keyed] == [EnqueueResult.OK, EnqueueResult.DUPLICATE]


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("calls", "message"),
    [
        (
            [{"seconds": 1}, {"seconds": 1, "colour": "red"}],
            r"^enqueue_many item 1: test\.sleep: got an unexpected keyword argument 'colour'$",
        ),
        ([{"seconds": 1}, {"marker": "m"}], r"^enqueue_many item 1: test\.sleep: missing a required argument: 'seconds'$"),
        ([{"seconds": 1}, {"seconds": {1, 2}}], r"^enqueue_many item 1: argument 'seconds' of job 'test\.sleep' is not JSON"),
        ([{"seconds": 1}, (1,)], r"^enqueue_many takes dicts of keyword arguments; item 1 is \(1,\)$"),
        ({"seconds": 1}, r"^enqueue_many takes a list of dicts of keyword arguments, got dict$"),
        ("seconds", r"^enqueue_many takes a list of dicts of keyword arguments, got str$"),
    ],
)  # fmt: skip
def test_a_call_that_does_not_prepare_is_named_and_nothing_is_written(calls: Any, message: str) -> None:
    with pytest.raises(TypeError, match=message):
        jobs.sleep.enqueue_many(calls)
    with pytest.raises(TypeError, match=message):
        jobs.sleep.using(priority=3).enqueue_many(calls)
    assert not JobRecord.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_aenqueue_many_from_a_running_event_loop() -> None:
    async def scenario() -> tuple[list[Any], list[Any]]:
        plain = await jobs.sleep.aenqueue_many([{"seconds": 1}, {"seconds": 2, "marker": None}])
        options = await jobs.sleep.using(queue="eu").aenqueue_many([{"seconds": 3}])
        await sync_to_async(connections.close_all, thread_sensitive=True)()
        return plain, options

    plain, options = asyncio.run(scenario())
    assert [row[0] for row in _rows()] == [r.job_id for r in (*plain, *options)]
    assert [row[1] for row in _rows()] == ["slow", "slow", "eu"]
