"""``core.frozen.frozen_builder``: a frozen dataclass built through a plain twin is the same value."""

from __future__ import annotations

import dataclasses
import pickle
import uuid
from datetime import UTC, datetime
from typing import Any

import pytest

from backwave_django.core.frozen import frozen_builder
from backwave_django.core.outcomes import ClaimedJob

NOW = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)
VALUES: dict[str, Any] = {
    "job_id": uuid.UUID(int=7),
    "wire_name": "reports.build",
    "queue": "default",
    "payload": {"args": [1], "kwargs": {}},
    "attempt": 2,
    "due_time": NOW,
    "lease_owner": "host:1:abc",
    "lease_expiry": NOW,
    "tags": (),
    "cancel_requested": True,
    "max_attempts": 5,
    "backoff": (1.0, 2.0),
    "timeout": 3.5,
    "trace_context": None,
}


def test_a_built_claimed_job_equals_one_made_by_its_class() -> None:
    built = frozen_builder(ClaimedJob)(**VALUES)
    made = ClaimedJob(**VALUES)
    assert type(built) is ClaimedJob
    assert built == made
    assert hash(dataclasses.replace(built, payload=None)) == hash(dataclasses.replace(made, payload=None))
    assert repr(built) == repr(made)
    assert dataclasses.asdict(built) == dataclasses.asdict(made)
    assert pickle.loads(pickle.dumps(built)) == made
    assert dataclasses.replace(built, attempt=3) == dataclasses.replace(made, attempt=3)


def test_values_may_come_in_field_order() -> None:
    assert frozen_builder(ClaimedJob)(*VALUES.values()) == ClaimedJob(**VALUES)


def test_a_built_instance_is_frozen() -> None:
    built = frozen_builder(ClaimedJob)(**VALUES)
    with pytest.raises(dataclasses.FrozenInstanceError):
        built.attempt = 3  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        del built.attempt


def test_every_field_is_needed_even_one_with_a_default() -> None:
    partial = {k: v for k, v in VALUES.items() if k != "trace_context"}
    with pytest.raises(TypeError, match="trace_context"):
        frozen_builder(ClaimedJob)(**partial)


@dataclasses.dataclass(frozen=True)
class _NoSlots:
    value: int


@dataclasses.dataclass(slots=True)
class _NotFrozen:
    value: int


@dataclasses.dataclass(frozen=True, slots=True)
class _Checked:
    value: int

    def __post_init__(self) -> None:
        if self.value < 0:
            raise ValueError("negative")


@pytest.mark.parametrize("cls", [_NoSlots, _NotFrozen, _Checked, int])
def test_classes_the_trick_does_not_fit_are_refused(cls: type) -> None:
    with pytest.raises(TypeError):
        frozen_builder(cls)
