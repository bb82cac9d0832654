"""A job's policy: its queue, attempt ceiling, backoff, time limit and priority.

A ``@job`` declares one (:class:`JobPolicy`), ``.using(...)`` overrides parts of it for one set of
enqueues, and the store writes it on each row. :func:`resolve_policy` is the one place where
declared values and overrides meet and are checked; :func:`policy_columns` is the one place where
what is left unset becomes the settings' value on the row (docs/jobs.md, "Controlling retries").
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Protocol

from .frozen import frozen_builder
from .retry import RetryPolicy, require_backoff_list, require_max_attempts
from .unique import require_priority
from .validation import require_timeout, validate_queue_name

__all__ = ["DEFAULT_POLICY", "JobPolicy", "PolicyDefaults", "policy_columns", "resolve_policy"]


class PolicyDefaults(Protocol):
    """The settings a row's unset policy falls back to (``conf.BackWaveSettings`` has them)."""

    @property
    def retry(self) -> RetryPolicy: ...

    @property
    def job_timeout(self) -> timedelta | None: ...


@dataclass(frozen=True, slots=True)
class JobPolicy:
    """How a job runs and retries, in its stored form (seconds, tuples). None: the settings' at
    enqueue (``RETRY["MAX_ATTEMPTS"]``, ``JOB_TIMEOUT``), or for ``backoff`` the settings'
    ``RETRY["BACKOFF"]`` at each retry decision. Made by :func:`resolve_policy`, which checks it."""

    queue: str = "default"
    max_attempts: int | None = None
    backoff: tuple[float, ...] | None = None
    timeout: float | None = None
    #: Claim order within the queue: higher first (-100…100).
    priority: int = 0


#: Builds a checked :class:`JobPolicy` from its fields in order, without a frozen ``__init__``'s
#: cost (``core.frozen.frozen_builder``): every ``NewJob`` and every ``.using(...)`` with an
#: override resolves one.
_build_policy = frozen_builder(JobPolicy)

#: The policy of a job that declares nothing: the ``default`` queue, the settings' retries and
#: time limit, priority 0.
DEFAULT_POLICY = JobPolicy()


def resolve_policy(
    declared: JobPolicy = DEFAULT_POLICY,
    *,
    queue: str | None = None,
    max_attempts: int | None = None,
    backoff: Sequence[float | timedelta] | None = None,
    timeout: timedelta | float | None = None,
    priority: int | None = None,
) -> JobPolicy:
    """``declared`` with each value given here in its place (None keeps the declared one), each
    checked and put in its stored form: a ``timeout`` or backoff entry given as a ``timedelta``
    becomes seconds. Raises ``TypeError`` or ``ValueError`` naming the first bad value."""
    if queue is None and max_attempts is None and backoff is None and timeout is None and priority is None:
        return declared
    return _build_policy(
        declared.queue if queue is None else validate_queue_name(queue),
        declared.max_attempts if max_attempts is None else require_max_attempts(max_attempts),
        declared.backoff if backoff is None else tuple(require_backoff_list(backoff)),
        declared.timeout if timeout is None else require_timeout(timeout),
        declared.priority if priority is None else require_priority(priority),
    )


def policy_columns(
    max_attempts: int | None,
    backoff: Sequence[float] | None,
    timeout: float | None,
    settings: PolicyDefaults,
) -> dict[str, Any]:
    """The policy columns a new job row is stored with (``max_attempts``, ``backoff``,
    ``timeout``): the job's own values, else the settings' (the ceiling from ``RETRY``, the time
    limit from ``JOB_TIMEOUT``). A backoff left unset stays None on the row: the settings'
    backoff at the time of each decision."""
    if timeout is None and settings.job_timeout is not None:
        timeout = settings.job_timeout.total_seconds()
    return {
        "max_attempts": settings.retry.max_attempts if max_attempts is None else max_attempts,
        "backoff": None if backoff is None else list(backoff),
        "timeout": timeout,
    }
