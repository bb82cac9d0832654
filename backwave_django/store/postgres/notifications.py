"""Wake-up hints and cancel requests: PostgreSQL's ``NOTIFY``, delivered when the transaction
that sends it commits. The worker listens on both channels (``worker/hints.py``)."""

from __future__ import annotations

from django.db import connections

from .statements import statement

#: PostgreSQL channel that carries wake-up hints; the payload is the queue name.
HINT_CHANNEL = "backwave_hints"
#: PostgreSQL channel that carries cancel requests to the workers; the payload is the job id.
CANCEL_CHANNEL = "backwave_cancels"

NOTIFY = statement("NOTIFY")


def notify(using: str, payload: str, *, channel: str) -> None:
    """Send ``payload`` on ``channel`` (:data:`NOTIFY`), in the current transaction."""
    with connections[using].cursor() as cursor:
        cursor.execute(NOTIFY, {"channel": channel, "payload": payload})
