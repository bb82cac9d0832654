"""The checks for the database aliases in ``BACKWAVE`` (E006) and for a pooler in front of the jobs'
PostgreSQL (W003, W004).

The pooler checks run against a real PgBouncer (the ``pgbouncer`` fixture): the ``listen`` alias of
the test settings (the test database, reached directly) is pointed at it for the test, and the job
tables are routed to that alias with ``JobsRouter``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from django.db import connections
from django.db.backends.signals import connection_created

from backwave_django import checks
from backwave_django.poolers import behind_pooler, session_state_options
from tests.pgbouncer import PgBouncer, free_port

ROUTER = "backwave_django.routers.JobsRouter"


def _ids(messages: list[Any]) -> list[str]:
    return [message.id for message in messages]


# --- E006: the aliases named in BACKWAVE ---------------------------------------------------------


def test_an_alias_that_databases_lacks_is_an_error_naming_the_known_ones(backwave_settings):
    backwave_settings(LISTEN_DATABASE="direct")
    [error] = checks.check_database_aliases()
    assert error.id == "backwave.E006"
    assert "BACKWAVE['LISTEN_DATABASE'] is 'direct', which is not an alias in DATABASES (default" in error.msg
    backwave_settings(LISTEN_DATABASE=None, DATABASE="jobz")
    assert ["BACKWAVE['DATABASE'] is 'jobz'" in error.msg for error in checks.check_database_aliases()] == [True]


@pytest.mark.postgres  # the test settings have a "jobs" alias there
def test_a_jobs_database_the_routers_do_not_send_the_jobs_to_is_an_error(backwave_settings, settings):
    backwave_settings(DATABASE="jobs")
    [error] = checks.check_database_aliases()
    assert error.id == "backwave.E006"
    assert error.msg == "BACKWAVE['DATABASE'] is 'jobs', but the database routers send the job models to 'default'."
    assert ROUTER in str(error.hint)
    settings.DATABASE_ROUTERS = [ROUTER]
    assert checks.check_database_aliases() == []


def test_aliases_that_exist_pass(backwave_settings):
    assert checks.check_database_aliases() == []
    backwave_settings(DATABASE="default", LISTEN_DATABASE="default")
    assert checks.check_database_aliases() == []


def test_an_alias_that_is_not_a_name_is_a_settings_error(backwave_settings):
    backwave_settings(LISTEN_DATABASE="")
    assert [e.id for e in checks.check_settings()] == ["backwave.E001"]
    assert checks.check_database_aliases() == []  # reported once, as E001


# --- W003, W004: a pooler in front of the jobs' PostgreSQL -----------------------------------------


def test_the_options_that_keep_session_state_are_each_named_with_their_fix():
    problems = session_state_options({"OPTIONS": {"prepare_threshold": 5, "assume_role": "app"}})
    assert [problem.split(" ")[0] for problem in problems] == ['"prepare_threshold":', "server-side", '"assume_role"']
    assert "Remove it from OPTIONS" in problems[0]
    assert '"DISABLE_SERVER_SIDE_CURSORS": True' in problems[1]
    assert session_state_options({"OPTIONS": {"prepare_threshold": None}, "DISABLE_SERVER_SIDE_CURSORS": True}) == []


@contextmanager
def _alias_changed(alias: str, **changes: Any) -> Iterator[None]:
    """Change an alias's settings (``PORT``, ``OPTIONS``, …) for the block; its connection is
    closed before and after, so it connects with them."""
    settings_dict = connections[alias].settings_dict
    saved = {key: settings_dict.get(key) for key in changes}
    connections[alias].close()
    settings_dict.update(changes)
    try:
        yield
    finally:
        connections[alias].close()
        settings_dict.update(saved)


@pytest.fixture
def jobs_on_listen_alias(backwave_settings, settings):
    """Route the job tables to the ``listen`` alias (the same test database)."""
    settings.DATABASE_ROUTERS = [ROUTER]
    backwave_settings(DATABASE="listen", LISTEN_DATABASE="listen")


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True, databases=["default", "listen"])
def test_a_pgbouncer_is_told_from_a_direct_connection(pgbouncer: PgBouncer):
    assert behind_pooler(connections["listen"]) is False
    with _alias_changed("listen", PORT=str(pgbouncer.port)):
        assert behind_pooler(connections["listen"]) is True
        assert connections["listen"].connection is None  # it closes what it opened only to look


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True, databases=["default", "listen"])
def test_listening_and_keeping_session_state_through_pgbouncer_are_warned_about(pgbouncer, jobs_on_listen_alias):
    pooled = {"PORT": str(pgbouncer.port), "OPTIONS": {"prepare_threshold": 5}}
    with _alias_changed("listen", **pooled, DISABLE_SERVER_SIDE_CURSORS=False):
        messages = checks.check_pooler(databases=["listen"])
        assert _ids(messages) == ["backwave.W003", "backwave.W004", "backwave.W004"]
        assert "LISTEN for wake-up hints and cancel requests on database 'listen'" in messages[0].msg
        assert "BACKWAVE['LISTEN_DATABASE']" in str(messages[0].hint)
        assert '"prepare_threshold": 5' in messages[1].msg
        assert "DISABLE_SERVER_SIDE_CURSORS" in messages[2].msg
        assert checks.check_pooler(databases=["some-other-alias"]) == []
    with _alias_changed("listen", PORT=str(pgbouncer.port), DISABLE_SERVER_SIDE_CURSORS=True):
        assert _ids(checks.check_pooler(databases=["listen"])) == ["backwave.W003"]  # Django's options are right


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True, databases=["default", "listen"])
def test_one_alias_for_both_duties_is_looked_at_through_one_connection(pgbouncer, jobs_on_listen_alias):
    opened: list[str] = []

    def count(sender: Any, connection: Any, **kwargs: Any) -> None:
        opened.append(connection.alias)

    connection_created.connect(count)
    try:
        with _alias_changed("listen", PORT=str(pgbouncer.port), DISABLE_SERVER_SIDE_CURSORS=True):
            assert _ids(checks.check_pooler(databases=["listen"])) == ["backwave.W003"]
    finally:
        connection_created.disconnect(count)
    assert opened == ["listen"]


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True, databases=["default", "listen"])
def test_the_same_options_on_a_direct_connection_are_fine(jobs_on_listen_alias):
    with _alias_changed("listen", OPTIONS={"prepare_threshold": 5}, DISABLE_SERVER_SIDE_CURSORS=False):
        assert checks.check_pooler(databases=["listen"]) == []


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True, databases=["default", "listen"])
def test_the_pooler_check_says_nothing_when_it_cannot_connect(jobs_on_listen_alias):
    from django.core.checks import Tags

    assert Tags.database in checks.check_pooler.tags
    with _alias_changed("listen", PORT=str(free_port())):  # nothing listens there
        assert checks.check_pooler(databases=["listen"]) == []
