"""Which queues are real: the one answer to "does anything use this queue?".

A queue is *in use* when a declared job (``@job(queue=...)``), a schedule (stored, or declared in
``BACKWAVE["SCHEDULES"]``), an entry of ``BACKWAVE["QUEUES"]`` or a stored job names it. A queue
settings row alone does not count: a typo once paused creates exactly such a row. The operator
refuses to pause, resume or limit a queue nothing uses unless asked to create it
(``operator.pause_queue(..., create=True)``), and the console and the CLI ask through it.

Costs: the declared names are the registry, the settings and one read of the (small) schedule
table. Whether stored jobs use a queue is one ``EXISTS``, which on a large table scans only when
no job uses the queue; the close-match suggestions read the distinct queues of the job table, and
are computed only for a refusal.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass

from .. import registry
from ..conf import get_settings
from ..database import jobs_database
from ..models import JobRecord, QueueSettings, RecurringSchedule

#: How alike two names must be to be suggested (``difflib``'s ratio; "biling" ~ "billing" is 0.92).
SUGGESTION_CUTOFF = 0.75


@dataclass(frozen=True)
class QueueUse:
    """What uses one queue: each is a reason the queue is real."""

    queue: str
    #: Wire names of the declared jobs (``@job``) whose queue it is.
    wire_names: tuple[str, ...]
    #: Ids of the schedules (stored or declared in settings) that mint into it.
    schedules: tuple[str, ...]
    #: ``BACKWAVE["QUEUES"]`` configures it.
    in_settings: bool
    #: At least one stored job (in any state) is in it.
    has_jobs: bool

    @property
    def in_use(self) -> bool:
        return bool(self.wire_names or self.schedules or self.in_settings or self.has_jobs)


def declared_queues() -> dict[str, tuple[tuple[str, ...], tuple[str, ...], bool]]:
    """Every queue named in code or settings: queue → (wire names, schedule ids, in ``QUEUES``)."""
    settings = get_settings()
    jobs: dict[str, list[str]] = {}
    for wire_name, definition in registry.definitions().items():
        jobs.setdefault(definition.queue, []).append(wire_name)
    schedules: dict[str, set[str]] = {}
    stored = RecurringSchedule.objects.using(jobs_database()).values_list("queue", "schedule_id")
    for queue, schedule_id in stored:
        schedules.setdefault(queue, set()).add(schedule_id)
    for schedule_id, options in settings.schedules.items():
        declared = registry.get(str(options.get("job")))
        queue = options.get("queue") or (declared.queue if declared else "default")
        schedules.setdefault(str(queue), set()).add(schedule_id)
    names = set(jobs) | set(schedules) | set(settings.queues)
    return {
        name: (
            tuple(sorted(jobs.get(name, ()))),
            tuple(sorted(schedules.get(name, ()))),
            name in settings.queues,
        )
        for name in names
    }


def _has_jobs(queue: str) -> bool:
    return JobRecord.objects.using(jobs_database()).filter(queue=queue).exists()


def queue_use(queue: str) -> QueueUse:
    """Everything that uses ``queue`` (see the module docstring)."""
    wire_names, schedules, in_settings = declared_queues().get(queue, ((), (), False))
    return QueueUse(queue, wire_names, schedules, in_settings, _has_jobs(queue))


def is_queue_in_use(queue: str) -> bool:
    """Whether anything uses ``queue``: the declared names first, the stored jobs only if none does.

    The one rule behind "no declared job, schedule or stored job uses queue …" in the operator,
    the console and the CLI.
    """
    return queue in declared_queues() or _has_jobs(queue)


def queues_in_use() -> list[str]:
    """Every queue something uses, sorted (one scan of the job table for its distinct queues)."""
    stored = JobRecord.objects.using(jobs_database()).order_by().values_list("queue", flat=True).distinct()
    return sorted(set(declared_queues()) | set(stored))


def configured_queues() -> list[str]:
    """The queues with stored settings (paused, or limited, by an operator or by ``QUEUES``), sorted."""
    rows = QueueSettings.objects.using(jobs_database()).order_by("queue")
    return list(rows.values_list("queue", flat=True))


def similar_queues(queue: str, *, limit: int = 3) -> list[str]:
    """The queues in use whose names are closest to ``queue`` (a typo's likely intent), best first."""
    candidates = [name for name in queues_in_use() if name != queue]
    lowered = {name.lower(): name for name in candidates}
    matches = difflib.get_close_matches(queue.lower(), list(lowered), n=limit, cutoff=SUGGESTION_CUTOFF)
    return [lowered[match] for match in matches]
