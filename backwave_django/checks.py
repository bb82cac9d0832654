"""System checks: ``backwave.E001`` … for errors, ``backwave.W001`` … for warnings.

Every id is listed, with its fix, in docs/settings.md ("System checks"). The checks that need a
database connection are tagged ``database``: Django runs them for ``manage.py check --database
default`` and before ``migrate``, and ``backwave_worker`` runs them when it starts, along with the
deployment checks tagged ``WORKER_TAG`` (also run by ``manage.py check --deploy``).
"""

from __future__ import annotations

import difflib
import re
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from django.apps import AppConfig
from django.conf import settings
from django.core.checks import CheckMessage, Error, Tags, Warning, register
from django.db import connections
from django.db.backends.base.base import BaseDatabaseWrapper

from .conf import DEFAULTS, SETTING_NAME, settings_errors
from .database import jobs_database

SETTINGS_HINT = "See the settings reference in docs/settings.md."

#: The first server versions with ``SELECT … FOR UPDATE SKIP LOCKED``.
MARIADB_SKIP_LOCKED = (10, 6)
MYSQL_SKIP_LOCKED = (8, 0, 1)

#: CPython releases on which an exception raised into a thread (how a sync handler gets its
#: ``JobTimeout``) can skip the ``except`` and ``finally`` of the ``try`` a loop runs in: from the
#: first affected release up to, not including, the first one known to be right. Checked on 3.13.0
#: (affected) and 3.12.1 (not); no later 3.13 release was at hand to tell where it stops, so every
#: 3.13 release is warned about. See docs/jobs.md, "Timeouts".
ASYNC_EXCEPTION_SKIPS_TRY = ((3, 13, 0), (3, 14, 0))

_UNKNOWN_TOP_LEVEL_KEY = re.compile(r"^BACKWAVE has an unknown key '(?P<key>[^']*)'\.$")


def _settings_hint(message: str) -> str:
    """Point at the likely intended key for a misspelt one, else at the settings reference."""
    match = _UNKNOWN_TOP_LEVEL_KEY.match(message)
    if match:
        close = difflib.get_close_matches(match["key"].upper(), DEFAULTS, n=1)
        if close:
            return f"Did you mean {close[0]!r}? {SETTINGS_HINT}"
        return f"Known keys: {', '.join(sorted(DEFAULTS))}. {SETTINGS_HINT}"
    return SETTINGS_HINT


@register()
def check_settings(
    app_configs: Sequence[AppConfig] | None = None, databases: Sequence[str] | None = None, **kwargs: Any
) -> list[CheckMessage]:
    """``backwave.E001``: one error per problem in ``settings.BACKWAVE`` (unknown keys, bad values)."""
    return [
        Error(message, hint=_settings_hint(message), obj=f"settings.{SETTING_NAME}", id="backwave.E001")
        for message in settings_errors()
    ]


@register()
def check_use_tz(
    app_configs: Sequence[AppConfig] | None = None, databases: Sequence[str] | None = None, **kwargs: Any
) -> list[CheckMessage]:
    """``backwave.E002``: due times, leases and schedules are instants, so ``USE_TZ`` must be on."""
    if getattr(settings, "USE_TZ", True):
        return []
    return [
        Error(
            "backwave_django needs USE_TZ = True: due times, leases and schedules are UTC instants.",
            hint="Set USE_TZ = True in your settings.",
            id="backwave.E002",
        )
    ]


def skip_locked_problem(
    *, vendor: str, display_name: str, version: tuple[int, ...] | None, has_skip_locked: bool
) -> str | None:
    """Why this server cannot claim jobs (no ``SKIP LOCKED``), or ``None`` when it can.

    SQLite has no row locks at all; it serializes writers instead, which is why it is exempt.
    MariaDB and MySQL are judged by their version (Django's own feature flag trusts every MySQL).
    """
    if vendor == "sqlite":
        return None
    if vendor == "mysql" and version is not None:
        minimum = MARIADB_SKIP_LOCKED if display_name == "MariaDB" else MYSQL_SKIP_LOCKED
        if version < minimum:
            return (
                f"{display_name} {_dotted(version)} has no SELECT … FOR UPDATE SKIP LOCKED "
                f"({display_name} {_dotted(minimum)} added it)"
            )
        return None
    if not has_skip_locked:
        return f"{display_name} does not support SELECT … FOR UPDATE SKIP LOCKED"
    return None


def _dotted(version: tuple[int, ...]) -> str:
    return ".".join(str(part) for part in version)


def _server(connection: BaseDatabaseWrapper) -> tuple[str, tuple[int, ...] | None]:
    """The server's name and, for MariaDB / MySQL, its version (the only ones judged by version)."""
    if connection.vendor != "mysql":
        return connection.display_name, None
    name = "MariaDB" if connection.mysql_is_mariadb else "MySQL"  # type: ignore[attr-defined]
    return name, tuple(connection.mysql_version)  # type: ignore[attr-defined]


def _isolation_level_name(level: Any) -> str:
    """``"read committed"`` for both psycopg's ``IsolationLevel.READ_COMMITTED`` and MySQL's string."""
    return str(getattr(level, "name", level)).replace("_", " ").replace("-", " ").lower()


def _sqlite_options_line(options: Mapping[str, Any]) -> str:
    merged = {**options, "transaction_mode": "IMMEDIATE"}
    inside = ", ".join(f"{key!r}: {value!r}" for key, value in merged.items()).replace("'", '"')
    return f'"OPTIONS": {{{inside}}}'


@register(Tags.database)
def check_database(
    app_configs: Sequence[AppConfig] | None = None, databases: Sequence[str] | None = None, **kwargs: Any
) -> list[CheckMessage]:
    """``backwave.E003``, ``W001``, ``W002``: can the jobs' database claim jobs safely?

    Runs only when the jobs' alias is among ``databases``: Django passes the aliases it was asked
    to check (``manage.py check --database default``, ``migrate``, the worker's start), and none on
    a plain ``manage.py check``, where its own database checks say nothing either (reading a
    MariaDB's version opens a connection).
    """
    alias = jobs_database()
    if databases is None or alias not in databases or check_database_aliases():
        return []  # not asked about this database, or an alias to be fixed first (E006)
    connection = connections[alias]
    options: Mapping[str, Any] = connection.settings_dict.get("OPTIONS") or {}
    messages: list[CheckMessage] = []
    if connection.vendor == "sqlite":
        if options.get("transaction_mode") != "IMMEDIATE":
            messages.append(
                Warning(
                    f"Database {alias!r} is SQLite without transaction_mode='IMMEDIATE'; a worker and "
                    "the web process (or two workers) writing at once may hit 'database is locked' errors.",
                    hint=f"Set {_sqlite_options_line(options)} in DATABASES[{alias!r}] (Django 5.1+).",
                    obj=f"DATABASES[{alias!r}]",
                    id="backwave.W001",
                )
            )
        return messages
    display_name, version = _server(connection)
    problem = skip_locked_problem(
        vendor=connection.vendor,
        display_name=display_name,
        version=version,
        has_skip_locked=connection.features.has_select_for_update_skip_locked,
    )
    if problem:
        messages.append(
            Error(
                f"Database {alias!r}: {problem}. Workers claim jobs with it, so none can run here: "
                "the first claim fails with NotSupportedError.",
                hint="Upgrade the server: PostgreSQL, MariaDB 10.6+ or MySQL 8.0+ "
                "(see docs/databases.md), or keep the jobs on SQLite for a single host.",
                obj=f"DATABASES[{alias!r}]",
                id="backwave.E003",
            )
        )
    level = options.get("isolation_level")
    if level is not None and _isolation_level_name(level) != "read committed":
        messages.append(
            Warning(
                f"Database {alias!r} runs at isolation level {_isolation_level_name(level).upper()}; "
                "backwave_django is built and tested for READ COMMITTED, where queue concurrency "
                "limits count every committed lease (a repeatable-read snapshot can miss one, and on "
                "PostgreSQL contended claims become serialization failures that must be retried).",
                hint=f'Remove "isolation_level" from DATABASES[{alias!r}]["OPTIONS"] (READ COMMITTED '
                "is Django's default), or route the job models to a database alias that uses it.",
                obj=f"DATABASES[{alias!r}]",
                id="backwave.W002",
            )
        )
    return messages


@register()
def check_schedule_jobs(
    app_configs: Sequence[AppConfig] | None = None, databases: Sequence[str] | None = None, **kwargs: Any
) -> list[CheckMessage]:
    """``backwave.E004``: every settings-declared schedule runs a job some installed app declares."""
    from .registry import get

    if settings_errors():
        return []  # reported by check_settings
    from .conf import get_settings

    return [
        Error(
            f"SCHEDULES[{schedule_id!r}] runs job {options['job']!r}, which no installed app declares.",
            hint="Declare it with @job(...) in an app's jobs.py, or fix the wire name.",
            obj=f"settings.{SETTING_NAME}",
            id="backwave.E004",
        )
        for schedule_id, options in get_settings().schedules.items()
        if get(options["job"]) is None
    ]


@register()
def check_observers(
    app_configs: Sequence[AppConfig] | None = None, databases: Sequence[str] | None = None, **kwargs: Any
) -> list[CheckMessage]:
    """``backwave.E005``: observers read the transition log, so ``HISTORY`` must not be OFF."""
    from .core.states import HistoryPolicy
    from .observers import definitions

    if settings_errors() or not definitions():
        return []
    from .conf import get_settings

    if get_settings().history is not HistoryPolicy.OFF:
        return []
    return [
        Error(
            f"Observer {observer_id!r} is registered, but HISTORY is OFF: no transition is recorded, "
            "so nothing would ever be delivered to it.",
            hint="Set BACKWAVE['HISTORY'] to 'TRANSITIONS' or 'TRANSITIONS_AND_FAILURE_DETAIL', or "
            "remove the observer. See docs/observers.md.",
            obj=observer_id,
            id="backwave.E005",
        )
        for observer_id in sorted(definitions())
    ]


@register()
def check_database_aliases(
    app_configs: Sequence[AppConfig] | None = None, databases: Sequence[str] | None = None, **kwargs: Any
) -> list[CheckMessage]:
    """``backwave.E006``: ``DATABASE`` and ``LISTEN_DATABASE`` name aliases of ``DATABASES``, and
    the routers send the job models to ``DATABASE`` when it is set."""
    if settings_errors():
        return []  # reported by check_settings
    from .conf import get_settings

    resolved = get_settings()
    messages: list[CheckMessage] = []

    def error(message: str, hint: str) -> None:
        messages.append(Error(message, hint=hint, obj=f"settings.{SETTING_NAME}", id="backwave.E006"))

    known = ", ".join(sorted(settings.DATABASES))
    for key, alias in (("DATABASE", resolved.database), ("LISTEN_DATABASE", resolved.listen_database)):
        if alias is not None and alias not in settings.DATABASES:
            error(
                f"BACKWAVE[{key!r}] is {alias!r}, which is not an alias in DATABASES ({known}).",
                hint=f"Add DATABASES[{alias!r}] or name one of the existing aliases. See docs/operations.md.",
            )
    if messages:
        return messages
    routed = jobs_database()
    if resolved.database is not None and routed != resolved.database:
        error(
            f"BACKWAVE['DATABASE'] is {resolved.database!r}, but the database routers send the job "
            f"models to {routed!r}.",
            hint='Put "backwave_django.routers.JobsRouter" first in DATABASE_ROUTERS. '
            'See docs/operations.md, "The job tables on their own database".',
        )
    return messages


@register(Tags.database)
def check_pooler(
    app_configs: Sequence[AppConfig] | None = None, databases: Sequence[str] | None = None, **kwargs: Any
) -> list[CheckMessage]:
    """``backwave.W003``, ``W004``: what breaks when a pooler in transaction mode sits in front of
    the jobs' PostgreSQL (see ``poolers``). Silent when it cannot connect to tell.

    Like Django's own database checks, it connects only when asked about the jobs' alias (a plain
    ``manage.py check`` passes no ``databases``), and only once the settings are valid (E001) and
    name existing aliases (E006).
    """
    from .poolers import behind_pooler, session_state_options

    if settings_errors():
        return []  # reported by check_settings
    alias = jobs_database()
    if databases is None or alias not in databases or check_database_aliases():
        return []  # not asked about this database, or an alias to be fixed first (E006)
    from .database import listen_database

    listen = listen_database()
    listen_pooled = behind_pooler(connections[listen])
    # Both duties usually share the alias: look once (each look may open a connection).
    pooled = listen_pooled if listen == alias else behind_pooler(connections[alias])
    messages: list[CheckMessage] = []
    if listen_pooled:
        messages.append(
            Warning(
                f"The workers LISTEN for wake-up hints and cancel requests on database {listen!r}, which "
                "reaches PostgreSQL through a connection pooler. In transaction mode the pooler hands "
                "the session back after each statement, and notifications never arrive: workers fall "
                "back to polling, and cancel requests wait for the next heartbeat.",
                hint="Add an alias that connects to the same PostgreSQL database directly and name it in "
                "BACKWAVE['LISTEN_DATABASE'] (or ignore this for a session-mode pool). "
                'See docs/operations.md, "PgBouncer".',
                obj=f"DATABASES[{listen!r}]",
                id="backwave.W003",
            )
        )
    if pooled:
        messages.extend(
            Warning(
                f"Database {alias!r} reaches PostgreSQL through a connection pooler, and {problem}",
                hint="Behind a pooler in transaction mode no server-side state may outlive a transaction "
                '(ignore this for a session-mode pool). See docs/operations.md, "PgBouncer".',
                obj=f"DATABASES[{alias!r}]",
                id="backwave.W004",
            )
            for problem in session_state_options(connections[alias].settings_dict)
        )
    return messages


def running_python() -> tuple[str, tuple[int, int, int]]:
    """The interpreter this process runs on: its implementation (``cpython``) and version."""
    major, minor, micro = sys.version_info[:3]
    return sys.implementation.name, (major, minor, micro)


#: The tag of the checks about the process that runs handlers: ``backwave_worker`` runs them when
#: it starts, and so does ``manage.py check --deploy`` (they are deployment checks), but not every
#: command (the operator CLI, ``runserver``, ``migrate``), which runs no handler.
WORKER_TAG = "backwave_worker"


@register(WORKER_TAG, deploy=True)
def check_python(
    app_configs: Sequence[AppConfig] | None = None, databases: Sequence[str] | None = None, **kwargs: Any
) -> list[CheckMessage]:
    """``backwave.W006``: an interpreter on which a sync handler's ``JobTimeout`` can skip the
    ``except`` / ``finally`` of the ``try`` its loop runs in (``ASYNC_EXCEPTION_SKIPS_TRY``)."""
    implementation, version = running_python()
    first, fixed = ASYNC_EXCEPTION_SKIPS_TRY
    if implementation != "cpython" or not first <= version < fixed:
        return []
    return [
        Warning(
            f"CPython {_dotted(version)} can skip a sync handler's except and finally blocks (and "
            "a with block's __exit__) when its JobTimeout lands in a while loop directly inside "
            "them: the interpreter raises it at the loop's backward jump, which the try does not "
            "cover. The timeout is still recorded, but the handler's cleanup may not run.",
            hint="Run the workers on another interpreter (CPython 3.12 was checked; docs/jobs.md, "
            '"Timeouts", shows how to check yours), or move such a loop into a function called '
            "from inside the try.",
            obj="sys.version_info",
            id="backwave.W006",
        )
    ]


from .metrics import checks as _metrics_checks  # noqa: E402, F401  (registers backwave.W005)
