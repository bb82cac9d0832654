"""The metrics view: who may scrape it, what it shows, and that its counts are cached."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from backwave_django.core.states import JobState
from backwave_django.models import Observer
from tests.factories import JobRecordFactory, JobTransitionFactory, WorkerNodeFactory

from .conftest import TOKEN, samples, value

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.metrics.urls")]

URL = "/metrics/"


def _analyze_jobs() -> None:
    """PostgreSQL reports the ended states from the planner's statistics: gather them."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE backwave_django_jobrecord")


def _bearer(token: str) -> dict[str, str]:
    return {"HTTP_AUTHORIZATION": f"Bearer {token}"}


def _staff(django_user_model, *, is_staff: bool = True) -> User:
    return django_user_model.objects.create_user("operator", password="pw", is_staff=is_staff)


def test_staff_session_scrapes_the_job_counts_by_queue_and_state(client, django_user_model, metrics_settings):
    now = timezone.now()
    JobRecordFactory.create_batch(
        3, queue="emails", state=JobState.SCHEDULED, due_time=now - timedelta(seconds=30)
    )
    JobRecordFactory(queue="emails", state=JobState.SCHEDULED, due_time=now + timedelta(hours=1))
    JobRecordFactory.create_batch(2, queue="reports", state=JobState.LEASED, due_time=now)
    JobRecordFactory(queue="reports", state=JobState.AWAITING_PARENT, due_time=now)
    JobRecordFactory.create_batch(5, queue="emails", state=JobState.SUCCEEDED, terminal_at=now)
    JobRecordFactory.create_batch(2, queue="reports", state=JobState.DEAD_LETTERED, terminal_at=now)
    WorkerNodeFactory(last_seen_at=now)
    WorkerNodeFactory(last_seen_at=now - timedelta(hours=1))  # stale
    _analyze_jobs()
    client.force_login(_staff(django_user_model))

    response = client.get(URL)

    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain")
    found = samples(response.content.decode())
    assert value(found, "backwave_jobs", queue="emails", state="scheduled") == 4
    assert value(found, "backwave_jobs", queue="reports", state="leased") == 2
    assert value(found, "backwave_jobs", queue="reports", state="awaiting_parent") == 1
    assert value(found, "backwave_jobs", queue="emails", state="leased") is None  # no such jobs
    # Exact below EXACT_BELOW (monitor/counts.py) on every database (the planner's estimate never reads 0).
    assert value(found, "backwave_jobs_ended", state="succeeded") == 5
    assert value(found, "backwave_jobs_ended", state="dead_lettered") == 2
    assert value(found, "backwave_jobs_ended", state="cancelled") == 0
    assert value(found, "backwave_jobs_ended", state="quarantined") == 0
    assert value(found, "backwave_workers_live") == 1
    oldest = value(found, "backwave_queue_oldest_due_age_seconds", queue="emails")
    assert oldest is not None
    assert 30 <= oldest < 3600
    assert value(found, "backwave_queue_oldest_due_age_seconds", queue="reports") is None
    assert value(found, "backwave_counts_read_timestamp_seconds") == pytest.approx(now.timestamp(), abs=600)


def test_observer_positions_and_lag_come_from_its_cursor(client, django_user_model, metrics_settings):
    from backwave_django.models import LogSequencer

    now = timezone.now()
    for position, age in ((10, 120), (11, 60), (12, 5)):
        JobTransitionFactory(position=position, recorded_at=now - timedelta(seconds=age))
    LogSequencer.objects.update_or_create(pk=1, defaults={"last_position": 12})
    Observer.objects.create(observer_id="audit", cursor=10)
    Observer.objects.create(observer_id="search", cursor=12)
    client.force_login(_staff(django_user_model))

    found = samples(client.get(URL).content.decode())

    assert value(found, "backwave_observer_positions_behind", observer="audit") == 2
    assert value(found, "backwave_observer_lag_seconds", observer="audit") == pytest.approx(60, abs=30)
    assert value(found, "backwave_observer_positions_behind", observer="search") == 0
    assert value(found, "backwave_observer_lag_seconds", observer="search") == 0


@pytest.mark.parametrize(
    ("who", "headers"),
    [
        ("anonymous", {}),
        ("anonymous", _bearer("wrong-token")),
        ("anonymous", _bearer(TOKEN[:-1])),
        ("anonymous", {"HTTP_AUTHORIZATION": f"Basic {TOKEN}"}),
        ("anonymous", {"HTTP_AUTHORIZATION": TOKEN}),
        ("non-staff", {}),
        ("non-staff", _bearer("wrong-token")),
    ],
)
def test_everyone_else_gets_401_and_no_metrics(client, django_user_model, metrics_settings, who, headers):
    JobRecordFactory(queue="secret-queue", wire_name="secret.job")
    if who == "non-staff":
        client.force_login(_staff(django_user_model, is_staff=False))

    response = client.get(URL, **headers)

    assert response.status_code == 401
    assert response["WWW-Authenticate"] == "Bearer"
    assert response.content == b""


def test_the_right_token_is_let_in(client, metrics_settings):
    JobRecordFactory(queue="emails")

    response = client.get(URL, **_bearer(TOKEN))

    assert response.status_code == 200
    assert value(samples(response.content.decode()), "backwave_jobs", queue="emails", state="scheduled") == 1


def test_without_a_token_setting_no_bearer_is_let_in(client, settings):
    settings.BACKWAVE = {}
    assert client.get(URL, **_bearer("None")).status_code == 401
    assert client.get(URL, **_bearer("")).status_code == 401


def test_an_inactive_staff_user_is_refused(client, django_user_model, metrics_settings):
    user = _staff(django_user_model)
    client.force_login(user)
    user.is_active = False
    user.save()
    assert client.get(URL).status_code == 401


def test_a_second_scrape_within_the_interval_runs_no_count_query(client, metrics_settings):
    JobRecordFactory(queue="emails")
    first = client.get(URL, **_bearer(TOKEN))
    JobRecordFactory(queue="emails")  # not seen until the interval has passed

    with CaptureQueriesContext(connection) as queries:
        second = client.get(URL, **_bearer(TOKEN))

    assert queries.captured_queries == []
    assert first.content == second.content
    assert value(samples(second.content.decode()), "backwave_jobs", queue="emails", state="scheduled") == 1


def test_after_the_interval_the_counts_are_read_again(client, settings):
    settings.BACKWAVE = {"METRICS_TOKEN": TOKEN, "METRICS_COUNT_INTERVAL": 0}
    JobRecordFactory(queue="emails")
    client.get(URL, **_bearer(TOKEN))
    JobRecordFactory(queue="emails")

    with CaptureQueriesContext(connection) as queries:
        response = client.get(URL, **_bearer(TOKEN))

    assert queries.captured_queries
    assert value(samples(response.content.decode()), "backwave_jobs", queue="emails", state="scheduled") == 2


def test_only_get_is_answered(client, metrics_settings):
    assert client.post(URL, **_bearer(TOKEN)).status_code == 405


def test_without_prometheus_client_the_view_says_what_to_install(client, metrics_settings, monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "prometheus_client", None)
    assert client.get(URL).status_code == 401  # still nothing for strangers
    response = client.get(URL, **_bearer(TOKEN))
    assert response.status_code == 503
    assert b"pip install 'prometheus_client>=0.20'" in response.content
    assert b"backwave-django[prometheus]" not in response.content  # no release to install it from


def test_a_routed_view_without_prometheus_client_is_a_check_warning(monkeypatch, settings):
    import sys

    from backwave_django.metrics.checks import check_metrics_view

    assert check_metrics_view() == []  # installed: nothing to say
    monkeypatch.setitem(sys.modules, "prometheus_client", None)
    [warning] = check_metrics_view()
    assert warning.id == "backwave.W005"
    # An install line that works from this repository (no release is published to install from).
    assert "pip install 'prometheus_client>=0.20'" in str(warning.hint)
    assert "pip install -e '.[prometheus]'" in str(warning.hint)
    assert "backwave-django[prometheus]" not in str(warning.hint)
    settings.ROOT_URLCONF = "tests.urls"  # the view is not routed there
    assert check_metrics_view() == []
