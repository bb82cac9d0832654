"""Table names and state numbers as the store's SQL statements spell them.

The PostgreSQL statements are module-level constants, formatted once at import from the models'
table names and from :class:`~backwave_django.core.states.JobState`, so that no table name or
state number is written by hand in SQL.
"""

from __future__ import annotations

from ..core.states import TERMINAL_STATES, JobState
from ..models import JobDependency, JobRecord, JobTag, JobTransition, QueueSettings

JOBS = JobRecord._meta.db_table
TRANSITIONS = JobTransition._meta.db_table
TAGS = JobTag._meta.db_table
EDGES = JobDependency._meta.db_table
QUEUES = QueueSettings._meta.db_table

SCHEDULED = int(JobState.SCHEDULED)
LEASED = int(JobState.LEASED)
SUCCEEDED = int(JobState.SUCCEEDED)
#: The terminal states as an SQL list, for ``state IN {TERMINAL}``.
TERMINAL = "(" + ", ".join(str(int(state)) for state in sorted(TERMINAL_STATES)) + ")"
