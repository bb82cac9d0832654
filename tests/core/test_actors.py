"""The stored actor and cause texts, pinned: existing rows and readers depend on every byte."""

from __future__ import annotations

import uuid

import pytest

from backwave_django.core import actors
from backwave_django.core.states import JobState


class _User:
    def get_username(self) -> str:
        return "alice"


def test_the_constant_actors_and_causes_keep_their_words() -> None:
    assert actors.ENQUEUE == "enqueue"
    assert actors.LEASE_EXPIRY == "lease-expiry"
    assert actors.SETTINGS == "settings"
    assert actors.OPERATOR_CANCEL == "operator-cancel"


def test_the_built_actors_keep_their_words() -> None:
    parent = uuid.UUID("01890000-0000-7000-8000-000000000001")
    assert actors.admin_user(_User()) == "alice"
    assert actors.cli_user("bob") == "cli:bob"
    assert actors.worker("host-1:4242:ab12") == "host-1:4242:ab12"
    assert actors.schedule("nightly") == "schedule:nightly"
    assert actors.cascade(parent) == "cascade:01890000-0000-7000-8000-000000000001"


@pytest.mark.parametrize(
    ("state", "cause"),
    [
        (JobState.DEAD_LETTERED, "parent-failure:DeadLettered"),
        (JobState.QUARANTINED, "parent-failure:Quarantined"),
        (JobState.CANCELLED, "parent-failure:Cancelled"),
    ],
)
def test_a_parent_failure_names_the_parents_state(state: JobState, cause: str) -> None:
    assert actors.parent_failure(state) == cause


def test_the_built_causes_keep_their_words() -> None:
    assert actors.cancelled_by("cli:bob") == "cli:bob"
    assert actors.lease_expired(12) == "Lease expired on attempt 12 (attempt ceiling reached)."
    assert actors.no_handler("gone") == "no handler registered for wire name 'gone'"
    assert (
        actors.no_longer_decodes("test.echo", ValueError("missing a required argument: 'x'"))
        == "payload for wire name 'test.echo' no longer decodes: missing a required argument: 'x'"
    )


def test_a_purge_summary_counts_each_state_class() -> None:
    summary = actors.purge_summary(5, {"succeeded": 3, "failed": 2, "cancelled": 0})
    assert summary == "5 jobs (succeeded 3, failed 2, cancelled 0)"
