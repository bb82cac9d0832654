"""Test settings. ``BACKWAVE_TEST_DB`` picks the database: ``postgres`` (default), ``sqlite``,
``mariadb`` or ``pgbouncer`` (PostgreSQL through a PgBouncer in transaction mode).

PostgreSQL is reached through the usual libpq variables (``PGHOST``, ``PGPORT``, ``PGUSER``),
defaulting to the local server with trust auth; pytest-django creates ``test_backwave``.
"""

from __future__ import annotations

import json
import os
import tempfile
from typing import Any

SECRET_KEY = "backwave-tests-not-secret"
USE_TZ = True
TIME_ZONE = "UTC"
DEBUG = False
INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "backwave_django",
    "tests.jobsapp",
]

# Worker subprocesses started by the tests get their overrides as JSON in this variable.
BACKWAVE = json.loads(os.environ.get("BACKWAVE_TEST_SETTINGS", "{}"))
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
ROOT_URLCONF = "tests.urls"
STATIC_URL = "/static/"
MIDDLEWARE = [
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
]
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ]
        },
    }
]

DATABASE = os.environ.get("BACKWAVE_TEST_DB", "postgres")
DATABASES: dict[str, dict[str, Any]]
if DATABASE == "sqlite":
    # A file, not :memory:, so that worker subprocesses can share the test database.
    _sqlite_test_path = os.environ.get("BACKWAVE_SQLITE_PATH") or os.path.join(
        tempfile.gettempdir(), f"backwave-test-{os.getpid()}.sqlite3"
    )
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": os.environ.get("BACKWAVE_DB_NAME") or _sqlite_test_path,
            "OPTIONS": {"transaction_mode": "IMMEDIATE", "timeout": 20},
            "TEST": {"NAME": _sqlite_test_path},
        }
    }
elif DATABASE in ("postgres", "pgbouncer"):
    _server = {
        "ENGINE": "django.db.backends.postgresql",
        "HOST": os.environ.get("PGHOST", "127.0.0.1"),
        "PORT": os.environ.get("PGPORT", "5432"),
        "USER": os.environ.get("PGUSER", "postgres"),
        "PASSWORD": os.environ.get("PGPASSWORD", ""),
    }
    _test_name = os.environ.get("BACKWAVE_PG_TEST_NAME", "test_backwave")
    DATABASES = {
        "default": {
            **_server,
            # A worker subprocess is pointed straight at the test database with BACKWAVE_DB_NAME.
            "NAME": os.environ.get("BACKWAVE_DB_NAME") or os.environ.get("PGDATABASE", "postgres"),
            "TEST": {"NAME": _test_name},
        },
        # A database of the job tables' own (tests/operations/test_jobs_database.py); its test
        # database is only created for the tests that ask for it.
        "jobs": {
            **_server,
            "NAME": os.environ.get("BACKWAVE_JOBS_DB_NAME") or os.environ.get("PGDATABASE", "postgres"),
            "TEST": {"NAME": f"{_test_name}_jobs"},
        },
    }
    # The test database again, always reached directly: the LISTEN alias of the pgbouncer leg.
    DATABASES["listen"] = {**_server, "NAME": DATABASES["default"]["NAME"], "TEST": {"MIRROR": "default"}}
    if DATABASE == "pgbouncer":
        # The jobs' alias goes through a PgBouncer in transaction mode (started by the test session,
        # tests/pgbouncer.py, which passes its port on); LISTEN goes straight to PostgreSQL.
        DATABASES["default"]["PORT"] = os.environ.get("BACKWAVE_PGBOUNCER_PORT", "6432")
        DATABASES["default"]["DISABLE_SERVER_SIDE_CURSORS"] = True
        BACKWAVE.setdefault("LISTEN_DATABASE", "listen")
    if BACKWAVE.get("DATABASE"):
        DATABASE_ROUTERS = ["backwave_django.routers.JobsRouter"]
elif DATABASE == "mariadb":
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.mysql",
            "NAME": os.environ.get("BACKWAVE_DB_NAME") or "test",
            "HOST": os.environ.get("MYSQL_HOST", "127.0.0.1"),
            "PORT": os.environ.get("MYSQL_PORT", "3306"),
            "USER": os.environ.get("MYSQL_USER", "root"),
            "PASSWORD": os.environ.get("MYSQL_PASSWORD", ""),
            "OPTIONS": {"charset": "utf8mb4"},
            "TEST": {
                "NAME": os.environ.get("BACKWAVE_MARIADB_TEST_NAME", "test_backwave"),
                "CHARSET": "utf8mb4",
            },
        }
    }
else:
    raise RuntimeError(
        f"BACKWAVE_TEST_DB must be 'postgres', 'pgbouncer', 'sqlite' or 'mariadb', got {DATABASE!r}"
    )

# The Django Tasks backend (backwave_django.tasks) needs Django 6.0+; tests/tasks skip on 5.2.
import django  # noqa: E402

if django.VERSION >= (6, 0):
    TASKS = {
        "default": {
            "BACKEND": "backwave_django.tasks.BackWaveBackend",
            "QUEUES": ["default", "emails"],
        }
    }
