"""The wake-up hint's payload (``store/postgres/notifications.py``): the queue, and the earliest due
time it made claimable when it carries one; read back as the worker's listener reads it. No
database: ``sql/inserts.sql`` writes the same form (``tests/store/test_enqueue.py`` reads it)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from backwave_django.store import read_hint
from backwave_django.store.postgres.notifications import hint_payload

T0 = datetime(2026, 1, 1, 12, 30, 15, 123456, tzinfo=UTC)


def test_a_hint_without_a_due_time_is_the_queue_alone() -> None:
    assert hint_payload("billing") == "billing"
    assert read_hint("billing") == ("billing", None)


def test_a_due_time_comes_back_a_little_early_never_late() -> None:
    payload = hint_payload("billing", T0)
    assert payload == "billing=1767270615.123456"
    queue, due = read_hint(payload)
    assert queue == "billing"
    assert due is not None
    assert T0 - timedelta(milliseconds=2) < due <= T0


def test_what_is_not_a_number_reads_as_no_due_time() -> None:
    assert read_hint("billing=soon") == ("billing", None)
    assert read_hint("billing=") == ("billing", None)
    assert read_hint("billing=1e999") == ("billing", None)
