"""What every enqueue path reports for a new job: each job's :class:`Enqueued` entry (its policy
columns are :func:`core.policy.policy_columns`, its first transition's actor ``core.actors.ENQUEUE``).

The PostgreSQL insert statements that use these are in ``store/postgres/enqueue/inserts.py``; the
portable path is ``enqueueing``.
"""

from __future__ import annotations

import uuid
from collections.abc import Collection
from dataclasses import dataclass

from ..core.outcomes import NewJob
from ..core.states import EnqueueResult


@dataclass(frozen=True, slots=True)
class Enqueued:
    """How one job of a batch was judged, and the id that now stands for it: its own, or for a
    ``DUPLICATE`` the job that already exists (the same id, or the unique job it conflicts with)."""

    result: EnqueueResult
    job_id: uuid.UUID



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
