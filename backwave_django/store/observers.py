"""Transition observers: numbering the log, claiming deliveries, reporting them, reading lag.

**Numbering** (:func:`sequence_log`). Entries are written with a null ``position``. The sequencer
(one at a time: it locks the ``LogSequencer`` row) numbers entries whose transaction has ended,
in commit-safe order, and only it hands out positions, each higher than every earlier one. So a
transaction that commits later than an entry was numbered always gets higher positions: a cursor
that passed position P can never skip an entry that shows up afterwards with a lower one.

* PostgreSQL: each entry records its transaction's id (``tx_id``, a column default). Every
  transaction whose id is below the current snapshot's ``xmin`` has ended, so its entries are all
  visible; the sequencer numbers entries with ``horizon <= tx_id < xmin`` in (tx_id, id) order,
  found through a BRIN index on ``tx_id``, then moves the horizon up. Entries of transactions
  still open (or behind one still open) wait for the next round.
* Elsewhere: every visible entry with a null position is committed; the sequencer numbers them in
  id order, found through the position index (whose NULL entries are exactly the unnumbered).

**Delivery** follows the store protocol of docs/observers.md: a claim walks the numbered entries
after the observer's cursor, skipping those that do not match its subscription, stopping at a
pending delivery whose retry is not due yet (head of line) or at ``max_rows``; a report marks
deliveries and advances the cursor over the contiguous prefix of entries that are settled.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta
from typing import Any

from django.db import connections
from django.db.models import Q

from ..core.observing import (
    Delivery,
    ObserverClaim,
    ObserverDeadLetterEntry,
    ObserverDisposition,
    ObserverLag,
    TransitionEvent,
    require_states,
)
from ..core.states import JobState
from ..core.validation import (
    require_aware,
    require_count,
    require_positive_duration,
    require_str,
    require_worker_id,
    validate_queue_name,
)
from ..database import jobs_database
from ..models import (
    JobTransition,
    LogSequencer,
    Observer,
    ObserverDeadLetter,
    ObserverDelivery,
)
from ._schema import TRANSITIONS
from ._tx import atomic_retrying

#: At most this many entries are numbered per sequencer round.
SEQUENCE_BATCH = 5_000

#: Number the entries of ended transactions (PostgreSQL): see the module docstring.
NUMBER_ENTRIES = f"""
WITH todo AS (
    SELECT id, tx_id FROM {TRANSITIONS}
    WHERE position IS NULL AND tx_id >= %(horizon)s
      AND tx_id < pg_snapshot_xmin(pg_current_snapshot())::text::bigint
    ORDER BY tx_id, id
    LIMIT %(batch)s
), numbered AS (
    SELECT id, tx_id, %(last)s + row_number() OVER (ORDER BY tx_id, id) AS position FROM todo
)
UPDATE {TRANSITIONS} AS t SET position = n.position
FROM numbered AS n
WHERE t.id = n.id
RETURNING n.position, n.tx_id
"""
#: The horizon below which every transaction has ended.
SNAPSHOT_XMIN = "SELECT pg_snapshot_xmin(pg_current_snapshot())::text::bigint"

_EVENT_FIELDS = (
    "position",
    "job__job_id",
    "ordinal",
    "job__wire_name",
    "job__queue",
    "state",
    "attempt",
    "recorded_at",
    "failure_detail",
    "actor",
)


# --- Numbering the log -----------------------------------------------------------------------------


def sequence_log(*, max_rows: int = SEQUENCE_BATCH) -> int:
    """Number up to ``max_rows`` log entries whose transactions have ended; returns how many.

    Returns 0 at once when another process is numbering (its lock is held).
    """
    require_count("max_rows", max_rows)
    using = jobs_database()

    def body() -> int:
        LogSequencer.objects.using(using).get_or_create(pk=1)
        state = LogSequencer.objects.using(using).select_for_update(skip_locked=True).filter(pk=1).first()
        if state is None:
            return 0  # another sequencer holds it
        if connections[using].vendor == "postgresql":
            return _number_by_transaction(using, state, max_rows)
        return _number_in_id_order(using, state, max_rows)

    return atomic_retrying(using, body)


def _number_by_transaction(using: str, state: LogSequencer, max_rows: int) -> int:
    with connections[using].cursor() as cursor:
        cursor.execute(SNAPSHOT_XMIN)
        row = cursor.fetchone()
        assert row is not None
        xmin = int(row[0])
        cursor.execute(
            NUMBER_ENTRIES, {"horizon": state.horizon, "batch": max_rows, "last": state.last_position}
        )
        numbered = cursor.fetchall()
    if numbered:
        state.last_position = max(position for position, _ in numbered)
    # All entries below xmin are numbered unless the batch was full: then the last transaction
    # numbered may have more, and the horizon stays at it.
    state.horizon = max(tx for _, tx in numbered) if len(numbered) >= max_rows else max(xmin, state.horizon)
    state.save(using=using, update_fields=["last_position", "horizon"])
    return len(numbered)


def _number_in_id_order(using: str, state: LogSequencer, max_rows: int) -> int:
    entries = list(
        JobTransition.objects.using(using).filter(position__isnull=True).order_by("id").only("id")[:max_rows]
    )
    for offset, entry in enumerate(entries, start=1):
        entry.position = state.last_position + offset
    if entries:
        JobTransition.objects.using(using).bulk_update(entries, ["position"], batch_size=500)
        state.last_position += len(entries)
        state.save(using=using, update_fields=["last_position"])
    return len(entries)


# --- Claiming and reporting deliveries ----------------------------------------------------------


def claim_observer_deliveries(
    observer_id: str,
    *,
    states: Iterable[JobState],
    wire_name: str | None,
    queue: str | None,
    worker_id: str,
    max_rows: int,
    lease_duration: timedelta,
    now: datetime,
) -> ObserverClaim:
    """Claim the next deliveries of ``observer_id`` for ``worker_id`` (see the module docstring).

    Saves the subscription on the observer's row. Another worker's live lease → not acquired,
    nothing claimed; the same worker may claim again. Each claimed delivery starts an attempt.
    """
    require_str("observer_id", observer_id)
    subscription = require_states(states)
    if wire_name is not None:
        require_str("wire_name", wire_name)
    if queue is not None:
        validate_queue_name(queue)
    require_worker_id(worker_id)
    require_count("max_rows", max_rows)
    require_positive_duration("lease_duration", lease_duration)
    require_aware("now", now)
    using = jobs_database()

    def body() -> ObserverClaim:
        Observer.objects.using(using).get_or_create(observer_id=observer_id)
        observer = Observer.objects.using(using).select_for_update().get(observer_id=observer_id)
        observer.states = [int(s) for s in subscription]
        observer.wire_name, observer.queue = wire_name, queue
        held = observer.lease_owner not in (None, worker_id)
        if held and observer.lease_expiry is not None and observer.lease_expiry > now:
            observer.save(using=using, update_fields=["states", "wire_name", "queue"])
            return ObserverClaim(False, ())
        if not subscription:  # nothing matches: no lease, no change
            observer.save(using=using, update_fields=["states", "wire_name", "queue"])
            return ObserverClaim(False, ())
        _sweep(using, observer, now)
        claimed = _collect(using, observer, max_rows, now) if max_rows else []
        if claimed:
            observer.lease_owner, observer.lease_expiry = worker_id, now + lease_duration
        observer.save(using=using)
        return ObserverClaim(bool(claimed), tuple(claimed))

    return atomic_retrying(using, body)


def report_observer_deliveries(
    observer_id: str,
    *,
    worker_id: str,
    outcomes: Sequence[tuple[int, ObserverDisposition, datetime | None]],
    now: datetime,
) -> bool:
    """Record how deliveries ended and advance the cursor over the settled prefix.

    ``outcomes`` holds ``(position, disposition, next_attempt_at)``: ``DELIVERED``,
    ``DEAD_LETTERED``, or ``RETRY`` at ``next_attempt_at`` (a ``RETRY`` without an instant means
    the delivery was not attempted: its attempt is given back and it is due at once). A no-op for
    an unknown observer or a worker that does not hold a live lease; returns whether it applied.
    The lease is not released.
    """
    require_str("observer_id", observer_id)
    require_worker_id(worker_id)
    require_aware("now", now)
    for index, (_, disposition, at) in enumerate(outcomes):
        if not isinstance(disposition, ObserverDisposition):
            raise TypeError(f"outcomes[{index}] must name an ObserverDisposition, got {disposition!r}")
        if at is not None:
            require_aware(f"outcomes[{index}] next_attempt_at", at)
    using = jobs_database()

    def body() -> bool:
        observer = Observer.objects.using(using).select_for_update().filter(observer_id=observer_id).first()
        if observer is None or observer.lease_owner != worker_id:
            return False
        if observer.lease_expiry is None or observer.lease_expiry <= now:
            return False
        deliveries = {
            d.position: d
            for d in ObserverDelivery.objects.using(using).filter(
                observer_id=observer_id, position__in=[p for p, _, _ in outcomes]
            )
        }
        for position, disposition, next_attempt_at in outcomes:
            delivery = deliveries.get(position)
            if delivery is None or delivery.resolution != ObserverDelivery.PENDING:
                continue
            if disposition is ObserverDisposition.DELIVERED:
                delivery.resolution = ObserverDelivery.DELIVERED
            elif disposition is ObserverDisposition.DEAD_LETTERED:
                delivery.resolution = ObserverDelivery.DEAD_LETTERED
            elif next_attempt_at is None:  # not attempted: give the attempt back
                delivery.delivery_attempt = max(delivery.delivery_attempt - 1, 0)
                delivery.next_attempt_at = None
            else:
                delivery.next_attempt_at = next_attempt_at
            delivery.save(using=using, update_fields=["resolution", "delivery_attempt", "next_attempt_at"])
        _sweep(using, observer, now)
        observer.save(using=using, update_fields=["cursor"])
        return True

    return atomic_retrying(using, body)


def _matching(observer: Observer) -> Q:
    """The subscription as a filter on transition-log entries."""
    match = Q(state__in=observer.states)
    if observer.wire_name is not None:
        match &= Q(job__wire_name=observer.wire_name)
    if observer.queue is not None:
        match &= Q(job__queue=observer.queue)
    return match


def _sweep(using: str, observer: Observer, now: datetime) -> None:
    """Advance the cursor to just before the first matching entry still pending; settled
    deliveries it passes are removed (dead-lettered ones are recorded first)."""
    observer_id = observer.observer_id
    # Read the highest position first: everything numbered up to it is committed, so the search
    # below (a later snapshot) sees all of it; entries numbered after it lie beyond the cursor.
    last = _last_position(using)
    settled = list(
        ObserverDelivery.objects.using(using)
        .filter(observer_id=observer_id, position__gt=observer.cursor)
        .exclude(resolution=ObserverDelivery.PENDING)
        .order_by("position")
    )
    first_pending = (
        JobTransition.objects.using(using)
        .filter(_matching(observer), position__gt=observer.cursor, position__lte=last)
        .exclude(position__in=[d.position for d in settled])
        .order_by("position")
        .values_list("position", flat=True)
        .first()
    )
    cursor = first_pending - 1 if first_pending is not None else max(observer.cursor, last)
    passed = [d for d in settled if d.position <= cursor]
    dead = [d for d in passed if d.resolution == ObserverDelivery.DEAD_LETTERED]
    if dead:
        entries = {
            position: (job_id, ordinal, state, attempt)
            for position, job_id, ordinal, state, attempt in JobTransition.objects.using(using)
            .filter(position__in=[d.position for d in dead])
            .values_list("position", "job__job_id", "ordinal", "state", "attempt")
        }
        ObserverDeadLetter.objects.using(using).bulk_create(
            [
                ObserverDeadLetter(
                    observer_id=observer_id,
                    position=d.position,
                    job_id=entries[d.position][0],
                    ordinal=entries[d.position][1],
                    state=entries[d.position][2],
                    attempt=entries[d.position][3],
                    delivery_attempts=d.delivery_attempt,
                    dead_lettered_at=now,
                )
                for d in dead
                if d.position in entries  # (an entry purged meanwhile leaves no record)
            ],
            ignore_conflicts=True,
        )
    if passed:
        ObserverDelivery.objects.using(using).filter(pk__in=[d.pk for d in passed]).delete()
    observer.cursor = cursor


def _last_position(using: str) -> int:
    last = LogSequencer.objects.using(using).filter(pk=1).values_list("last_position", flat=True).first()
    return -1 if last is None else int(last)


def _collect(using: str, observer: Observer, max_rows: int, now: datetime) -> list[Delivery]:
    """The matching entries after the cursor to deliver now, each starting an attempt."""
    window = max(max_rows * 2, 64)
    collected: list[tuple[dict[str, Any], ObserverDelivery | None]] = []
    after = observer.cursor
    while len(collected) < max_rows:
        entries = list(
            JobTransition.objects.using(using)
            .filter(_matching(observer), position__gt=after)
            .order_by("position")
            .values(*_EVENT_FIELDS)[:window]
        )
        if not entries:
            break
        deliveries = {
            d.position: d
            for d in ObserverDelivery.objects.using(using).filter(
                observer_id=observer.observer_id, position__in=[e["position"] for e in entries]
            )
        }
        blocked = False
        for entry in entries:
            delivery = deliveries.get(entry["position"])
            if delivery is not None and delivery.resolution != ObserverDelivery.PENDING:
                continue  # settled, not swept yet
            if (
                delivery is not None
                and delivery.next_attempt_at is not None
                and delivery.next_attempt_at > now
            ):
                blocked = True  # the head of the line waits for its retry
                break
            collected.append((entry, delivery))
            if len(collected) == max_rows:
                break
        if blocked or len(entries) < window:
            break
        after = entries[-1]["position"]
    fresh = [
        ObserverDelivery(observer_id=observer.observer_id, position=entry["position"], delivery_attempt=1)
        for entry, delivery in collected
        if delivery is None
    ]
    if fresh:
        ObserverDelivery.objects.using(using).bulk_create(fresh)
    again = [delivery for _, delivery in collected if delivery is not None]
    for delivery in again:
        delivery.delivery_attempt += 1
        delivery.next_attempt_at = None
    if again:
        ObserverDelivery.objects.using(using).bulk_update(again, ["delivery_attempt", "next_attempt_at"])
    attempts = {d.position: d.delivery_attempt for d in fresh + again}
    return [_delivery(entry, attempts[entry["position"]]) for entry, _ in collected]


def _delivery(entry: dict[str, Any], attempt: int) -> Delivery:
    return Delivery(
        position=entry["position"],
        job_id=entry["job__job_id"],
        ordinal=entry["ordinal"],
        wire_name=entry["job__wire_name"],
        queue=entry["job__queue"],
        state=JobState(entry["state"]),
        attempt=entry["attempt"],
        recorded_at=entry["recorded_at"],
        failure_detail=entry["failure_detail"],
        actor=entry["actor"],
        delivery_attempt=attempt,
    )


# --- Reads -------------------------------------------------------------------------------------------


def observer_cursor(observer_id: str) -> int:
    """The last position the observer has passed; -1 when unknown or nothing passed yet."""
    cursor = (
        Observer.objects.using(jobs_database())
        .filter(observer_id=observer_id)
        .values_list("cursor", flat=True)
        .first()
    )
    return -1 if cursor is None else int(cursor)


def observer_lag(
    observer_id: str, *, states: Iterable[JobState], wire_name: str | None = None, queue: str | None = None
) -> ObserverLag:
    """The cursor, how many numbered entries after it match the subscription and are not settled,
    and the time of the oldest of them."""
    using = jobs_database()
    observer = Observer(
        observer_id=observer_id,
        cursor=observer_cursor(observer_id),
        states=[int(s) for s in require_states(states)],
        wire_name=wire_name,
        queue=queue,
    )
    settled = list(
        ObserverDelivery.objects.using(using)
        .filter(observer_id=observer_id, position__gt=observer.cursor)
        .exclude(resolution=ObserverDelivery.PENDING)
        .values_list("position", flat=True)
    )
    pending = (
        JobTransition.objects.using(using)
        .filter(_matching(observer), position__gt=observer.cursor)
        .exclude(position__in=settled)
    )
    oldest = pending.order_by("position").values_list("recorded_at", flat=True).first()
    return ObserverLag(observer.cursor, pending.count(), oldest)


def observer_dead_letters(observer_id: str) -> list[ObserverDeadLetterEntry]:
    """The deliveries the observer gave up on, oldest first."""
    return [
        ObserverDeadLetterEntry(
            position=d.position,
            job_id=d.job_id,
            ordinal=d.ordinal,
            state=JobState(d.state),
            attempt=d.attempt,
            delivery_attempts=d.delivery_attempts,
            dead_lettered_at=d.dead_lettered_at,
        )
        for d in ObserverDeadLetter.objects.using(jobs_database())
        .filter(observer_id=observer_id)
        .order_by("dead_lettered_at", "position")
    ]


def transition_event(job_id: uuid.UUID, ordinal: int) -> TransitionEvent | None:
    """One entry as an observer would receive it (numbered or not), or None."""
    entry = (
        JobTransition.objects.using(jobs_database())
        .filter(job__job_id=job_id, ordinal=ordinal)
        .values(*_EVENT_FIELDS)
        .first()
    )
    if entry is None:
        return None
    return TransitionEvent(
        position=-1 if entry["position"] is None else entry["position"],
        job_id=entry["job__job_id"],
        ordinal=entry["ordinal"],
        wire_name=entry["job__wire_name"],
        queue=entry["job__queue"],
        state=JobState(entry["state"]),
        attempt=entry["attempt"],
        recorded_at=entry["recorded_at"],
        failure_detail=entry["failure_detail"],
        actor=entry["actor"],
    )
