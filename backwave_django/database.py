"""Where the job tables live: the one database alias every part of the app reads and writes them on.

Django's ``DATABASE_ROUTERS`` decide it, as for any model (``router.db_for_write``); with no
router it is ``default``. The store, the worker, the harness, the checks and the console all ask
here, so a project that routes the job tables elsewhere needs to say so only once.
"""

from __future__ import annotations

from django.db import router


def jobs_database() -> str:
    """The database alias the job tables live on (where the store writes)."""
    from .models import JobRecord

    return router.db_for_write(JobRecord)
