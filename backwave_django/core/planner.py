"""The schedule mint planner: which ticks of which schedules to mint, and which to skip.

Pure: given each schedule's :class:`PlanInput` and ``now`` it returns :class:`MintDecision` values,
which the store applies with a compare-and-set on the cursor (a stale decision is dropped whole). Together
with :func:`instance_id` (the same tick always gives the same job id) that makes minting
exactly-once across any number of workers.

The rules, per schedule, on each pass:

* the ticks are the successive zoned cron matches strictly after the cursor and at or before
  ``now``, at most :data:`MAX_TICKS_PER_POLL`; the new cursor is the last of them (never ``now``);
* with ``no_overlap`` and a live instance nothing is minted and every tick is skipped;
* otherwise a tick older than :data:`MISSED_TICK_THRESHOLD` (strictly) is *missed*, the rest are
  *fresh*. ``SKIP`` mints the fresh ticks and skips the missed ones; ``COALESCE`` also mints the
  last missed tick as one make-up run;
* then, with ``no_overlap``, only the first tick left to mint is minted (with ``COALESCE`` that is
  the make-up tick) and the rest are skipped.

Because of the per-pass cap, a long outage on a frequent cron is worked off in batches of 32, and
under ``COALESCE`` without ``no_overlap`` each batch mints its own make-up run: "exactly one
make-up" holds only for outages of at most 32 ticks. This is kept on purpose: the cap bounds the
work of one pass, and docs/schedules.md ("Minting, catch-up and overlap") states the behaviour.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TypeAlias

from .cron import CronExpression, next_after, require_fires, resolve_zone
from .states import CatchUp
from .validation import require_aware

#: At most this many ticks are resolved per schedule per pass; the rest wait for the next pass.
MAX_TICKS_PER_POLL = 32
#: A tick more than this old (strictly) when planned is missed; one exactly this old is fresh.
MISSED_TICK_THRESHOLD = timedelta(minutes=1)

#: Namespace of the ids of minted schedule instances (never change it: ids must stay stable).
SCHEDULE_INSTANCE_NAMESPACE = uuid.UUID("3b0e5f62-6d1a-4c39-9a8e-7363686564ff")


def instance_id(schedule_id: str, tick: datetime) -> uuid.UUID:
    """The id of the instance that ``schedule_id`` mints for ``tick``.

    A UUIDv5 over the schedule id and the tick's ISO-8601 UTC form, so a mint of a tick and a
    trigger-now at the same instant produce the same job, which the store inserts only once.
    """
    if not isinstance(schedule_id, str):
        raise TypeError(f"schedule_id must be a str, got {type(schedule_id).__name__}")
    require_aware("tick", tick)
    iso = tick.astimezone(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")
    return uuid.uuid5(SCHEDULE_INSTANCE_NAMESPACE, f"{schedule_id}\x00{iso}")


@dataclass(frozen=True, kw_only=True)
class PlanInput:
    """What the planner needs to know about one schedule row, read at the start of a pass."""

    schedule_id: str
    #: The stored cron text (canonical 6-field form, though any valid form is accepted).
    cron: str
    #: An IANA zone id; ``None`` means UTC.
    time_zone: str | None
    #: Ticks up to and including this instant are already resolved.
    cursor: datetime
    catch_up: CatchUp = CatchUp.SKIP
    no_overlap: bool = False
    #: Whether any instance of this schedule is in a non-terminal state.
    has_live_instance: bool = False


@dataclass(frozen=True, kw_only=True)
class MintDecision:
    """One schedule's resolved ticks: mint ``ticks``, record ``skipped_ticks``, move the cursor.

    The store applies it only where the stored cursor still equals ``expected_cursor``.
    ``ticks`` and ``skipped_ticks`` are strictly increasing and together are exactly the ticks
    resolved this pass; ``new_cursor`` is the last of them.
    """

    schedule_id: str
    expected_cursor: datetime
    new_cursor: datetime
    ticks: tuple[datetime, ...]
    skipped_ticks: tuple[datetime, ...]


#: Resolves a schedule's (cron, zone) to the function from a cursor to the next tick.
NextTick: TypeAlias = Callable[[datetime], datetime | None]


def resolve(cron: str, time_zone: str | None) -> NextTick:
    """Parse ``cron`` and resolve ``time_zone``; raise ``ValueError`` with the monitor's message.

    The message is ``Invalid cron expression '{cron}': …`` or ``Unresolvable time-zone id '{zone}': …``.
    """
    try:
        expression = CronExpression.parse(cron)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"Invalid cron expression '{cron}': {exc}") from None
    if time_zone is not None:
        resolve_zone(time_zone)  # raises ValueError("Unresolvable time-zone id '…': …")

    def next_tick(cursor: datetime) -> datetime | None:
        return next_after(expression, cursor, time_zone)

    return next_tick


def require_schedulable(cron: str, time_zone: str | None) -> CronExpression:
    """What a schedule save checks: ``cron`` and ``time_zone`` resolve (:func:`resolve`'s
    messages) and the cron fires at some time (``'0 0 30 2 *' never fires: February has no
    30th``). Returns the parsed cron. ``store.upsert_schedule``, the console's form and the
    settings' checks all call this, so a definition is refused the same way everywhere."""
    resolve(cron, time_zone)
    return require_fires(cron)


def schedule_error(cron: str, time_zone: str | None) -> str | None:
    """Why a stored schedule cannot be planned (``Invalid cron expression …`` /
    ``Unresolvable time-zone id …`` / ``'…' never fires: …``, for a row stored before saves
    refused such a cron), or None when it resolves and fires. For consoles and logs."""
    try:
        require_schedulable(cron, time_zone)
    except (TypeError, ValueError) as exc:
        return str(exc)
    return None


def next_due(cron: str, time_zone: str | None, cursor: datetime) -> tuple[datetime | None, str | None]:
    """``(next tick, None)``: the first zoned tick strictly after ``cursor`` (None when the cron
    never fires again); or ``(None, why)`` when the cron or zone does not resolve on this host
    (:func:`schedule_error`'s message, a cron that never fires included). The one rule behind
    every "next due" the package shows."""
    error = schedule_error(cron, time_zone)
    if error is not None:
        return None, error
    return resolve(cron, time_zone)(cursor), None


def due_ticks(next_tick: NextTick, cursor: datetime, now: datetime) -> list[datetime]:
    """The ticks strictly after ``cursor`` and at or before ``now``, at most MAX_TICKS_PER_POLL."""
    ticks: list[datetime] = []
    tick = next_tick(cursor)
    while tick is not None and tick <= now and len(ticks) < MAX_TICKS_PER_POLL:
        ticks.append(tick)
        tick = next_tick(tick)
    return ticks


def split_ticks(
    ticks: list[datetime], now: datetime, *, catch_up: CatchUp, no_overlap: bool, has_live_instance: bool
) -> tuple[list[datetime], list[datetime]]:
    """Split resolved ticks into (mint, skip) by the catch-up and no-overlap rules."""
    if no_overlap and has_live_instance:
        return [], list(ticks)
    missed = [t for t in ticks if now - t > MISSED_TICK_THRESHOLD]
    fresh = ticks[len(missed) :]  # ticks are increasing, so the missed ones come first
    if catch_up == CatchUp.COALESCE and missed:
        mint, skip = [missed[-1], *fresh], missed[:-1]
    else:
        mint, skip = fresh, missed
    if no_overlap and len(mint) > 1:
        mint, skip = mint[:1], sorted([*skip, *mint[1:]])
    return mint, skip


def plan(snapshot: PlanInput, now: datetime, next_tick: NextTick | None = None) -> MintDecision | None:
    """The decision for one schedule at ``now``, or ``None`` when no tick is due.

    Raises ``ValueError`` if the schedule's cron or zone does not resolve (see :func:`resolve`);
    :func:`plan_all` skips such a schedule instead. ``next_tick`` lets a caller reuse a resolution.
    """
    require_aware("now", now)
    require_aware("cursor", snapshot.cursor)
    if next_tick is None:
        next_tick = resolve(snapshot.cron, snapshot.time_zone)
    ticks = due_ticks(next_tick, snapshot.cursor, now)
    if not ticks:
        return None
    mint, skip = split_ticks(
        ticks,
        now,
        catch_up=CatchUp(snapshot.catch_up),
        no_overlap=snapshot.no_overlap,
        has_live_instance=snapshot.has_live_instance,
    )
    return MintDecision(
        schedule_id=snapshot.schedule_id,
        expected_cursor=snapshot.cursor,
        new_cursor=ticks[-1],
        ticks=tuple(mint),
        skipped_ticks=tuple(skip),
    )


def plan_all(snapshots: Iterable[PlanInput], now: datetime) -> list[MintDecision]:
    """The decisions for every due schedule, in input order.

    A schedule whose cron or zone does not resolve is skipped silently, so one poisoned row cannot
    stop the others; resolutions are shared per (cron, zone) pair within the pass.
    """
    require_aware("now", now)
    resolved: dict[tuple[str, str | None], NextTick | None] = {}
    decisions: list[MintDecision] = []
    for snapshot in snapshots:
        key = (snapshot.cron, snapshot.time_zone)
        if key not in resolved:
            try:
                resolved[key] = resolve(*key)
            except (TypeError, ValueError):
                resolved[key] = None
        next_tick = resolved[key]
        if next_tick is None:
            continue
        decision = plan(snapshot, now, next_tick)
        if decision is not None:
            decisions.append(decision)
    return decisions
