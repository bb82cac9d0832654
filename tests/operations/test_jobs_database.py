"""The job tables on a PostgreSQL database of their own, routed there by ``JobsRouter``.

The test settings have a second alias, ``jobs``, on another database. With the router installed
and ``BACKWAVE["DATABASE"] = "jobs"``, everything about jobs happens there: enqueueing, the
worker, the console's reads. Transactional enqueue then holds with writes on that database only.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection, connections, router, transaction
from django.urls import reverse

from backwave_django import JobState
from backwave_django.database import jobs_database
from backwave_django.models import JobRecord, JobTransition
from tests.jobsapp import jobs

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True, databases=["default", "jobs"])]

ROUTER = "backwave_django.routers.JobsRouter"


class Boom(Exception):
    pass


@pytest.fixture
def jobs_apart(settings, backwave_settings) -> None:
    settings.DATABASE_ROUTERS = [ROUTER]
    backwave_settings(DATABASE="jobs")


def test_without_a_jobs_database_the_router_has_no_opinion(settings):
    settings.DATABASE_ROUTERS = [ROUTER]
    assert jobs_database() == "default"
    assert router.allow_migrate("default", "backwave_django") is True


def test_the_router_sends_the_job_models_and_their_migrations_to_the_jobs_database(jobs_apart):
    assert jobs_database() == "jobs"
    assert router.db_for_read(JobRecord) == router.db_for_write(JobTransition) == "jobs"
    assert router.db_for_write(User) == "default"
    assert router.allow_migrate("jobs", "backwave_django", model_name="jobrecord") is True
    assert router.allow_migrate("default", "backwave_django", model_name="jobrecord") is False
    assert router.allow_migrate("default", "auth", model_name="user") is True  # not ours to decide


@pytest.fixture
def scratch_databases() -> Iterator[tuple[str, str]]:
    """Two empty databases for a project's own ``default`` and ``jobs`` (named after the test
    database, so that test runs side by side do not meet), dropped afterwards."""
    import psycopg

    base = str(connection.settings_dict["NAME"])
    names = (f"{base}_recipe_app", f"{base}_recipe_jobs")
    params = {k: v for k, v in connection.get_connection_params().items() if k != "cursor_factory"}
    with psycopg.connect(**{**params, "dbname": "postgres"}, autocommit=True) as admin:
        for name in names:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}"')
            admin.execute(f'CREATE DATABASE "{name}"')
        try:
            yield names
        finally:
            for name in names:
                admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _tables(params: dict[str, Any], dbname: str) -> set[str]:
    import psycopg

    with psycopg.connect(**{**params, "dbname": dbname}) as conn:
        rows = conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'").fetchall()
    return {row[0] for row in rows}


def test_migrate_creates_the_job_tables_on_the_jobs_database_only(scratch_databases, workers):
    app, jobs_db = scratch_databases
    env = {**workers.env(DATABASE="jobs"), "BACKWAVE_DB_NAME": app, "BACKWAVE_JOBS_DB_NAME": jobs_db}
    for args in (["migrate"], ["migrate", "backwave_django", "--database", "jobs"]):
        done = subprocess.run(
            [sys.executable, "-m", "django", *args], env=env, capture_output=True, text=True, check=False
        )
        assert done.returncode == 0, done.stderr
    params = {k: v for k, v in connection.get_connection_params().items() if k != "cursor_factory"}
    on_app, on_jobs = _tables(params, app), _tables(params, jobs_db)
    assert not {t for t in on_app if t.startswith("backwave_django_")}
    assert "auth_permission" in on_app  # the console's permissions stay with the auth app
    assert "backwave_django_jobrecord" in on_jobs
    assert on_jobs == {t for t in on_jobs if t.startswith("backwave_django_")} | {"django_migrations"}


def test_the_router_keeps_routing_while_an_unrelated_setting_is_invalid(jobs_apart, backwave_settings):
    backwave_settings(CONCURRENCY=0)  # manage.py check reports it (E001); migrate must still route
    assert jobs_database() == "jobs"
    assert router.allow_migrate("default", "backwave_django") is False


def test_jobs_are_enqueued_run_and_shown_on_the_jobs_database(jobs_apart, workers, admin_client):
    job_id = jobs.echo.enqueue("apart").job_id
    assert JobRecord.objects.using("jobs").filter(job_id=job_id).exists()
    assert not JobRecord.objects.using("default").exists()

    workers.environ["BACKWAVE_JOBS_DB_NAME"] = str(connections["jobs"].settings_dict["NAME"])
    result = workers.run("--burst", "--queues", "default", DATABASE="jobs")
    assert result.returncode == 0, result.stderr

    record = JobRecord.objects.get(job_id=job_id)  # read through the router
    assert (record.state, record.output) == (JobState.SUCCEEDED, {"args": ["apart"], "kwargs": {}})
    assert JobTransition.objects.using("jobs").filter(job__job_id=job_id).count() >= 3
    assert not JobTransition.objects.using("default").exists()
    page = admin_client.get(reverse("admin:backwave_django_jobrecord_changelist")).content.decode()
    assert str(job_id) in page


def test_an_enqueue_is_part_of_a_transaction_on_the_jobs_database_only(jobs_apart):
    # Inside a transaction on the default database the enqueue commits at once, on its own.
    with pytest.raises(Boom), transaction.atomic():
        User.objects.create(username="order-1")
        kept = jobs.echo.enqueue("kept").job_id
        raise Boom
    assert not User.objects.filter(username="order-1").exists()
    assert JobRecord.objects.filter(job_id=kept).exists()

    # Inside a transaction on the jobs' database it rolls back with it.
    with pytest.raises(Boom), transaction.atomic(using="jobs"):
        dropped = jobs.echo.enqueue("dropped").job_id
        raise Boom
    assert not JobRecord.objects.filter(job_id=dropped).exists()
