"""System checks for a misconfigured project or a database that cannot claim jobs.

Old servers are faked by overriding the connection's version attributes: the version gate is a
comparison, and the machine runs only current servers.
"""

from __future__ import annotations

import enum
import io

import pytest
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.db import connections

from backwave_django import checks
from backwave_django.database import jobs_database


@pytest.fixture
def jobs_connection():
    return connections[jobs_database()]


@pytest.fixture
def fake_server(monkeypatch, jobs_connection):
    """Make the jobs' connection report a MariaDB / MySQL server of the given version."""

    def apply(name: str, version: tuple[int, ...]) -> None:
        monkeypatch.setattr(jobs_connection, "vendor", "mysql")
        monkeypatch.setattr(jobs_connection, "mysql_is_mariadb", name == "MariaDB", raising=False)
        monkeypatch.setattr(jobs_connection, "mysql_version", version, raising=False)

    return apply


def ids(messages) -> list[str]:
    return [m.id for m in messages]


# --- The SKIP LOCKED version gate ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("vendor", "name", "version", "has_skip_locked", "problem"),
    [
        ("mysql", "MariaDB", (10, 5, 27), True, "MariaDB 10.5.27 has no SELECT … FOR UPDATE SKIP LOCKED (MariaDB 10.6 added it)"),
        ("mysql", "MariaDB", (10, 6, 0), True, None),
        ("mysql", "MariaDB", (11, 4, 2), True, None),
        ("mysql", "MySQL", (5, 7, 44), True, "MySQL 5.7.44 has no SELECT … FOR UPDATE SKIP LOCKED (MySQL 8.0.1 added it)"),
        ("mysql", "MySQL", (8, 0, 36), True, None),
        ("postgresql", "PostgreSQL", None, True, None),
        ("oracle", "Oracle", None, True, None),
        ("exotic", "Exotic", None, False, "Exotic does not support SELECT … FOR UPDATE SKIP LOCKED"),
        ("sqlite", "SQLite", None, False, None),
    ],
)
def test_servers_without_skip_locked_are_named_with_their_version(vendor, name, version, has_skip_locked, problem):
    found = checks.skip_locked_problem(
        vendor=vendor, display_name=name, version=version, has_skip_locked=has_skip_locked
    )
    assert found == problem


@pytest.mark.django_db
def test_an_old_mariadb_is_an_error_with_an_upgrade_hint(fake_server):
    fake_server("MariaDB", (10, 5, 27))
    [error] = checks.check_database(databases=[jobs_database()])
    assert error.id == "backwave.E003"
    assert error.msg.startswith(
        "Database 'default': MariaDB 10.5.27 has no SELECT … FOR UPDATE SKIP LOCKED (MariaDB 10.6 added it)."
    )
    assert "MariaDB 10.6+ or MySQL 8.0+" in str(error.hint)
    assert "docs/databases.md" in str(error.hint)


@pytest.mark.django_db
def test_an_old_mysql_is_an_error(fake_server):
    fake_server("MySQL", (5, 7, 44))
    assert ids(checks.check_database(databases=[jobs_database()])) == ["backwave.E003"]


@pytest.mark.django_db
@pytest.mark.parametrize(("name", "version"), [("MariaDB", (10, 6, 0)), ("MariaDB", (10, 11, 9)), ("MySQL", (8, 4, 0))])
def test_current_mariadb_and_mysql_pass(fake_server, name, version):
    assert checks.check_database(databases=[jobs_database()]) == []


@pytest.mark.django_db
def test_a_backend_without_skip_locked_is_an_error(monkeypatch, jobs_connection):
    monkeypatch.setattr(jobs_connection, "vendor", "exotic")
    monkeypatch.setattr(jobs_connection.features, "has_select_for_update_skip_locked", False)
    [error] = checks.check_database(databases=[jobs_database()])
    assert error.id == "backwave.E003"
    assert "does not support SELECT … FOR UPDATE SKIP LOCKED" in error.msg


@pytest.mark.django_db
def test_the_database_check_only_looks_at_the_aliases_it_is_given(fake_server):
    fake_server("MariaDB", (10, 5, 27))
    assert checks.check_database(databases=["reporting"]) == []
    assert ids(checks.check_database(databases=["default"])) == ["backwave.E003"]


@pytest.mark.django_db
def test_the_worker_refuses_to_start_on_a_server_without_skip_locked(fake_server):
    fake_server("MariaDB", (10, 5, 27))
    with pytest.raises(SystemCheckError, match=r"backwave\.E003"):
        call_command("backwave_worker", "--burst", skip_checks=False)


def test_check_database_is_a_database_check():
    """Django runs it only with --database (and before migrate), never on a plain `check`."""
    from django.core.checks import Tags, registry

    assert Tags.database in checks.check_database.tags
    assert checks.check_database in registry.registry.get_checks()


# --- SQLite -------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_sqlite_without_immediate_transactions_warns_with_the_exact_options_line(monkeypatch, jobs_connection):
    monkeypatch.setattr(jobs_connection, "vendor", "sqlite")
    monkeypatch.setitem(jobs_connection.settings_dict, "OPTIONS", {"timeout": 20})
    [warning] = checks.check_database(databases=[jobs_database()])
    assert warning.id == "backwave.W001"
    assert warning.hint == (
        'Set "OPTIONS": {"timeout": 20, "transaction_mode": "IMMEDIATE"} in DATABASES[\'default\'] (Django 5.1+).'
    )


@pytest.mark.django_db
def test_sqlite_with_immediate_transactions_passes(monkeypatch, jobs_connection):
    monkeypatch.setattr(jobs_connection, "vendor", "sqlite")
    monkeypatch.setitem(jobs_connection.settings_dict, "OPTIONS", {"transaction_mode": "IMMEDIATE"})
    assert checks.check_database(databases=[jobs_database()]) == []


# --- Isolation level ----------------------------------------------------------------------------


class IsolationLevel(enum.IntEnum):
    """Shaped like psycopg's ``IsolationLevel`` (what Django's PostgreSQL OPTIONS take)."""

    READ_COMMITTED = 1
    REPEATABLE_READ = 2


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("level", "warned"),
    [
        ("repeatable read", True),
        ("serializable", True),
        (IsolationLevel.REPEATABLE_READ, True),
        ("read committed", False),
        (IsolationLevel.READ_COMMITTED, False),
    ],
)
def test_an_isolation_level_other_than_read_committed_is_warned_about(monkeypatch, jobs_connection, fake_server, level, warned):
    fake_server("MariaDB", (10, 11, 9))
    monkeypatch.setitem(jobs_connection.settings_dict, "OPTIONS", {"isolation_level": level})
    messages = checks.check_database(databases=[jobs_database()])
    assert ids(messages) == (["backwave.W002"] if warned else [])
    if warned:
        assert 'Remove "isolation_level"' in str(messages[0].hint)


# --- Settings -----------------------------------------------------------------------------------


def test_a_misspelt_setting_suggests_the_intended_key(backwave_settings):
    backwave_settings(MAX_PAYLOAD_BYTE=1024)
    [error] = checks.check_settings()
    assert error.id == "backwave.E001"
    assert error.msg == "BACKWAVE has an unknown key 'MAX_PAYLOAD_BYTE'."
    assert str(error.hint).startswith("Did you mean 'MAX_PAYLOAD_BYTES'?")


def test_an_unrecognisable_setting_lists_the_known_keys(backwave_settings):
    backwave_settings(BROKER_URL="redis://")
    [error] = checks.check_settings()
    assert str(error.hint).startswith("Known keys: BATCH_WINDOW, CONCURRENCY, CONSOLE_BULK_LIMIT, DATABASE,")


def test_a_bad_value_points_at_the_settings_reference(backwave_settings):
    backwave_settings(CONCURRENCY=0)
    [error] = checks.check_settings()
    assert error.msg == "CONCURRENCY must be a positive int, got 0."
    assert error.hint == "See the settings reference in docs/settings.md."


# --- Invalid settings and plain checks ------------------------------------------------------------


@pytest.mark.parametrize(
    "values",
    [
        {"MAX_PAYLOAD_BYTE": 1024},  # an unknown key
        {"CONCURRENCY": 0},  # a bad value
        {"LISTEN_DATABASE": ""},  # a bad alias
        {"RETRY": {"MAX_ATTEMPT": 3}},  # an unknown nested key
    ],
)
@pytest.mark.parametrize("database_args", [[], ["--database", "default"]])
def test_invalid_settings_are_reported_as_their_check_id_not_a_traceback(backwave_settings, values, database_args):
    backwave_settings(**values)
    with pytest.raises(SystemCheckError, match=r"backwave\.E001"):
        call_command("check", *database_args)


def _backwave_checks():
    from django.core.checks import registry

    return [check for check in registry.registry.get_checks(include_deployment_checks=True) if check.__module__.startswith("backwave_django")]


@pytest.mark.django_db
def test_every_check_survives_invalid_settings(backwave_settings):
    backwave_settings(MAX_PAYLOAD_BYTE=1024, CONCURRENCY="many", LISTEN_DATABASE="")
    found = [message.id for check in _backwave_checks() for message in check(databases=[jobs_database()])]
    assert set(found) - {"backwave.W006"} == {"backwave.E001"}  # W006 is about the interpreter


def test_the_database_checks_open_no_connection_without_databases():
    """Called without ``databases`` they return nothing, as Django's own database checks do. This
    test has no database access, so a connection attempt would raise."""
    from django.core.checks import Tags

    database_checks = [check for check in _backwave_checks() if Tags.database in check.tags]
    assert {checks.check_database, checks.check_pooler} <= set(database_checks)
    for check in database_checks:
        assert check() == []
        assert check(databases=None) == []


# --- W006: the interpreter ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("implementation", "version", "warned"),
    [
        ("cpython", (3, 13, 0), True),
        ("cpython", (3, 13, 9), True),
        ("cpython", (3, 12, 1), False),
        ("cpython", (3, 14, 0), False),
        ("pypy", (3, 13, 0), False),
    ],
)
def test_an_interpreter_that_can_skip_a_handlers_finally_is_warned_about(monkeypatch, implementation, version, warned):
    monkeypatch.setattr(checks, "running_python", lambda: (implementation, version))
    messages = checks.check_python()
    assert ids(messages) == (["backwave.W006"] if warned else [])
    if warned:
        assert messages[0].msg.startswith(f"CPython {'.'.join(map(str, version))} can skip a sync handler's except")
        assert "Run the workers on another interpreter" in str(messages[0].hint)


def test_the_interpreter_warning_is_a_deployment_check_not_printed_by_every_command(monkeypatch):
    monkeypatch.setattr(checks, "running_python", lambda: ("cpython", (3, 13, 0)))
    printed = io.StringIO()
    call_command("check", stderr=printed)  # every command runs these (the CLI, runserver, …)
    assert "backwave.W006" not in printed.getvalue()
    call_command("check", "--deploy", stderr=printed)
    assert "backwave.W006" in printed.getvalue()


@pytest.mark.django_db(transaction=True)
def test_the_interpreter_warning_is_printed_when_a_worker_starts(monkeypatch):
    monkeypatch.setattr(checks, "running_python", lambda: ("cpython", (3, 13, 0)))
    printed = io.StringIO()
    with pytest.raises(SystemExit):
        call_command("backwave_worker", "--burst", skip_checks=False, stderr=printed)
    assert "backwave.W006" in printed.getvalue()
