"""Settings for the example project, read from the environment (12-factor, through django-environ).

| variable | default |
|---|---|
| ``DATABASE_URL`` | ``sqlite:///<this folder>/db.sqlite3``; e.g. ``postgres://user:pass@host:5432/name`` |
| ``DEBUG`` | ``false`` (``make demo`` turns it on so ``runserver`` serves the admin's static files) |
| ``SECRET_KEY`` | an insecure development key that ``manage.py check --deploy`` flags |
| ``ALLOWED_HOSTS`` | ``127.0.0.1,localhost`` |
| ``TIME_ZONE`` | ``UTC`` (what the admin shows times in; jobs always store UTC instants) |

SQLite is the zero-setup, single-host choice; PostgreSQL is the production target
(see docs/quickstart.md in the backwave_django repository).
"""

from __future__ import annotations

from pathlib import Path

import environ

BASE_DIR = Path(__file__).resolve().parent.parent

env = environ.Env()

DEBUG = env.bool("DEBUG", default=False)
SECRET_KEY = env.str("SECRET_KEY", default="django-insecure-backwave-example-project-change-me")
ALLOWED_HOSTS = env.list("ALLOWED_HOSTS", default=["127.0.0.1", "localhost"])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "backwave_django",
    "shop",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "demo_site.urls"
WSGI_APPLICATION = "demo_site.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
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

DATABASES = {"default": env.db_url("DATABASE_URL", default=f"sqlite:///{BASE_DIR / 'db.sqlite3'}")}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # SQLite serves one host. The admin (runserver) and the worker write to the same file:
    # IMMEDIATE takes the write lock when a transaction begins, so a second writer waits for it
    # (up to `timeout` seconds) instead of failing with "database is locked" halfway through a
    # transaction (system check backwave.W001). WAL lets the admin read while the worker writes.
    DATABASES["default"]["OPTIONS"] = {
        "transaction_mode": "IMMEDIATE",
        "timeout": 20,
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        **DATABASES["default"].get("OPTIONS", {}),
    }

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

LANGUAGE_CODE = "en-us"
TIME_ZONE = env.str("TIME_ZONE", default="UTC")
USE_I18N = True
USE_TZ = True  # backwave_django requires it (system check backwave.E002)

STATIC_URL = "static/"
STATIC_ROOT = BASE_DIR / "staticfiles"

BACKWAVE = {
    # Renew leases every 5 s (instead of a third of the 60 s lease) so that a cancel request
    # from the admin reaches a running handler within seconds.
    "HEARTBEAT_INTERVAL": 5,
    "SCHEDULES": {
        # Build yesterday's sales report at 02:00 Berlin time, across DST changes. If every
        # worker was down at 02:00, run it once when one comes back (coalesce), and never run
        # two reports at once (no_overlap).
        "nightly-sales-report": {
            "job": "nightly-sales-report",
            "cron": "0 2 * * *",
            "time_zone": "Europe/Berlin",
            "kwargs": {"day": "yesterday"},
            "catch_up": "coalesce",
            "no_overlap": True,
        },
        # Refresh exchange rates every minute from a provider that fails now and then.
        "exchange-rates": {
            "job": "sync-exchange-rates",
            "cron": "* * * * *",
            "kwargs": {"currency": "EUR"},
        },
    },
    # The exchange-rate provider allows four concurrent requests: cap the queue across all workers.
    "QUEUES": {"integrations": {"concurrency_limit": 4}},
}
