"""Reading and asserting on the jobs in the store, for tests: what the harness offers besides time.

:class:`JobAssertions` is the part of :class:`~backwave_django.testing.BackWaveHarness` that only
reads: snapshots of jobs and assertions whose failure messages list what the store holds.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from ..core.states import JobState
from ..core.tags import Tag, normalize_tags
from ..registry import JobDefinition, get
from .snapshots import JobSnapshot, read_jobs

#: How many jobs an assertion message lists before it says "and N more".
LISTED_JOBS = 20


class JobAssertions:
    """Snapshots of jobs and assertions about them (read-only; no clock involved)."""

    # --- Reading jobs ---------------------------------------------------------------------------

    def job(self, job_id: uuid.UUID) -> JobSnapshot:
        """A snapshot of one job; ``LookupError`` if it does not exist (or was purged)."""
        if not isinstance(job_id, uuid.UUID):
            raise TypeError(f"job_id must be a uuid.UUID (receipt.job_id), got {job_id!r}")
        found = read_jobs(job_id=job_id)
        if not found:
            raise LookupError(f"no job {job_id} in the store (never enqueued, rolled back, or purged)")
        return found[0]

    def jobs(
        self,
        job: JobDefinition[Any, Any] | str | None = None,
        *,
        state: JobState | None = None,
        queue: str | None = None,
        schedule_id: str | None = None,
    ) -> list[JobSnapshot]:
        """Snapshots of the jobs matching every filter given, in enqueue order."""
        return read_jobs(
            wire_name=None if job is None else wire_name_of(job),
            states=None if state is None else (JobState(state),),
            queue=queue,
            schedule_id=schedule_id,
        )

    # --- Assertions -----------------------------------------------------------------------------

    def assert_enqueued(
        self,
        job: JobDefinition[Any, Any] | str,
        *,
        args: Sequence[Any] | None = None,
        kwargs: Mapping[str, Any] | None = None,
        count: int | None = None,
        state: JobState | None = None,
        queue: str | None = None,
        tags: Sequence[Tag] | None = None,
    ) -> list[JobSnapshot]:
        """Assert that jobs of this type exist, matching what is given; returns the matches.

        ``args`` and ``kwargs`` must equal the call's exactly; ``tags`` must all be present.
        Without ``count`` at least one must match, with it exactly that many. Jobs are matched in
        any state unless ``state`` is given. The failure message lists every job in the store.
        """
        wire_name = wire_name_of(job)
        if count is not None and (isinstance(count, bool) or not isinstance(count, int) or count < 0):
            raise ValueError(f"count must be an int >= 0, got {count!r}")
        wanted_tags = set(normalize_tags(tags or ()))
        candidates = self.jobs(wire_name, state=state, queue=queue)
        matches = [
            j
            for j in candidates
            if (args is None or j.args == list(args))
            and (kwargs is None or j.kwargs == dict(kwargs))
            and wanted_tags <= set(normalize_tags(j.tags))
        ]
        if (count is None and matches) or (count is not None and len(matches) == count):
            return matches
        criteria = [f"{wire_name!r}"]
        for name, value in (("args", args), ("kwargs", kwargs), ("queue", queue), ("tags", tags)):
            if value is not None:
                criteria.append(f"{name}={_plain(value)!r}")
        if state is not None:
            criteria.append(f"state={JobState(state).label}")
        expected = "at least 1" if count is None else f"exactly {count}"
        raise AssertionError(
            f"expected {expected} job(s) matching {', '.join(criteria)}; found {len(matches)}.\n"
            + listing(read_jobs(), empty="The store holds no jobs at all.")
        )

    def assert_no_jobs(
        self, job: JobDefinition[Any, Any] | str | None = None, *, state: JobState | None = None
    ) -> None:
        """Assert that no job (of this type, in this state) exists; the message lists those that do."""
        found = self.jobs(job, state=state)
        if found:
            what = "jobs" if job is None else f"{wire_name_of(job)!r} jobs"
            if state is not None:
                what += f" in state {JobState(state).label}"
            raise AssertionError(f"expected no {what}; found {len(found)}.\n" + listing(found))


def definition_of(job: JobDefinition[Any, Any] | str) -> JobDefinition[Any, Any]:
    if isinstance(job, JobDefinition):
        return job
    definition = get(wire_name_of(job))
    if definition is None:
        raise LookupError(f"no job is registered with wire name {job!r}; is its app's jobs.py imported?")
    return definition


def wire_name_of(job: object) -> str:
    if isinstance(job, JobDefinition):
        return job.wire_name
    if isinstance(job, str) and job:
        return job
    raise TypeError(f"expected a job (what @job returns) or its wire name, got {job!r}")


def _plain(value: Any) -> Any:
    if isinstance(value, tuple):
        return list(value)
    if isinstance(value, Mapping):
        return dict(value)
    return value


def listing(jobs: Sequence[JobSnapshot], *, empty: str = "(none)") -> str:
    if not jobs:
        return empty
    lines = [f"Jobs in the store ({len(jobs)}):"]
    lines += [f"  - {j.describe()}" for j in jobs[:LISTED_JOBS]]
    if len(jobs) > LISTED_JOBS:
        lines.append(f"  … and {len(jobs) - LISTED_JOBS} more")
    return "\n".join(lines)
