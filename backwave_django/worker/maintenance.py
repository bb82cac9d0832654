"""What a worker does when it starts and on every maintenance tick, with ``now`` passed in.

The worker's pump calls these on the real clock; the test harness (``backwave_django.testing``)
calls them on its virtual clock. One implementation, so a test sees exactly what a worker does.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import partial
from typing import Any

from .. import store
from ..conf import BackWaveSettings
from ..core import actors
from ..core.liveness import stale_after
from ..core.outcomes import ScheduleSpec
from ..core.policy import DEFAULT_POLICY
from ..core.states import CatchUp, TerminalStateClass
from ..database import jobs_database
from ..models import QueueSettings
from ..registry import get

logger = logging.getLogger("backwave_django.worker")

#: Expiry sweeps and purges repeat while they come back full, up to this many batches per tick.
MAX_MAINTENANCE_BATCHES = 20
#: ``store.expire_leases``'s batch size: a sweep that returns this many may have left more.
EXPIRY_BATCH = 32


@dataclass(frozen=True, slots=True)
class TickResult:
    """What one maintenance tick did."""

    #: Expired leases whose job was Scheduled again for another attempt.
    redelivered: int
    #: Expired leases on a job's last attempt: Dead-Lettered.
    dead_lettered: int
    minted: int
    purged: int

    @property
    def reclaimed(self) -> int:
        """Expired leases disposed, either way."""
        return self.redelivered + self.dead_lettered


def apply_queue_settings(settings: BackWaveSettings, *, now: datetime) -> None:
    """``BACKWAVE["QUEUES"]`` limits win over the admin's; applied (and audited) where they differ."""
    using = jobs_database()
    for queue_name, options in settings.queues.items():
        if "concurrency_limit" not in options:
            continue
        limit = options["concurrency_limit"]
        current = (
            QueueSettings.objects.using(using)
            .filter(queue=queue_name)
            .values_list("concurrency_limit", flat=True)
        )
        if list(current) != [limit]:
            store.set_concurrency_limit(queue_name, limit, actor=actors.SETTINGS, now=now)


def sync_schedules(settings: BackWaveSettings, *, now: datetime) -> list[str]:
    """Upsert ``BACKWAVE["SCHEDULES"]`` (cursors kept); with ``PRUNE_SCHEDULES``, remove the
    settings-declared schedules no longer declared. Returns the removed schedule ids."""
    for schedule_id, options in settings.schedules.items():
        spec = settings_schedule_spec(schedule_id, options)
        store.upsert_schedule(spec, now=now, declared_in_settings=True)
    if settings.prune_schedules:
        return store.prune_settings_schedules(settings.schedules)
    return []


def settings_schedule_spec(schedule_id: str, options: Mapping[str, Any]) -> ScheduleSpec:
    """The :class:`ScheduleSpec` of one ``BACKWAVE["SCHEDULES"]`` entry (validated by the checks).

    The queue defaults to the job's own queue, or ``default`` when the job is not registered here;
    the instances' policy (ceiling, backoff, time limit) is the job's own, as for an enqueue.
    """
    definition = get(options["job"])
    policy = definition.policy if definition else DEFAULT_POLICY
    payload = {"args": list(options.get("args", [])), "kwargs": dict(options.get("kwargs", {}))}
    return ScheduleSpec(
        schedule_id=schedule_id,
        cron=options["cron"],
        wire_name=options["job"],
        payload=payload,
        queue=options.get("queue") or policy.queue,
        time_zone=options.get("time_zone"),
        catch_up=CatchUp[str(options.get("catch_up", "skip")).upper()],
        no_overlap=bool(options.get("no_overlap", False)),
        max_attempts=policy.max_attempts,
        backoff=policy.backoff,
        timeout=policy.timeout,
        **(definition.schedule_flow(payload) if definition else {}),
    )


def maintenance_tick(
    settings: BackWaveSettings,
    *,
    queues: Sequence[str],
    now: datetime,
    retention: bool = True,
    max_batches: int | None = MAX_MAINTENANCE_BATCHES,
) -> TickResult:
    """Sweep expired leases of ``queues``, mint due schedule ticks, purge by retention.

    Sweeps and purges repeat while they come back full, at most ``max_batches`` times each
    (``None``: until done), so one tick of a worker never runs for long.
    """
    swept: list[store.ExpiredLeases] = []

    def sweep() -> int:
        swept.append(store.sweep_expired_leases(now=now, queues=list(queues), retry=settings.retry))
        return swept[-1].disposed

    _repeat(sweep, full=EXPIRY_BATCH, max_batches=max_batches)
    minted = store.mint_due(now=now)
    purged = 0
    if retention:
        keeps = (
            (TerminalStateClass.SUCCEEDED_OR_CANCELLED, settings.retention_succeeded_or_cancelled),
            (
                TerminalStateClass.DEAD_LETTERED_OR_QUARANTINED,
                settings.retention_dead_lettered_or_quarantined,
            ),
        )
        for state_class, keep in keeps:
            if keep is None:
                continue
            purge = partial(store.purge_terminal, state_class, terminal_before=now - keep)
            purged += _repeat(purge, full=settings.max_purge_batch, max_batches=max_batches)
    return TickResult(
        redelivered=sum(batch.redelivered for batch in swept),
        dead_lettered=sum(batch.dead_lettered for batch in swept),
        minted=minted,
        purged=purged,
    )


def _repeat(batch: Callable[[], int], *, full: int, max_batches: int | None) -> int:
    total = 0
    done = 0
    while max_batches is None or done < max_batches:
        count = batch()
        total += count
        done += 1
        if count < full:
            break
    return total


def run_maintenance(
    settings: BackWaveSettings, *, worker_id: str, queues: Sequence[str], now: datetime
) -> bool:
    """A worker's maintenance pass: :func:`maintenance_tick`, then prune stale worker rows.
    Returns whether schedules minted jobs (the worker then claims at once)."""
    tick = maintenance_tick(settings, queues=queues, now=now)
    if tick.reclaimed:
        logger.info(
            "Worker %s swept %d expired lease(s): %d Scheduled again for redelivery, "
            "%d Dead-Lettered (the lease expired on the last attempt)",
            worker_id,
            tick.reclaimed,
            tick.redelivered,
            tick.dead_lettered,
        )
    if tick.minted:
        logger.debug("Minted %d scheduled job(s)", tick.minted)
    stale = stale_after(settings.heartbeat_interval)
    store.prune_workers(seen_before=now - max(stale, timedelta(minutes=1)))
    return bool(tick.minted)
