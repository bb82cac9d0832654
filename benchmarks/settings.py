"""Settings for the benchmark harness and the worker processes it starts.

The database is the harness's scratch database (``backwave_bench`` unless ``BACKWAVE_BENCH_DB``
names another); PostgreSQL is reached through the usual libpq variables, defaulting to the local
server with trust auth, like the test settings.
"""

from __future__ import annotations

import os
from datetime import timedelta

SECRET_KEY = "backwave-bench-not-secret"
#: The worker's BATCH_WINDOW in milliseconds, for the long-horizon scenario (benchmarks/horizon.py).
BATCH_WINDOW_ENV = "BACKWAVE_BENCH_BATCH_WINDOW_MS"
USE_TZ = True
TIME_ZONE = "UTC"
DEBUG = False  # DEBUG=True keeps every query in memory: it would distort the RSS measurement
INSTALLED_APPS = [
    "django.contrib.contenttypes",
    "django.contrib.auth",
    "backwave_django",
    "benchmarks",
]
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# psycopg's own default (5), which the raw baselines (plain psycopg.connect) also run with, so both
# sides plan their statements once per connection. BACKWAVE_BENCH_PREPARE_THRESHOLD=none measures
# Django's default instead (nothing prepared).
_threshold = os.environ.get("BACKWAVE_BENCH_PREPARE_THRESHOLD", "5")
_prepare_threshold = None if _threshold.lower() == "none" else int(_threshold)

DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": os.environ.get("BACKWAVE_BENCH_DB", "backwave_bench"),
        "HOST": os.environ.get("PGHOST", "127.0.0.1"),
        "PORT": os.environ.get("PGPORT", "5432"),
        "USER": os.environ.get("PGUSER", "postgres"),
        "PASSWORD": os.environ.get("PGPASSWORD", ""),
        # Django's default (None) never prepares statements; see "Tuning" in docs/performance.md.
        "OPTIONS": {"prepare_threshold": _prepare_threshold},
    }
}

# Nothing is purged mid-run: the harness reads every job's timestamps after the fact, and the
# scale run needs its million retained rows to stay put. The retention scenario
# (benchmarks/retention.py) sets BACKWAVE_BENCH_RETENTION_S for its worker: Succeeded or Cancelled
# jobs are then kept that many seconds and purged by the worker's maintenance.
_retention = os.environ.get("BACKWAVE_BENCH_RETENTION_S")
_kept = None if _retention is None else timedelta(seconds=float(_retention))

BACKWAVE = {
    "RETENTION": {"SUCCEEDED_OR_CANCELLED": _kept, "DEAD_LETTERED_OR_QUARANTINED": None},
    # The fan-in measurement enqueues one child of 1,000 parents (the default limit is 16).
    "MAX_PARENTS_PER_JOB": 1000,
    # The transition log, on by default; BACKWAVE_BENCH_HISTORY=OFF measures what it costs.
    "HISTORY": os.environ.get("BACKWAVE_BENCH_HISTORY", "TRANSITIONS_AND_FAILURE_DETAIL"),
    # The contract's 32 unless BACKWAVE_BENCH_MAX_CLAIM_BATCH measures another ("Tuning" in
    # docs/performance.md).
    "MAX_CLAIM_BATCH": int(os.environ.get("BACKWAVE_BENCH_MAX_CLAIM_BATCH", "32")),
    # Zero (none) unless the long-horizon scenario measures one (--horizon-batch-window, docs/worker.md).
    "BATCH_WINDOW": float(os.environ.get(BATCH_WINDOW_ENV, "0")) / 1000,
}

# Quiet by default. The harness raises the worker subprocesses to INFO (one line per worker start
# and stop, and the supervisor's restarts) and sends their output to benchmarks/results/logs/.
_LEVEL = os.environ.get("BACKWAVE_BENCH_LOG_LEVEL", "WARNING")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {"stderr": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "loggers": {
        "backwave_django": {"handlers": ["stderr"], "level": _LEVEL, "propagate": False},
        "django": {"handlers": ["stderr"], "level": "WARNING", "propagate": False},
    },
}
