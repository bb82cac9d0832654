"""What every enqueue path stores and reports for a new job: its policy columns, its first
transition's actor, and each job's :class:`Enqueued` entry.

The PostgreSQL insert statements that use these are in ``store/postgres/enqueue/inserts.py``; the
portable path is ``enqueueing``.
"""

from __future__ import annotations

import uuid
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any

from ..conf import BackWaveSettings
from ..core.outcomes import NewJob
from ..core.states import EnqueueResult

ENQUEUE_ACTOR = "enqueue"


@dataclass(frozen=True, slots=True)
class Enqueued:
    """How one job of a batch was judged, and the id that now stands for it: its own, or for a
    ``DUPLICATE`` the job that already exists (the same id, or the unique job it conflicts with)."""

    result: EnqueueResult
    job_id: uuid.UUID


def stored_policy(
    max_attempts: int | None,
    backoff: Sequence[float] | None,
    timeout: float | None,
    settings: BackWaveSettings,
) -> dict[str, Any]:
    """The policy columns a new job row is stored with: its own values, or the settings' (the
    ceiling from ``RETRY`` and the time limit from ``JOB_TIMEOUT``; a backoff stays None, which
    means the settings' backoff at the time of each decision)."""
    if timeout is None and settings.job_timeout is not None:
        timeout = settings.job_timeout.total_seconds()
    return {
        "max_attempts": settings.retry.max_attempts if max_attempts is None else max_attempts,
        "backoff": None if backoff is None else list(backoff),
        "timeout": timeout,
    }


def enqueued_entries(
    jobs: list[NewJob],
    results: list[EnqueueResult | None],
    first: dict[uuid.UUID, int],
    stored_ids: Collection[uuid.UUID],
) -> list[Enqueued]:
    """Each job's result: as judged, else OK at the first position of an id the insert stored
    (:func:`stored_ids`), else DUPLICATE (an id already stored, or repeated earlier in the batch)."""
    stored = {first[job_id] for job_id in stored_ids}
    ok, duplicate = EnqueueResult.OK, EnqueueResult.DUPLICATE
    return [
        Enqueued(
            result if result is not None else ok if i in stored else duplicate,
            new_job.job_id,
        )
        for i, (new_job, result) in enumerate(zip(jobs, results, strict=True))
    ]
