"""What holds back the jobs database's vacuum horizon: the oldest open transaction or snapshot.

While any session keeps an old snapshot (a long report query, ``pg_dump``, a session left ``idle
in transaction``), PostgreSQL may remove no row version that snapshot could still see: the rows
of every job finished since it began stay in the job table and its indexes as dead entries, each
claim walks past them, and claims slow down the longer the hold lasts (docs/operations.md, "A held
transaction"). :func:`read_horizon` names the worst holder, in one statement over three catalogs:

- ``pg_stat_activity``: sessions with a transaction id (``backend_xid``) or a snapshot
  (``backend_xmin``), other than the reading session itself, connected to the jobs database or
  a WAL sender (a standby's ``hot_standby_feedback`` holds every database back). Autovacuum
  workers are left out: other sessions' horizons ignore a vacuum's own snapshot;
- ``pg_prepared_xacts``: prepared (two-phase) transactions of the jobs database, which outlive
  the session that prepared them;
- ``pg_replication_slots``: slots with an ``xmin`` (a physical slot fed by a standby's
  feedback), which hold back every database, connected or not.

Holders are ranked by how many transactions old their horizon is (``age()`` of the xid: what
vacuum is actually held to); a slot carries no time, so its ``seconds`` is None. PostgreSQL shows
another role's ``backend_xmin`` only to a role with ``pg_read_all_stats`` (or a superuser): grant
it to the role the metrics read with, or the holders of other roles go unseen. On other databases
there is nothing to read: :func:`read_horizon` returns None.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db import connections, transaction

#: The holder kinds, as :attr:`HorizonHolder.kind` reads.
SESSION = "session"
PREPARED_TRANSACTION = "prepared_transaction"
REPLICATION_SLOT = "replication_slot"

#: The worst holder of the current database's horizon (PostgreSQL), or no row when none holds.
#: Its age is measured on the database server's clock, the one ``xact_start`` and ``prepared``
#: were stamped by (no clock of this process is read, and no skew between the two enters);
#: ``clock_timestamp()``, not ``now()``, as the reading may run inside a transaction older than
#: the holder it measures.
OLDEST_HORIZON_HOLDER = f"""
WITH holders AS (
    SELECT '{SESSION}' AS kind, pid, coalesce(application_name, '') AS application_name,
           coalesce(state, '') AS state, '' AS name,
           greatest(age(backend_xid), age(backend_xmin)) AS transactions,
           extract(epoch FROM clock_timestamp() - xact_start) AS seconds
    FROM pg_stat_activity
    WHERE (backend_xid IS NOT NULL OR backend_xmin IS NOT NULL)
      AND pid <> pg_backend_pid()
      AND backend_type <> 'autovacuum worker'
      AND (datname = current_database() OR backend_type = 'walsender')
    UNION ALL
    SELECT '{PREPARED_TRANSACTION}', NULL, '', 'prepared', gid,
           age(transaction), extract(epoch FROM clock_timestamp() - prepared)
    FROM pg_prepared_xacts
    WHERE database = current_database()
    UNION ALL
    SELECT '{REPLICATION_SLOT}', active_pid, '', CASE WHEN active THEN 'active' ELSE 'inactive' END,
           slot_name, age(xmin), NULL
    FROM pg_replication_slots
    WHERE xmin IS NOT NULL
)
SELECT kind, pid, application_name, state, name, transactions, greatest(seconds, 0)
FROM holders
ORDER BY transactions DESC, seconds DESC NULLS LAST
LIMIT 1
"""
#: ``pg_stat_activity`` read twice in one transaction shows the sessions of the first read; this
#: forgets them (sent only inside a transaction: outside one, every statement reads afresh).
FORGET_SESSIONS_SEEN = "SELECT pg_stat_clear_snapshot()"


@dataclass(frozen=True, slots=True)
class HorizonHolder:
    """The session, prepared transaction or replication slot holding the horizon back most."""

    #: :data:`SESSION`, :data:`PREPARED_TRANSACTION` or :data:`REPLICATION_SLOT`.
    kind: str
    #: How many transactions old its horizon is (PostgreSQL's ``age()`` of its xid or xmin).
    transactions: int
    #: How long its transaction has been open; None for a replication slot (it records no time).
    seconds: float | None
    #: The session's process id (a slot's: the process streaming from it); None for a prepared
    #: transaction, which has no session.
    pid: int | None
    application_name: str
    #: The session's state (``idle in transaction``, ``active``…), ``prepared`` for a prepared
    #: transaction, ``active`` or ``inactive`` for a slot.
    state: str
    #: A prepared transaction's identifier or a slot's name; empty for a session.
    name: str


@dataclass(frozen=True, slots=True)
class Horizon:
    """One reading of the jobs database's horizon (PostgreSQL)."""

    #: The worst holder; None when no other session, prepared transaction or slot holds one.
    holder: HorizonHolder | None

    @property
    def age_seconds(self) -> float | None:
        """How long the worst holder has held the horizon: 0 without one, None when it is a slot."""
        return 0.0 if self.holder is None else self.holder.seconds

    @property
    def age_transactions(self) -> int:
        """How many transactions old the horizon is: 0 without a holder."""
        return 0 if self.holder is None else self.holder.transactions


def read_horizon(using: str) -> Horizon | None:
    """The horizon of database ``using``: one catalog statement on PostgreSQL, None elsewhere."""
    if connections[using].vendor != "postgresql":
        return None
    with connections[using].cursor() as cursor:
        if not transaction.get_autocommit(using=using):
            # PostgreSQL keeps the sessions it showed a transaction until that transaction ends.
            cursor.execute(FORGET_SESSIONS_SEEN)
        cursor.execute(OLDEST_HORIZON_HOLDER)
        row = cursor.fetchone()
    if row is None:
        return Horizon(holder=None)
    kind, pid, application_name, state, name, transactions, seconds = row
    return Horizon(
        holder=HorizonHolder(
            kind=str(kind),
            transactions=int(transactions),
            seconds=None if seconds is None else float(seconds),
            pid=None if pid is None else int(pid),
            application_name=str(application_name),
            state=str(state),
            name=str(name),
        )
    )
