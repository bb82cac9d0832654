"""The observer pump's pacing (backwave_django/worker/observing.py): after a round with nothing to
deliver it waits the poll interval, unless a failed delivery's retry is due sooner; then it waits
only until that retry, so an observer that fails now and then is held up by its backoff, not by
the poll interval."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

from backwave_django import JobState
from backwave_django.conf import get_settings
from backwave_django.core.observing import Delivery, ObserverDisposition
from backwave_django.observers import ObserverDefinition
from backwave_django.worker.observing import ObserverPump, idle_wait

from ..conftest import T0


def test_an_idle_round_waits_the_poll_interval_or_until_the_next_retry_if_sooner() -> None:
    assert idle_wait(0.25, None, T0) == 0.25
    assert idle_wait(0.25, T0 + timedelta(seconds=0.05), T0) == 0.05
    assert idle_wait(0.25, T0 + timedelta(seconds=3), T0) == 0.25
    assert idle_wait(0.25, T0 - timedelta(seconds=1), T0) == 0.0  # already due: go again at once


class _Failing:
    def call(self, definition: Any, delivery: Any, timeout: float) -> str:
        return "boom"


def _delivery(position: int) -> Delivery:
    return Delivery(
        position=position,
        job_id=uuid.uuid4(),
        ordinal=0,
        wire_name="w",
        queue="default",
        state=JobState.SCHEDULED,
        attempt=0,
        recorded_at=T0,
        failure_detail=None,
        actor="enqueue",
        delivery_attempt=1,
    )


def test_a_failed_delivery_sets_the_pumps_next_retry_and_gives_the_rest_back(
    monkeypatch: Any, settings: Any
) -> None:
    settings.BACKWAVE = {**getattr(settings, "BACKWAVE", {}), "OBSERVER_RETRY": {"BACKOFF": [0.05]}}
    definition = ObserverDefinition("o", lambda event: None, (JobState.SCHEDULED,), None, None)
    pump = ObserverPump(worker_id="w1", observers=[definition], settings=get_settings())
    monkeypatch.setattr(pump, "_caller", lambda definition: _Failing())
    monkeypatch.setattr("backwave_django.clock.now", lambda: T0)
    outcomes = pump._deliver(definition, [_delivery(1), _delivery(2)])
    assert [(p, d) for p, d, _ in outcomes] == [(1, ObserverDisposition.RETRY), (2, ObserverDisposition.RETRY)]
    assert pump.next_retry == T0 + timedelta(seconds=0.05)
    assert idle_wait(pump.settings.poll_interval.total_seconds(), pump.next_retry, T0) == 0.05
