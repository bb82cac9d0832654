"""System checks: ``backwave.E001`` … for errors, ``backwave.W001`` … for warnings."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.apps import AppConfig
from django.conf import settings
from django.core.checks import CheckMessage, Error, Tags, Warning, register
from django.db import connections, router

from .conf import settings_errors


@register()
def check_settings(
    app_configs: Sequence[AppConfig] | None = None, databases: Sequence[str] | None = None, **kwargs: Any
) -> list[CheckMessage]:
    return [
        Error(
            message,
            hint="See the settings reference in docs/settings.md.",
            obj="settings.BACKWAVE",
            id="backwave.E001",
        )
        for message in settings_errors()
    ]


@register()
def check_use_tz(
    app_configs: Sequence[AppConfig] | None = None, databases: Sequence[str] | None = None, **kwargs: Any
) -> list[CheckMessage]:
    if getattr(settings, "USE_TZ", True):
        return []
    return [
        Error(
            "backwave_django needs USE_TZ = True: due times, leases and schedules are UTC instants.",
            hint="Set USE_TZ = True in your settings.",
            id="backwave.E002",
        )
    ]


@register(Tags.database)
def check_database(
    app_configs: Sequence[AppConfig] | None = None, databases: Sequence[str] | None = None, **kwargs: Any
) -> list[CheckMessage]:
    from .models import JobRecord

    alias = router.db_for_write(JobRecord)
    connection = connections[alias]
    messages: list[CheckMessage] = []
    if connection.vendor == "sqlite":
        mode = connection.settings_dict.get("OPTIONS", {}).get("transaction_mode")
        if mode != "IMMEDIATE":
            messages.append(
                Warning(
                    f"Database {alias!r} is SQLite without transaction_mode='IMMEDIATE'; concurrent "
                    "workers may hit 'database is locked' errors.",
                    hint=f'Add "OPTIONS": {{"transaction_mode": "IMMEDIATE"}} to DATABASES[{alias!r}].',
                    id="backwave.W001",
                )
            )
    elif not connection.features.has_select_for_update_skip_locked:
        messages.append(
            Error(
                f"Database {alias!r} ({connection.vendor}) does not support SELECT … FOR UPDATE SKIP LOCKED.",
                hint="Use PostgreSQL, MariaDB ≥ 10.6, MySQL ≥ 8 or SQLite.",
                id="backwave.E003",
            )
        )
    return messages


@register()
def check_schedule_jobs(
    app_configs: Sequence[AppConfig] | None = None, databases: Sequence[str] | None = None, **kwargs: Any
) -> list[CheckMessage]:
    from .registry import get

    if settings_errors():
        return []  # reported by check_settings
    from .conf import get_settings

    return [
        Error(
            f"SCHEDULES[{schedule_id!r}] runs job {options['job']!r}, which no installed app declares.",
            hint="Declare it with @job(...) in an app's jobs.py, or fix the wire name.",
            obj="settings.BACKWAVE",
            id="backwave.E004",
        )
        for schedule_id, options in get_settings().schedules.items()
        if get(options["job"]) is None
    ]
