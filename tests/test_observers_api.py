"""Declaring observers (@observer), the system check that needs history for them, and the
in-process ``job_enqueued`` signal."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.db import transaction

from backwave_django import JobState, TransitionEvent, checks, observer, signals
from backwave_django.observers import definitions, unregister
from tests.jobsapp import jobs


@pytest.fixture
def declared() -> Iterator[list[str]]:
    """Observer ids a test declares; forgotten afterwards."""
    ids: list[str] = []
    yield ids
    for observer_id in ids:
        unregister(observer_id)


def _declare(declared: list[str], observer_id: str, **subscription: Any) -> Any:
    def handle(event: TransitionEvent) -> None:
        pass

    declared.append(observer_id)
    return observer(observer_id, **subscription)(handle)


def test_an_observer_is_registered_with_its_subscription(declared):
    definition = _declare(
        declared, "t.alert", states=[JobState.DEAD_LETTERED, 6, JobState.DEAD_LETTERED], queue="mail"
    )
    assert definitions()["t.alert"] is definition
    assert definition.states == (JobState.DEAD_LETTERED, JobState.QUARANTINED)
    assert (definition.wire_name, definition.queue, definition.is_async) == (None, "mail", False)


def test_a_repeated_observer_id_raises_and_keeps_the_first(declared):
    first = _declare(declared, "t.twice", states=[JobState.SUCCEEDED])

    def other(event: TransitionEvent) -> None:
        pass

    with pytest.raises(ImproperlyConfigured, match=r"Transition Observer 't\.twice' is configured twice"):
        observer("t.twice", states=[JobState.SUCCEEDED])(other)
    assert definitions()["t.twice"] is first


@pytest.mark.parametrize(
    ("arguments", "error", "message"),
    [
        ({"observer_id": "", "states": []}, ImproperlyConfigured, "explicit, non-empty id"),
        ({"observer_id": "t.bad", "states": [JobState.SUCCEEDED, 42]}, ValueError, "unknown state: 42"),
        ({"observer_id": "t.bad", "states": ["Succeeded"]}, ValueError, "unknown state"),
        ({"observer_id": "t.bad", "states": "SUCCEEDED"}, TypeError, "list of JobState"),
        ({"observer_id": "t.bad", "states": [], "queue": "q" * 300}, ValueError, "queue is at most"),
        ({"observer_id": "t.bad", "states": [], "wire_name": ""}, ValueError, "wire_name"),
    ],
)
def test_a_bad_declaration_is_refused(arguments, error, message):
    observer_id = arguments.pop("observer_id")
    with pytest.raises(error, match=message):
        observer(observer_id, **arguments)
    assert "t.bad" not in definitions()


def test_an_observer_without_history_is_a_check_error(declared, backwave_settings):
    _declare(declared, "t.needs-history", states=[JobState.SUCCEEDED])
    backwave_settings(HISTORY="OFF")
    [error] = checks.check_observers()
    assert error.id == "backwave.E005"
    assert "'t.needs-history'" in error.msg
    assert "HISTORY is OFF" in error.msg
    backwave_settings(HISTORY="TRANSITIONS")
    assert checks.check_observers() == []


def test_no_observer_no_check_even_without_history(backwave_settings):
    backwave_settings(HISTORY="OFF")
    assert checks.check_observers() == []


@pytest.mark.django_db(transaction=True)
def test_job_enqueued_is_sent_after_commit_and_not_for_a_duplicate_or_a_rollback():
    sent: list[dict[str, Any]] = []

    def receive(sender: Any, **named: Any) -> None:
        sent.append({"sender": sender, **named})

    signals.job_enqueued.connect(receive)
    try:
        with transaction.atomic():
            receipt = jobs.echo.enqueue("x")
            assert sent == []  # not before the commit
        assert [(s["job_id"], s["wire_name"], s["queue"]) for s in sent] == [
            (receipt.job_id, "test.echo", "default")
        ]
        sent.clear()
        jobs.echo.using(job_id=receipt.job_id).enqueue("x")  # a duplicate id: not stored again
        assert sent == []
        with pytest.raises(RuntimeError), transaction.atomic():
            jobs.echo.enqueue("rolled back")
            raise RuntimeError
        assert sent == []
    finally:
        signals.job_enqueued.disconnect(receive)


@pytest.mark.django_db(transaction=True)
def test_a_failing_signal_receiver_is_logged_and_the_enqueue_stands(caplog):
    def broken(sender: Any, **named: Any) -> None:
        raise ValueError("receiver bug")

    signals.job_enqueued.connect(broken)
    try:
        receipt = jobs.echo.enqueue("y")
    finally:
        signals.job_enqueued.disconnect(broken)
    assert receipt.job_id
    assert "A job_enqueued receiver" in caplog.text
    assert "receiver bug" in caplog.text


@pytest.mark.django_db(transaction=True)
def test_job_enqueued_is_sent_for_each_member_of_a_workflow():
    from backwave_django import workflow

    sent: list[Any] = []

    def receive(sender: Any, **named: Any) -> None:
        sent.append(named["job_id"])

    signals.job_enqueued.connect(receive)
    try:
        with workflow("signalled") as wf:
            first = wf.add(jobs.echo.prepare("a"))
            second = wf.add(jobs.echo.prepare("b"), after=[first])
    finally:
        signals.job_enqueued.disconnect(receive)
    assert sent == [first.job_id, second.job_id]
