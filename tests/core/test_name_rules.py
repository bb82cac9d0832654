"""The one queue-name rule and the one schedule-id rule (``core/validation.py``)."""

from __future__ import annotations

import pytest

from backwave_django.core.outcomes import ScheduleSpec
from backwave_django.core.validation import validate_queue_name, validate_schedule_id


@pytest.mark.parametrize(
    "queue", ["default", "billing-eu", "reports.daily", "tenant:acme", "a/b", "ünï?#%", "7"]
)
def test_queue_names_without_whitespace_commas_or_equals_are_valid(queue):
    assert validate_queue_name(queue) == queue


@pytest.mark.parametrize(
    ("queue", "bad"),
    [
        ("bad queue!", " "),
        ("mail,billing", ","),
        ("a=6", "="),
        ("tab\there", "\t"),
        (" mail", " "),
        ("x\x00", "\x00"),
    ],
)
def test_a_queue_name_that_breaks_the_rule_is_refused_with_the_rule(queue, bad):
    with pytest.raises(ValueError, match="is not a valid queue name") as refused:
        validate_queue_name(queue)
    message = str(refused.value)
    assert message.startswith(
        f"queue {queue!r} is not a valid queue name: a queue name is 1 to 128 characters"
    )
    assert "no whitespace or control characters and no ',' or '='" in message
    assert message.endswith(f"it contains {bad!r}")


def test_the_queue_length_rule_keeps_its_message():
    with pytest.raises(ValueError, match=r"^queue is at most 128 characters, got 129$"):
        validate_queue_name("q" * 129)


@pytest.mark.parametrize("schedule_id", ["nightly", "tracing.tick", "upgrade-nightly", "s" * 128])
def test_valid_schedule_ids(schedule_id):
    assert validate_schedule_id(schedule_id) == schedule_id


@pytest.mark.parametrize(
    ("schedule_id", "message"),
    [
        (
            "nightly report",
            "schedule_id 'nightly report' is not a valid schedule id: a schedule id is 1 to 128",
        ),
        ("", "schedule_id must be non-empty"),
        ("s" * 129, "schedule_id is at most 128 characters, got 129"),
    ],
)
def test_a_schedule_id_that_breaks_the_rule_is_refused(schedule_id, message):
    with pytest.raises(ValueError, match=message):
        validate_schedule_id(schedule_id)
    with pytest.raises(ValueError, match=message):
        ScheduleSpec(schedule_id=schedule_id, cron="* * * * *", wire_name="w", payload={})
