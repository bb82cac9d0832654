"""The two implementations of the store's hot operations, and the choice between them.

Each family of hot operations has one interface here (a :class:`~typing.Protocol`) and two
implementations: the portable ORM path, the reference, beside the contract in ``store/*.py``
(every database), and PostgreSQL's fast path in ``store/postgres/`` (Django's PostgreSQL backend
on psycopg 3, binding on the client). ``store/__init__.py`` puts the two together
(:func:`install`); :func:`store_backend` picks one per database alias, once.
The public store functions validate their arguments, then call the backend; the same suites run
against both (tests/store, on PostgreSQL, through both; see docs/store.md).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Protocol

from ..conf import BackWaveSettings
from ..core.claim_floors import ClaimFloors
from ..core.outcomes import ClaimedJob, NewJob, OutcomeReport
from ..core.states import EnqueueResult, OutcomeResult
from .postgres.connection import uses_postgres_statements

if TYPE_CHECKING:
    from .job_inserts import Enqueued


class Claims(Protocol):
    def claim(
        self,
        using: str,
        served: list[str],
        limit: int,
        *,
        worker_id: str,
        expiry: datetime,
        now: datetime,
        settings: BackWaveSettings,
        floors: ClaimFloors | None = None,
    ) -> list[ClaimedJob]:
        """Lease up to ``limit`` due jobs of the ``served`` queues, queue-major, in one transaction
        (the contract: ``store.claims.claim``)."""
        ...


class Inserts(Protocol):
    def insert(
        self,
        using: str,
        jobs: list[NewJob],
        results: list[EnqueueResult | None],
        now: datetime,
        settings: BackWaveSettings,
        raise_refusals: bool,
    ) -> list[Enqueued]:
        """Store the jobs of a batch not refused yet (``results[i] is None``), in one transaction,
        and judge the rest (duplicate, unknown parent); the contract: ``store.enqueueing.enqueue_batch``."""
        ...


class BatchWriter(Protocol):
    def write(
        self,
        using: str,
        batches: Iterable[tuple[Sequence[NewJob], datetime]],
        stored: list[list[Enqueued]],
        raise_refusals: bool,
    ) -> None:
        """Store each batch in turn (a transaction each, or all in the caller's), appending each
        stored batch's entries to ``stored``; the contract: ``store.batches.enqueue_batches``."""
        ...


class Outcomes(Protocol):
    def report(
        self, using: str, reports: list[OutcomeReport], now: datetime, settings: BackWaveSettings
    ) -> list[OutcomeResult]:
        """Apply a checked batch of outcomes, each under its fence, in one transaction; the
        contract: ``store.outcomes.report_outcomes``."""
        ...


@dataclass(frozen=True, slots=True)
class StoreBackend:
    """One implementation of every hot operation family."""

    name: str
    claims: Claims
    inserts: Inserts
    batches: BatchWriter
    outcomes: Outcomes


#: The two backends, by name: put together once, by ``store/__init__.py`` (:func:`install`), which
#: imports both implementations (the contract modules call the backend and never import store/postgres/).
_INSTALLED: dict[str, StoreBackend] = {}
#: The backend chosen for each database alias (tests may set an entry to force one).
CHOSEN: dict[str, StoreBackend] = {}


def install(*, portable: StoreBackend, postgres: StoreBackend) -> None:
    """Make these the store's backends (``store/__init__.py`` calls it once, at import)."""
    _INSTALLED.update(portable=portable, postgres=postgres)
    CHOSEN.clear()


def portable_backend() -> StoreBackend:
    """The portable ORM path, on any database."""
    return _INSTALLED["portable"]


def store_backend(using: str) -> StoreBackend:
    """The backend of the database ``using``: PostgreSQL's when its statements apply
    (``store.postgres.connection.uses_postgres_statements``), the portable one otherwise. Chosen
    at the first call for an alias and kept: what decides it (the alias's settings and the driver)
    does not change while the process runs."""
    backend = CHOSEN.get(using)
    if backend is None:
        kind = "postgres" if uses_postgres_statements(using) else "portable"
        backend = CHOSEN[using] = _INSTALLED[kind]
    return backend
