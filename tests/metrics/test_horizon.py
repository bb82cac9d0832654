"""The jobs database's horizon: the oldest transaction or snapshot another session holds open,
read by ``monitor/horizon.py`` and served as ``backwave_database_horizon_age_seconds``."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.db import connection

from backwave_django.database import jobs_database
from backwave_django.monitor.horizon import SESSION, read_horizon

from .conftest import TOKEN, samples, value

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.metrics.urls")]

URL = "/metrics/"


@pytest.fixture
def second_session() -> Iterator[Any]:
    """A second connection to the test database (psycopg directly), always closed after the test."""
    import psycopg

    held = psycopg.connect(**connection.get_connection_params(), autocommit=True)
    try:
        yield held
    finally:
        held.close()


def _hold_a_snapshot(session: Any) -> int:
    """Open a transaction on ``session`` and take its snapshot; its backend's pid."""
    session.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
    (pid,) = session.execute("SELECT pg_backend_pid()").fetchone()
    return int(pid)


@pytest.mark.postgres
def test_a_held_snapshot_is_the_horizons_holder_until_it_ends(second_session):
    pid = _hold_a_snapshot(second_session)
    second_session.execute("SET application_name = 'nightly-report'")

    horizon = read_horizon(jobs_database())

    assert horizon is not None
    holder = horizon.holder
    assert holder is not None
    assert (holder.kind, holder.pid, holder.application_name) == (SESSION, pid, "nightly-report")
    assert holder.state == "idle in transaction"
    assert holder.seconds is not None
    assert holder.seconds >= 0
    assert horizon.age_seconds == holder.seconds
    assert horizon.age_transactions == holder.transactions >= 0

    second_session.execute("COMMIT")

    after = read_horizon(jobs_database())
    assert after is not None
    assert after.holder is None or after.holder.pid != pid


@pytest.mark.postgres
def test_the_reading_session_itself_is_not_a_holder():
    # The test runs inside a transaction of its own, with a snapshot: it is left out.
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        (own,) = cursor.fetchone()
    horizon = read_horizon(jobs_database())
    assert horizon is not None
    assert horizon.holder is None or horizon.holder.pid != own


@pytest.mark.postgres
def test_the_gauges_show_the_held_transaction(client, metrics_settings, second_session):
    _hold_a_snapshot(second_session)
    second_session.execute("SELECT txid_current()")  # a transaction id too, not only a snapshot

    found = samples(client.get(URL, HTTP_AUTHORIZATION=f"Bearer {TOKEN}").content.decode())

    seconds = value(found, "backwave_database_horizon_age_seconds")
    assert seconds is not None
    assert seconds >= 0
    # Without a holder it would read 0: the held transaction id is at least one transaction old.
    transactions = value(found, "backwave_database_horizon_age_transactions")
    assert transactions is not None
    assert transactions >= 1


def test_off_postgresql_there_is_no_horizon_and_no_gauge(client, metrics_settings):
    if connection.vendor == "postgresql":
        pytest.skip("about SQLite and MariaDB, which have no such horizon to read")
    assert read_horizon(jobs_database()) is None
    text = client.get(URL, HTTP_AUTHORIZATION=f"Bearer {TOKEN}").content.decode()
    assert "backwave_database_horizon_age" not in text
    assert value(samples(text), "backwave_workers_live") == 0  # the other counts are still served
