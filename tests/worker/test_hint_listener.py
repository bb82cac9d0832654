"""The hint listener (``worker/hints.py``) on real PostgreSQL: it says whether hints arrive
(``hearing``), which decides whether the pump may wait for one after a short claim
(``worker/pacing.py``)."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta

import pytest

from backwave_django.core.claim_floors import ClaimFloors, FloorBounds
from backwave_django.database import listen_database
from backwave_django.store._tx import notify
from backwave_django.worker.hints import HintListener

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def _until(condition: object, seconds: float = 10.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if callable(condition) and condition():
            return True
        time.sleep(0.01)
    return False


T0 = datetime(2026, 1, 1, tzinfo=UTC)


def test_it_hears_while_listening_and_stops_hearing_when_stopped() -> None:
    woken = threading.Event()
    floors = ClaimFloors()
    floors.claimed("billing", FloorBounds([], []), T0, [(0, T0)])
    # The alias a worker listens on (a direct one when the default goes through a pooler).
    listener = HintListener(using=listen_database(), queues=["billing"], wake=woken.set, floors=floors)
    assert not listener.hearing  # not connected yet
    listener.start()
    try:
        assert _until(lambda: listener.hearing)
        assert woken.wait(5.0)  # the wake-up it sends once listening
        # What was sent before it listened was not heard: the next claim reads from the heads.
        assert floors.bounds("billing", T0).full
        woken.clear()
        late = T0 - timedelta(minutes=1)
        notify("default", "billing", due=late)  # autocommit: delivered at once
        assert woken.wait(5.0)
        floors.claimed("billing", FloorBounds([], []), T0, [(0, T0)])  # (the full scan)
        assert floors.bounds("billing", T0).floors[0] <= late  # lowered to the hint's due time
    finally:
        listener.stop()
        listener.thread.join(5.0)
    assert not listener.thread.is_alive()
    assert not listener.hearing


def test_a_hint_of_another_queue_neither_wakes_nor_lowers() -> None:
    woken = threading.Event()
    floors = ClaimFloors()
    floors.claimed("billing", FloorBounds([], []), T0, [(0, T0)])
    listener = HintListener(using=listen_database(), queues=["billing"], wake=woken.set, floors=floors)
    listener.heard(f"emails={(T0 - timedelta(hours=1)).timestamp():.6f}")
    listener.heard("billing=not-a-number")  # only ever a hint: wakes, lowers nothing
    assert woken.is_set()
    assert floors.bounds("billing", T0).floors == [T0 - floors.lag]
