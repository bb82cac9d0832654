"""Wake-up hints and cancel requests: PostgreSQL's ``NOTIFY``, delivered when the transaction
that sends it commits. The worker listens on both channels (``worker/hints.py``)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from django.db import connections

from .statements import statement

#: PostgreSQL channel that carries wake-up hints; the payload is the queue name, followed, when the
#: hint made jobs claimable that may be due before what workers have claimed (an enqueue, a
#: schedule's instances, an attempt given back due now, a released dependent), by ``=`` and the
#: earliest of their due times in seconds since the epoch (``HINT_PAYLOAD`` in
#: ``sql/notifications.sql`` writes it too; queue names hold no ``=``). A worker that hears it reads
#: the queue from that due time at its next claim (``core/claim_floors.py``).
HINT_CHANNEL = "backwave_hints"
#: PostgreSQL channel that carries cancel requests to the workers; the payload is the job id.
CANCEL_CHANNEL = "backwave_cancels"

NOTIFY = statement("NOTIFY")


def notify(using: str, payload: str, *, channel: str) -> None:
    """Send ``payload`` on ``channel`` (:data:`NOTIFY`), in the current transaction."""
    with connections[using].cursor() as cursor:
        cursor.execute(NOTIFY, {"channel": channel, "payload": payload})


def hint_payload(queue: str, due: datetime | None = None) -> str:
    """A wake-up hint's payload (see :data:`HINT_CHANNEL`)."""
    return queue if due is None else f"{queue}={due.timestamp():.6f}"


#: A hint's due time is read this much earlier: its seconds may have lost a microsecond on the way.
_ROUNDING = timedelta(milliseconds=1)


def read_hint(payload: str) -> tuple[str, datetime | None]:
    """A wake-up hint's queue and due time (None when it carries none, or one that is not a
    number: a hint is only ever a hint)."""
    queue, _, due = payload.partition("=")
    try:
        return queue, datetime.fromtimestamp(float(due), UTC) - _ROUNDING if due else None
    except (ValueError, OverflowError, OSError):
        return queue, None
