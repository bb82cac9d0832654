from datetime import UTC, datetime, timedelta

import pytest

from backwave_django import RetryPolicy

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def test_default_backoff_doubles_and_caps_at_300_seconds():
    policy = RetryPolicy()
    delays = [policy.delay(a).total_seconds() for a in range(1, 11)]
    assert delays == [2, 4, 8, 16, 32, 64, 128, 256, 300, 300]


def test_tenth_failure_dead_letters_by_default():
    policy = RetryPolicy()
    assert policy.next_attempt_at(9, NOW) == NOW + timedelta(seconds=300)
    assert policy.next_attempt_at(10, NOW) is None
    assert policy.next_attempt_at(11, NOW) is None


def test_backoff_list_repeats_its_last_entry():
    policy = RetryPolicy(max_attempts=5, backoff=[1, timedelta(seconds=5)])
    assert [policy.next_attempt_at(a, NOW) for a in range(1, 6)] == [
        NOW + timedelta(seconds=1),
        NOW + timedelta(seconds=5),
        NOW + timedelta(seconds=5),
        NOW + timedelta(seconds=5),
        None,
    ]


def test_backoff_callable_may_return_seconds_or_timedelta():
    assert RetryPolicy(backoff=lambda a: a * 10).delay(3) == timedelta(seconds=30)
    assert RetryPolicy(backoff=lambda a: timedelta(minutes=a)).delay(2) == timedelta(minutes=2)


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"max_attempts": 0}, ValueError, "at least one attempt"),
        ({"max_attempts": 1001}, ValueError, "at most 1000 attempts"),
        ({"max_attempts": "3"}, TypeError, "max_attempts must be an int"),
        ({"backoff": []}, ValueError, "at least one interval"),
        ({"backoff": [-1]}, ValueError, "cannot be negative"),
        ({"backoff": list(range(21))}, ValueError, "at most 20 intervals"),
        ({"backoff": "5"}, TypeError, "backoff must be"),
    ],
)
def test_invalid_policies_are_refused_with_a_clear_message(kwargs, error, message):
    with pytest.raises(error, match=message):
        RetryPolicy(**kwargs)


def test_next_attempt_at_refuses_a_naive_now():
    with pytest.raises(ValueError, match="now must be timezone-aware"):
        RetryPolicy().next_attempt_at(1, datetime(2026, 1, 1))
