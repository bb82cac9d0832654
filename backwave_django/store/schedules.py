"""Recurring schedules: defining them, minting their ticks exactly once, triggering one now.

Minting plans every schedule with the pure planner (``core/planner.py``) and applies each decision
in its own transaction, only if the schedule's cursor is still the one it was planned from
(compare-and-set). Instance ids are a function of (schedule, tick), so any number of workers
minting at once create each instance exactly once.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from datetime import UTC, datetime

from ..conf import BackWaveSettings, get_settings
from ..core import actors, planner
from ..core.cron import CronExpression
from ..core.limits import PLAIN_LANE, flow_columns
from ..core.outcomes import ScheduleSpec
from ..core.policy import policy_columns
from ..core.states import LIVE_STATES, CatchUp, HistoryPolicy, JobState, OperatorAction, TriggerScheduleResult
from ..core.validation import require_actor, require_aware
from ..database import jobs_database
from ..models import JobRecord, JobTransition, RecurringSchedule
from ._tx import atomic_retrying, audit, notify

logger = logging.getLogger("backwave_django.store")


def upsert_schedule(
    spec: ScheduleSpec, *, now: datetime, declared_in_settings: bool = False, actor: str | None = None
) -> None:
    """Create a schedule, or redefine it in place keeping its cursor and skipped ticks.

    The cron and zone are validated first (``ValueError``, nothing stored). A new schedule's
    cursor starts at ``now``: only ticks strictly after it are ever minted. With an ``actor`` (an
    operator's save) one ``save_schedule`` audit row is written in the same transaction.
    """
    if not isinstance(spec, ScheduleSpec):
        raise TypeError(f"spec must be a ScheduleSpec, got {type(spec).__name__}")
    require_aware("now", now)
    if actor is not None:
        require_actor(actor)
    settings = get_settings()
    cron = resolve_schedule(spec.cron, spec.time_zone)
    if len(spec.wire_name) > settings.max_wire_name_length:
        raise ValueError(
            f"wire name '{spec.wire_name[:40]}…' is {len(spec.wire_name):,} characters; "
            f"MAX_WIRE_NAME_LENGTH is {settings.max_wire_name_length:,}"
        )
    definition = {
        "cron": cron.canonical,
        "wire_name": spec.wire_name,
        "payload": spec.payload,
        "queue": spec.queue,
        "time_zone": spec.time_zone,
        "catch_up": spec.catch_up,
        "no_overlap": spec.no_overlap,
        "declared_in_settings": declared_in_settings,
        "max_attempts": spec.max_attempts,
        "backoff": None if spec.backoff is None else list(spec.backoff),
        "timeout": spec.timeout,
        **flow_columns(spec.partition, spec.limit_keys),
    }
    using = jobs_database()

    def body() -> None:
        RecurringSchedule.objects.using(using).update_or_create(
            schedule_id=spec.schedule_id,
            defaults=definition,  # a redefinition keeps the cursor and the skipped ticks
            create_defaults={**definition, "cursor": now, "skipped_ticks": []},
        )
        if actor is not None:
            audit(using, actor, OperatorAction.SAVE_SCHEDULE, spec.schedule_id, now)

    atomic_retrying(using, body)


def resolve_schedule(cron: str, time_zone: str | None) -> CronExpression:
    """The parsed cron, after checking that it and the zone resolve and that the cron fires at
    some time (``planner.require_schedulable``); ``ValueError`` otherwise."""
    return planner.require_schedulable(cron, time_zone)


def remove_schedule(schedule_id: str, *, actor: str | None = None, now: datetime | None = None) -> bool:
    """Stop a schedule. Instances already minted are untouched and keep their ``schedule_id``.

    Returns whether a schedule was removed. With an ``actor`` (an operator's removal; ``now`` is
    then required) a removal writes one ``remove_schedule`` audit row in the same transaction.
    """
    if actor is not None:
        require_actor(actor)
        if now is None:
            raise ValueError("remove_schedule needs now= when an actor is given (the audit's instant)")
    if now is not None:
        require_aware("now", now)
    using = jobs_database()

    def body() -> bool:
        deleted, _ = RecurringSchedule.objects.using(using).filter(schedule_id=schedule_id).delete()
        if deleted and actor is not None and now is not None:
            audit(using, actor, OperatorAction.REMOVE_SCHEDULE, schedule_id, now)
        return bool(deleted)

    return atomic_retrying(using, body)


def prune_settings_schedules(declared: Iterable[str]) -> list[str]:
    """Remove the settings-declared schedules whose ids are not in ``declared``; returns their ids."""
    stale = (
        RecurringSchedule.objects.using(jobs_database())
        .filter(declared_in_settings=True)
        .exclude(schedule_id__in=list(declared))
    )
    removed = sorted(stale.values_list("schedule_id", flat=True))
    stale.delete()
    return removed


_reported_schedule_errors: set[tuple[str, str, str | None]] = set()


def mint_due(*, now: datetime) -> int:
    """Plan every schedule at ``now`` and apply each decision in its own transaction.

    A decision applies only if the schedule's cursor is still the one it was planned from
    (compare-and-set), and instance ids are a function of (schedule, tick): any number of workers
    minting at once create each instance exactly once. A schedule whose cron or zone no longer
    resolves is skipped. Returns how many jobs were minted.
    """
    require_aware("now", now)
    settings = get_settings()
    using = jobs_database()
    live = set(
        JobRecord.objects.using(using)
        .filter(schedule_id__isnull=False, state__in=LIVE_STATES)
        .values_list("schedule_id", flat=True)
        .distinct()
    )
    snapshots = [
        planner.PlanInput(
            schedule_id=schedule_id,
            cron=cron,
            time_zone=time_zone,
            cursor=cursor,
            catch_up=CatchUp(catch_up),
            no_overlap=no_overlap,
            has_live_instance=schedule_id in live,
        )
        for schedule_id, cron, time_zone, cursor, catch_up, no_overlap in RecurringSchedule.objects.using(
            using
        ).values_list("schedule_id", "cron", "time_zone", "cursor", "catch_up", "no_overlap")
    ]
    for snapshot in snapshots:
        error = planner.schedule_error(snapshot.cron, snapshot.time_zone)
        key = (snapshot.schedule_id, snapshot.cron, snapshot.time_zone)
        if error is not None and key not in _reported_schedule_errors:
            _reported_schedule_errors.add(key)  # logged once per process, skipped every time
            logger.error("Schedule %r is skipped: %s", snapshot.schedule_id, error)
    minted = 0
    for decision in planner.plan_all(snapshots, now):
        minted += atomic_retrying(using, lambda d=decision: _apply_mint(using, d, settings))  # type: ignore[misc]
    return minted


def _apply_mint(using: str, decision: planner.MintDecision, settings: BackWaveSettings) -> int:
    row = (
        RecurringSchedule.objects.using(using)
        .select_for_update()
        .filter(schedule_id=decision.schedule_id, cursor=decision.expected_cursor)
        .values_list("skipped_ticks", flat=True)
        .first()
    )
    if row is None:
        return 0  # another worker applied this decision first, or the schedule was removed
    skipped = [*(row or []), *(t.astimezone(UTC).isoformat() for t in decision.skipped_ticks)]
    RecurringSchedule.objects.using(using).filter(schedule_id=decision.schedule_id).update(
        cursor=decision.new_cursor, skipped_ticks=skipped[-settings.max_recorded_skipped_ticks :]
    )
    actor = actors.schedule(decision.schedule_id)
    return _insert_instances(using, decision.schedule_id, list(decision.ticks), actor, settings)


def _insert_instances(
    using: str,
    schedule_id: str,
    ticks: list[datetime],
    actor: str,
    settings: BackWaveSettings,
    *,
    recorded_at: datetime | None = None,
) -> int:
    """Insert one Scheduled instance per tick (due at the tick); an id already present is skipped.

    Each instance's transition is recorded at its tick, or at ``recorded_at`` when given.
    """
    if not ticks:
        return 0
    wire_name, payload, queue, max_attempts, backoff, timeout, partition, limit_keys, lane = (
        RecurringSchedule.objects.using(using)
        .filter(schedule_id=schedule_id)
        .values_list(
            "wire_name", "payload", "queue", "max_attempts", "backoff", "timeout",
            "partition", "limit_keys", "lane",
        )
        .get()
    )
    policy = policy_columns(max_attempts, backoff, timeout, settings)
    if lane != PLAIN_LANE:  # instances of a schedule under flow control carry its columns
        policy.update(partition=partition, limit_keys=limit_keys, lane=lane)
    ids = {tick: planner.instance_id(schedule_id, tick) for tick in ticks}
    present = set(
        JobRecord.objects.using(using).filter(job_id__in=ids.values()).values_list("job_id", flat=True)
    )
    fresh = [tick for tick in ticks if ids[tick] not in present]
    created = JobRecord.objects.using(using).bulk_create(
        [
            JobRecord(
                job_id=ids[tick],
                wire_name=wire_name,
                queue=queue,
                payload=payload,
                state=JobState.SCHEDULED,
                due_time=tick,
                schedule_id=schedule_id,
                enqueued_at=recorded_at or tick,
                next_ordinal=1,
                **policy,
            )
            for tick in fresh
        ]
    )
    if settings.history is not HistoryPolicy.OFF and created:
        sequences = dict(
            JobRecord.objects.using(using)
            .filter(job_id__in=[ids[t] for t in fresh])
            .values_list("job_id", "sequence")
        )
        JobTransition.objects.using(using).bulk_create(
            [
                JobTransition(
                    job_id=sequences[ids[tick]],
                    ordinal=0,
                    recorded_at=recorded_at or tick,
                    state=JobState.SCHEDULED,
                    attempt=0,
                    actor=actor,
                )
                for tick in fresh
            ]
        )
    if fresh:
        notify(using, queue, due=min(fresh))  # instances minted late are due before their hint
    return len(fresh)


def trigger_schedule(schedule_id: str, *, actor: str, now: datetime) -> TriggerScheduleResult:
    """Mint one instance of the schedule due now, ignoring no-overlap and leaving the cursor.

    The instance id is that of a tick at ``now``, so triggering twice at the same instant (or at
    the exact instant of a tick that is also minted) creates one job. Audited when found.
    """
    require_actor(actor)
    require_aware("now", now)
    settings = get_settings()
    using = jobs_database()

    def body() -> TriggerScheduleResult:
        found = (
            RecurringSchedule.objects.using(using)
            .select_for_update()
            .filter(schedule_id=schedule_id)
            .exists()
        )
        if not found:
            return TriggerScheduleResult.SCHEDULE_NOT_FOUND
        _insert_instances(using, schedule_id, [now], actor, settings, recorded_at=now)
        audit(using, actor, OperatorAction.TRIGGER_SCHEDULE, schedule_id, now)
        return TriggerScheduleResult.TRIGGERED

    return atomic_retrying(using, body)
