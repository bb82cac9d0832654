"""The hint listener (``worker/hints.py``) on real PostgreSQL: it says whether hints arrive
(``hearing``), which decides whether the pump may wait for one after a short claim
(``worker/pacing.py``)."""

from __future__ import annotations

import threading
import time

import pytest

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


def test_it_hears_while_listening_and_stops_hearing_when_stopped() -> None:
    woken = threading.Event()
    # The alias a worker listens on (a direct one when the default goes through a pooler).
    listener = HintListener(using=listen_database(), queues=["billing"], wake=woken.set)
    assert not listener.hearing  # not connected yet
    listener.start()
    try:
        assert _until(lambda: listener.hearing)
        assert woken.wait(5.0)  # the wake-up it sends once listening
        woken.clear()
        notify("default", "billing")  # autocommit: delivered at once
        assert woken.wait(5.0)
    finally:
        listener.stop()
        listener.thread.join(5.0)
    assert not listener.thread.is_alive()
    assert not listener.hearing
