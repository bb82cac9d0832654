"""``core.policy``: a job's declared policy, the overrides of one set of enqueues, and the columns a
row stores."""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from typing import Any

import pytest

from backwave_django.core.policy import DEFAULT_POLICY, JobPolicy, policy_columns, resolve_policy
from backwave_django.core.retry import RetryPolicy

DECLARED = JobPolicy(queue="billing", max_attempts=5, backoff=(1.0, 2.0), timeout=30.0, priority=7)


@dataclasses.dataclass
class _Settings:
    retry: RetryPolicy
    job_timeout: timedelta | None


def test_nothing_declared_is_the_default_queue_and_the_settings_policy() -> None:
    assert resolve_policy() is DEFAULT_POLICY
    assert (
        JobPolicy(queue="default", max_attempts=None, backoff=None, timeout=None, priority=0)
        == DEFAULT_POLICY
    )


def test_no_override_keeps_the_declared_policy_itself() -> None:
    assert resolve_policy(DECLARED) is DECLARED
    assert resolve_policy(DECLARED, queue=None, max_attempts=None, timeout=None) is DECLARED


def test_each_override_replaces_only_its_own_value_in_its_stored_form() -> None:
    assert resolve_policy(DECLARED, timeout=timedelta(minutes=2)) == dataclasses.replace(
        DECLARED, timeout=120.0
    )
    assert resolve_policy(DECLARED, backoff=[timedelta(seconds=3), 4]) == dataclasses.replace(
        DECLARED, backoff=(3.0, 4.0)
    )
    assert resolve_policy(DECLARED, queue="eu", max_attempts=1, priority=-100) == JobPolicy(
        queue="eu", max_attempts=1, backoff=(1.0, 2.0), timeout=30.0, priority=-100
    )
    assert resolve_policy(DECLARED, priority=0).priority == 0  # a falsy override still overrides


@pytest.mark.parametrize(
    ("override", "error", "message"),
    [
        ({"queue": ""}, ValueError, "queue must be non-empty"),
        ({"queue": "a,b"}, ValueError, "queue 'a,b' is not a valid queue name"),
        ({"max_attempts": 0}, ValueError, "max_attempts must be between 1 and 1000, got 0"),
        ({"max_attempts": True}, TypeError, "max_attempts must be an int, got True"),
        ({"backoff": []}, ValueError, "A backoff list must declare at least one interval"),
        ({"backoff": [-1]}, ValueError, "A backoff interval cannot be negative"),
        ({"backoff": lambda attempt: 1}, TypeError, "a callable backoff belongs on @job"),
        ({"timeout": 0}, ValueError, "timeout must be greater than zero"),
        ({"timeout": "30"}, TypeError, "timeout must be a timedelta or a number of seconds, got '30'"),
        ({"priority": 101}, ValueError, "priority must be from -100 to 100, got 101"),
        ({"priority": 1.5}, TypeError, "priority must be an int from -100 to 100, got 1.5"),
    ],
)
def test_a_bad_value_is_refused_with_a_message_naming_it(
    override: dict[str, Any], error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        resolve_policy(DECLARED, **override)


def test_columns_keep_a_jobs_own_values() -> None:
    settings = _Settings(RetryPolicy(max_attempts=9), timedelta(minutes=1))
    assert policy_columns(5, (1.0, 2.0), 30.0, settings) == {
        "max_attempts": 5,
        "backoff": [1.0, 2.0],
        "timeout": 30.0,
    }


def test_columns_take_the_settings_ceiling_and_time_limit_but_leave_the_backoff_unset() -> None:
    assert policy_columns(None, None, None, _Settings(RetryPolicy(max_attempts=9), timedelta(minutes=1))) == {
        "max_attempts": 9,
        "backoff": None,
        "timeout": 60.0,
    }
    assert policy_columns(None, None, None, _Settings(RetryPolicy(), None))["timeout"] is None
