"""Who acts and why: every actor and cause text the store records, built here and nowhere else.

A transition row names its ``actor``; an audit row names the operator who acted; a terminal job
keeps its ``terminal_cause``. Each such text is built by one named function below, so the words
are spelled once. The texts are stored, and existing rows and readers depend on them: change none
of them (``tests/core/test_actors.py`` pins each one). Nothing reads these texts back apart: a
reader may compare a whole actor with one of the constants here, never take one apart.
"""

from __future__ import annotations

import uuid
from typing import Protocol

from .states import JobState

# --- Actors: who wrote a transition or an audit row ---------------------------------------------

#: The actor of a job's first transition, written when it is enqueued.
ENQUEUE = "enqueue"
#: The actor of a transition written when a lease expired (the worker stopped heartbeating).
LEASE_EXPIRY = "lease-expiry"
#: The actor of an audit row written because ``settings.BACKWAVE`` declares a value.
SETTINGS = "settings"


class _User(Protocol):
    def get_username(self) -> str: ...


def admin_user(user: _User) -> str:
    """An operator acting in the console: their username."""
    return user.get_username()


def cli_user(login: str) -> str:
    """An operator acting through ``manage.py backwave``: ``cli:`` and their login name."""
    return f"cli:{login}"


def worker(worker_id: str) -> str:
    """A worker writing a transition of a job it holds (a claim, an outcome, a release)."""
    return worker_id


def schedule(schedule_id: str) -> str:
    """A recurring schedule minting one of its ticks."""
    return f"schedule:{schedule_id}"


def cascade(parent: uuid.UUID) -> str:
    """A parent's terminal outcome resolving one of its waiting children."""
    return f"cascade:{parent}"


# --- Causes: why a job ended --------------------------------------------------------------------

#: The cause of a job whose handler stopped after it saw an operator's cancel request.
OPERATOR_CANCEL = "operator-cancel"


def cancelled_by(actor: str) -> str:
    """The cause of a job an operator cancelled before it ran: the operator's actor text."""
    return actor


def lease_expired(attempt: int) -> str:
    """The cause of a job dead-lettered because its last allowed attempt's lease expired."""
    return f"Lease expired on attempt {attempt} (attempt ceiling reached)."


def parent_failure(state: JobState) -> str:
    """The cause of a child cancelled because its parent ended in ``state``."""
    return f"parent-failure:{state.pascal}"


def no_handler(wire_name: str) -> str:
    """The cause of a job quarantined because nothing is registered under its wire name."""
    return f"no handler registered for wire name '{wire_name}'"


def no_longer_decodes(wire_name: str, message: object) -> str:
    """The cause of a job quarantined because its stored payload no longer decodes."""
    return f"payload for wire name '{wire_name}' no longer decodes: {message}"


def purge_summary(jobs: int, per_class: dict[str, int]) -> str:
    """The audit text of a purge: how many jobs it deleted, and how many of each state class."""
    parts = ", ".join(f"{name} {count}" for name, count in per_class.items())
    return f"{jobs} jobs ({parts})"
