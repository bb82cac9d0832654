"""Transition observers: numbering the log, claiming deliveries, reporting them.

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

**Reading** an observer's cursor, lag and dead letters is the monitor's (``monitor/observers.py``),
through the same subscription filter (``Observer.matching_entries``) and event fields
(``core.observing.EVENT_FIELDS``), so a read matches what a claim does.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta
from typing import Any

from django.db import connections

from ..core.observing import (
    EVENT_FIELDS,
    Delivery,
    ObserverClaim,
    ObserverDisposition,
    event_values,
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

#: Number the entries of ended transactions (PostgreSQL): see the module docstring. Answers the
#: horizon it used, how many it numbered, and the highest position and transaction id among them.
NUMBER_ENTRIES = f"""
WITH horizon AS (
    SELECT pg_snapshot_xmin(pg_current_snapshot())::text::bigint AS xmin
), todo AS (
    SELECT id, tx_id FROM {TRANSITIONS}
    WHERE position IS NULL AND tx_id >= %(horizon)s AND tx_id < (SELECT xmin FROM horizon)
    ORDER BY tx_id, id
    LIMIT %(batch)s
), numbered AS (
    SELECT id, tx_id, %(last)s + row_number() OVER (ORDER BY tx_id, id) AS position FROM todo
), written AS (
    UPDATE {TRANSITIONS} AS t SET position = n.position
    FROM numbered AS n
    WHERE t.id = n.id
    RETURNING n.position, n.tx_id
)
SELECT (SELECT xmin FROM horizon), count(*), max(position), max(tx_id) FROM written
"""

# --- Numbering the log -----------------------------------------------------------------------------


def sequence_log(*, max_rows: int = SEQUENCE_BATCH) -> int:
    """Number up to ``max_rows`` log entries whose transactions have ended; returns how many.

    Returns 0 at once when another process is numbering (its lock is held).
    """
    require_count("max_rows", max_rows)
    using = jobs_database()

    def body() -> int:
        sequencer = LogSequencer.objects.using(using)
        state = sequencer.select_for_update(skip_locked=True).filter(pk=1).first()
        if state is None:
            if sequencer.filter(pk=1).exists():
                return 0  # another sequencer holds it
            sequencer.get_or_create(pk=1)  # the first round ever
            state = sequencer.select_for_update(skip_locked=True).filter(pk=1).first()
            if state is None:
                return 0
        if connections[using].vendor == "postgresql":
            return _number_by_transaction(using, state, max_rows)
        return _number_in_id_order(using, state, max_rows)

    return atomic_retrying(using, body)


def _number_by_transaction(using: str, state: LogSequencer, max_rows: int) -> int:
    with connections[using].cursor() as cursor:
        cursor.execute(
            NUMBER_ENTRIES, {"horizon": state.horizon, "batch": max_rows, "last": state.last_position}
        )
        row = cursor.fetchone()
    assert row is not None
    xmin, count, last_position, last_tx = int(row[0]), int(row[1]), row[2], row[3]
    if count:
        state.last_position = int(last_position)
    # All entries below xmin are numbered unless the batch was full: then the last transaction
    # numbered may have more, and the horizon stays at it.
    horizon = int(last_tx) if count >= max_rows else max(xmin, state.horizon)
    if count or horizon != state.horizon:
        state.horizon = horizon
        state.save(using=using, update_fields=["last_position", "horizon"])
    return count


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
        observers = Observer.objects.using(using)
        observer = observers.select_for_update().filter(observer_id=observer_id).first()
        if observer is None:  # its first claim
            observers.get_or_create(observer_id=observer_id)
            observer = observers.select_for_update().get(observer_id=observer_id)
        observer.states = [int(s) for s in subscription]
        observer.wire_name, observer.queue = wire_name, queue
        held = observer.lease_owner not in (None, worker_id)
        if held and observer.lease_expiry is not None and observer.lease_expiry > now:
            observer.save(using=using, update_fields=["states", "wire_name", "queue"])
            return ObserverClaim(False, ())
        if not subscription:  # nothing matches: no lease, no change
            observer.save(using=using, update_fields=["states", "wire_name", "queue"])
            return ObserverClaim(False, ())
        if observer.claimed_through is not None:  # the last claim was never reported: count it
            _count_lost_attempts(using, observer)
        claimed = _collect(using, observer, max_rows, now) if max_rows else []
        if claimed:
            observer.lease_owner, observer.lease_expiry = worker_id, now + lease_duration
            observer.claimed_through, observer.claimed_count = claimed[-1].position, len(claimed)
        else:  # nothing to deliver: move the cursor over what does not match (the report does otherwise)
            _sweep(using, observer, now)
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
        through = observer.claimed_through
        in_flight = (
            {p for p, _, _ in outcomes if observer.cursor < p <= through} if through is not None else set()
        )
        rows = {
            d.position: d
            for d in ObserverDelivery.objects.using(using).filter(
                observer_id=observer_id, position__in=list(in_flight)
            )
        }
        known = {p for p in in_flight if p not in rows or rows[p].resolution == ObserverDelivery.PENDING}
        if len(known) < observer.claimed_count:  # some claimed deliveries are not reported: count them
            _count_lost_attempts(using, observer, reported=known)
        resolved: dict[int, tuple[int, int]] = {}  # position -> (resolution, attempts), for the sweep
        retries: list[ObserverDelivery] = []
        for position, disposition, next_attempt_at in outcomes:
            if position not in known:
                continue
            known.discard(position)
            row = rows.get(position)
            attempt = (row.delivery_attempt if row is not None else 0) + 1
            if disposition is ObserverDisposition.DELIVERED:
                resolved[position] = (ObserverDelivery.DELIVERED, attempt)
            elif disposition is ObserverDisposition.DEAD_LETTERED:
                resolved[position] = (ObserverDelivery.DEAD_LETTERED, attempt)
            elif next_attempt_at is not None:  # failed: due again then
                retries.append(
                    ObserverDelivery(
                        observer_id=observer_id,
                        position=position,
                        delivery_attempt=attempt,
                        next_attempt_at=next_attempt_at,
                    )
                )
            # RETRY without an instant: not attempted, so nothing is counted; it is due at once.
        _store(using, retries, rows, ["delivery_attempt", "next_attempt_at"])
        observer.claimed_through, observer.claimed_count = None, 0
        _sweep(using, observer, now, resolved=resolved, rows=rows)
        observer.save(using=using, update_fields=["cursor", "claimed_through", "claimed_count"])
        return True

    return atomic_retrying(using, body)


def _sweep(
    using: str,
    observer: Observer,
    now: datetime,
    *,
    resolved: dict[int, tuple[int, int]] | None = None,
    rows: dict[int, ObserverDelivery] | None = None,
) -> None:
    """Advance the cursor to just before the first matching entry still pending; settled
    deliveries it passes are removed (dead-lettered ones are recorded first).

    ``resolved`` (position -> (resolution, delivery attempts)) are deliveries a report settles
    now: those the cursor passes are never written, the others are stored settled (``rows``: the
    stored rows among them, by position).
    """
    observer_id = observer.observer_id
    resolved = resolved or {}
    # Read the highest position first: everything numbered up to it is committed, so the search
    # below (a later snapshot) sees all of it; entries numbered after it lie beyond the cursor.
    last = _last_position(using)
    settled = {
        position: (resolution, attempts)
        for position, resolution, attempts in ObserverDelivery.objects.using(using)
        .filter(observer_id=observer_id, position__gt=observer.cursor)
        .exclude(resolution=ObserverDelivery.PENDING)
        .values_list("position", "resolution", "delivery_attempt")
    }
    stored = set(settled)
    settled.update(resolved)
    first_pending = (
        JobTransition.objects.using(using)
        .filter(observer.matching_entries(), position__gt=observer.cursor, position__lte=last)
        .exclude(position__in=list(settled))
        .order_by("position")
        .values_list("position", flat=True)
        .first()
    )
    cursor = first_pending - 1 if first_pending is not None else max(observer.cursor, last)
    passed = [p for p in settled if p <= cursor]
    dead = {p: settled[p][1] for p in passed if settled[p][0] == ObserverDelivery.DEAD_LETTERED}
    if dead:
        _record_dead_letters(using, observer_id, dead, now)
    if passed:
        ObserverDelivery.objects.using(using).filter(observer_id=observer_id, position__in=passed).delete()
    kept = [
        ObserverDelivery(
            observer_id=observer_id, position=position, resolution=resolution, delivery_attempt=attempts
        )
        for position, (resolution, attempts) in resolved.items()
        if position > cursor and position not in stored
    ]
    _store(using, kept, rows or {}, ["resolution", "delivery_attempt"])
    observer.cursor = cursor


def _store(
    using: str, deliveries: list[ObserverDelivery], rows: dict[int, ObserverDelivery], fields: list[str]
) -> None:
    """Write ``deliveries``: update the ``fields`` of those already stored (``rows``), insert the rest."""
    existing, fresh = [], []
    for delivery in deliveries:
        row = rows.get(delivery.position)
        if row is None:
            fresh.append(delivery)
            continue
        for name in fields:
            setattr(row, name, getattr(delivery, name))
        existing.append(row)
    if fresh:
        ObserverDelivery.objects.using(using).bulk_create(fresh)
    if existing:
        ObserverDelivery.objects.using(using).bulk_update(existing, fields)


def _count_lost_attempts(using: str, observer: Observer, *, reported: set[int] | None = None) -> None:
    """The deliveries of the observer's last claim that no report settled (all of them when it is
    claimed again, else those a report left out) each used an attempt: record it, due at once."""
    through = observer.claimed_through
    assert through is not None
    positions = [
        p
        for p in JobTransition.objects.using(using)
        .filter(observer.matching_entries(), position__gt=observer.cursor, position__lte=through)
        .values_list("position", flat=True)
        if p is not None and p not in (reported or ())
    ]
    rows = {
        d.position: d
        for d in ObserverDelivery.objects.using(using).filter(
            observer_id=observer.observer_id, position__in=positions
        )
    }
    lost = [
        ObserverDelivery(
            observer_id=observer.observer_id,
            position=p,
            delivery_attempt=(rows[p].delivery_attempt if p in rows else 0) + 1,
            next_attempt_at=None,
        )
        for p in positions
        if p not in rows or rows[p].resolution == ObserverDelivery.PENDING
    ]
    _store(using, lost, rows, ["delivery_attempt", "next_attempt_at"])
    observer.claimed_through, observer.claimed_count = None, 0


def _record_dead_letters(using: str, observer_id: str, attempts: dict[int, int], now: datetime) -> None:
    """Keep the metadata of the deliveries given up on (an entry purged meanwhile leaves none)."""
    entries = JobTransition.objects.using(using).filter(position__in=list(attempts))
    ObserverDeadLetter.objects.using(using).bulk_create(
        [
            ObserverDeadLetter(
                observer_id=observer_id,
                position=position,
                job_id=job_id,
                ordinal=ordinal,
                state=state,
                attempt=attempt,
                delivery_attempts=attempts[position],
                dead_lettered_at=now,
            )
            for position, job_id, ordinal, state, attempt in entries.values_list(
                "position", "job__job_id", "ordinal", "state", "attempt"
            )
            if position is not None
        ],
        ignore_conflicts=True,
    )


def _last_position(using: str) -> int:
    last = LogSequencer.objects.using(using).filter(pk=1).values_list("last_position", flat=True).first()
    return -1 if last is None else int(last)


def _collect(using: str, observer: Observer, max_rows: int, now: datetime) -> list[Delivery]:
    """The matching entries after the cursor to deliver now, each starting an attempt (counted
    when the report says how it went, or when the claim is lost)."""
    window = max_rows + 32  # a few more, for settled entries the sweep has not removed yet
    collected: list[tuple[dict[str, Any], ObserverDelivery | None]] = []
    after = observer.cursor
    while len(collected) < max_rows:
        entries = list(
            JobTransition.objects.using(using)
            .filter(observer.matching_entries(), position__gt=after)
            .order_by("position")
            .values(*EVENT_FIELDS)[:window]
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
    return [
        _delivery(entry, (row.delivery_attempt if row is not None else 0) + 1) for entry, row in collected
    ]


def _delivery(entry: dict[str, Any], attempt: int) -> Delivery:
    return Delivery(**event_values(entry), delivery_attempt=attempt)
