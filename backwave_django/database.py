"""Where the job tables live: the one database alias every part of the app reads and writes them on.

Django's ``DATABASE_ROUTERS`` decide it, as for any model (``router.db_for_write``); with no
router it is ``default``. The store, the worker, the harness, the checks and the console all ask
here, so a project that routes the job tables elsewhere needs to say so only once
(``backwave_django.routers.JobsRouter`` routes them to ``BACKWAVE["DATABASE"]``).

The worker's ``LISTEN`` connection is the one exception: it may use an alias of its own,
``BACKWAVE["LISTEN_DATABASE"]``, that reaches the same PostgreSQL database directly, for when the
jobs' alias goes through a pooler in transaction mode (see docs/operations.md, "PgBouncer").
"""

from __future__ import annotations

from django.db import router

from .conf import get_settings


def jobs_database() -> str:
    """The database alias the job tables live on (where the store writes)."""
    from .models import JobRecord

    return router.db_for_write(JobRecord)


def listen_database() -> str:
    """The database alias the worker listens for wake-up hints and cancel requests on:
    ``BACKWAVE["LISTEN_DATABASE"]``, or the jobs' own alias when that is not set."""
    return get_settings().listen_database or jobs_database()
