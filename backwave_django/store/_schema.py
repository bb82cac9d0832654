"""Table names, state numbers and lock classes as the store's SQL statements spell them.

The PostgreSQL statements (``store/postgres/sql/*.sql``) name them in braces (``{jobs}``,
``{LEASED}``, ...); ``store/postgres/statements.py`` fills them in once, at import, from
:data:`VOCABULARY`, so that no table name or state number is written by hand in SQL.
"""

from __future__ import annotations

from ..core.states import TERMINAL_STATES, JobState
from ..models import (
    JobDependency,
    JobRecord,
    JobTag,
    JobTransition,
    LimitLease,
    LimitSettings,
    LimitStart,
    QueueSettings,
)

JOBS = JobRecord._meta.db_table
TRANSITIONS = JobTransition._meta.db_table
TAGS = JobTag._meta.db_table
EDGES = JobDependency._meta.db_table
QUEUES = QueueSettings._meta.db_table
LIMIT_LEASES = LimitLease._meta.db_table
LIMIT_STARTS = LimitStart._meta.db_table
LIMIT_SETTINGS = LimitSettings._meta.db_table

SCHEDULED = int(JobState.SCHEDULED)
LEASED = int(JobState.LEASED)
SUCCEEDED = int(JobState.SUCCEEDED)
#: The terminal states as an SQL list, for ``state IN {TERMINAL}``.
TERMINAL = "(" + ", ".join(str(int(state)) for state in sorted(TERMINAL_STATES)) + ")"

#: Advisory-lock class id that namespaces the per-queue locks (the second key is the queue's CRC32).
QUEUE_LOCK_CLASS = 0x0BAC_3A7E & 0x7FFF_FFFF
#: Advisory-lock class id of the unique-key locks (the second key is the key's CRC32).
UNIQUE_LOCK_CLASS = 0x0BAC_3A7F & 0x7FFF_FFFF
#: Advisory-lock class id of flow control's bucket locks (the second key is PostgreSQL's
#: ``hashtext`` of the limit name and the bucket: sql/flow.sql, FLOW_LOCK).
LIMIT_LOCK_CLASS = 0x0BAC_3A80 & 0x7FFF_FFFF

#: What a ``{name}`` in the PostgreSQL statements' SQL files stands for.
VOCABULARY: dict[str, str] = {
    "jobs": JOBS,
    "transitions": TRANSITIONS,
    "tags": TAGS,
    "edges": EDGES,
    "queues": QUEUES,
    "limit_leases": LIMIT_LEASES,
    "limit_starts": LIMIT_STARTS,
    "limit_settings": LIMIT_SETTINGS,
    "SCHEDULED": str(SCHEDULED),
    "LEASED": str(LEASED),
    "SUCCEEDED": str(SUCCEEDED),
    "TERMINAL": TERMINAL,
    "QUEUE_LOCK_CLASS": str(QUEUE_LOCK_CLASS),
    "UNIQUE_LOCK_CLASS": str(UNIQUE_LOCK_CLASS),
    "LIMIT_LOCK_CLASS": str(LIMIT_LOCK_CLASS),
}
