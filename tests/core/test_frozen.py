"""``core.frozen``: a frozen dataclass built through a plain twin (``frozen_builder``), or copied
without its checks (``copy_unchecked``), is the same value as one its class builds."""

from __future__ import annotations

import dataclasses
import pickle
import uuid
from datetime import UTC, datetime
from typing import Any

import pytest

from backwave_django.core.frozen import copy_unchecked, frozen_builder, uuid_unchecked
from backwave_django.core.outcomes import ClaimedJob, NewJob

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


# --- copy_unchecked ---------------------------------------------------------------------------

_JOB = NewJob(
    job_id=uuid.UUID(int=1),
    wire_name="reports.build",
    payload={"args": [1], "kwargs": {}},
    due_time=NOW,
    tags=("vip", ("tenant", "acme")),
    max_attempts=3,
    backoff=(1, 2),
)


def test_a_copy_equals_the_same_job_built_in_full_and_leaves_the_original_alone() -> None:
    payload = {"args": [2], "kwargs": {}}
    copy = copy_unchecked(
        _JOB, job_id=uuid.UUID(int=2), payload=payload, _payload_json=b'{"args":[2],"kwargs":{}}'
    )
    built = dataclasses.replace(_JOB, job_id=uuid.UUID(int=2), payload=payload)
    assert type(copy) is NewJob
    assert copy == built
    assert repr(copy) == repr(built)
    assert (copy.payload_json, copy.tag_pairs) == (built.payload_json, built.tag_pairs)
    assert (_JOB.job_id, _JOB.payload, _JOB.payload_json) == (
        uuid.UUID(int=1),
        {"args": [1], "kwargs": {}},
        b'{"args":[1],"kwargs":{}}',
    )
    with pytest.raises(dataclasses.FrozenInstanceError):
        copy.queue = "other"  # type: ignore[misc]


def test_a_copy_checks_nothing_it_is_given() -> None:
    """What makes it fast: the caller checks (``client.JobWithOptions`` checks every option once)."""
    assert copy_unchecked(_JOB, priority=500).priority == 500
    with pytest.raises(ValueError, match="priority must be from -100 to 100"):
        dataclasses.replace(_JOB, priority=500)


# --- uuid_unchecked ---------------------------------------------------------------------------


def test_an_unchecked_uuid_is_the_uuid_its_constructor_makes() -> None:
    value = uuid.uuid4().int
    made, built = uuid_unchecked(value), uuid.UUID(int=value)
    assert type(made) is uuid.UUID
    assert (made, hash(made), str(made), made.version, made.is_safe) == (
        built,
        hash(built),
        str(built),
        4,
        uuid.SafeUUID.unknown,
    )
    assert pickle.loads(pickle.dumps(made)) == built
