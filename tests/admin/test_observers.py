"""The Observers page and the dead-lettered deliveries list: cursor, lag, lease, dead letters."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User

from backwave_django import JobState, store
from backwave_django.core.observing import ObserverDisposition
from backwave_django.models import JobRecord, JobTransition, Observer

from ..conftest import LEASE, T0, enqueue, lease, number_log, report
from .conftest import make_staff

# The store calls commit one by one: on PostgreSQL the log is numbered after transactions end.
pytestmark = pytest.mark.django_db(transaction=True)

OBSERVERS = "/admin/backwave_django/observer/"
DEAD_LETTERS = "/admin/backwave_django/observerdeadletter/"


def _claim(observer: str, states: list[JobState]) -> list[int]:
    got = store.claim_observer_deliveries(
        observer,
        states=states,
        wire_name=None,
        queue=None,
        worker_id="observer-worker",
        max_rows=10,
        lease_duration=LEASE,
        now=T0,
    )
    return [d.position for d in got.deliveries]


@pytest.fixture
def observed() -> dict[str, object]:
    """Two finished jobs; "pager" dead-lettered the first's Succeeded entry and has the second's
    pending; "scheduler" delivered everything it subscribed to."""
    first, second = enqueue(), enqueue()
    lease()
    report(first)
    report(second)
    number_log()
    first_done, _second_done = _claim("pager", [JobState.SUCCEEDED])
    store.report_observer_deliveries(
        "pager",
        worker_id="observer-worker",
        outcomes=[(first_done, ObserverDisposition.DEAD_LETTERED, None)],
        now=T0,
    )
    delivered = _claim("scheduler", [JobState.SCHEDULED])
    store.report_observer_deliveries(
        "scheduler",
        worker_id="observer-worker",
        outcomes=[(p, ObserverDisposition.DELIVERED, None) for p in delivered],
        now=T0,
    )
    return {"first": first, "second": second, "dead_position": first_done}


def _as(client, *codenames: str) -> User:
    user = make_staff(*codenames, view=False)
    client.force_login(user)
    return user


def test_the_list_shows_each_observers_subscription_cursor_lag_lease_and_dead_letters(client, observed):
    _as(client, "view_observer")
    body = client.get(OBSERVERS).content.decode()
    pager = Observer.objects.get(observer_id="pager")
    scheduler = Observer.objects.get(observer_id="scheduler")
    assert pager.cursor == observed["dead_position"]
    assert f">{pager.cursor}<" in body
    assert "Succeeded" in body
    assert "Scheduled" in body
    assert body.count('data-testid="bw-observer-dead-letters"') == 1  # only pager has dead letters
    assert "observer-worker" in body  # the lease holder
    lag = store.observer_lag("pager", states=[JobState.SUCCEEDED])
    assert lag.pending == 1
    assert store.observer_lag("scheduler", states=[JobState.SCHEDULED]).pending == 0
    assert scheduler.cursor >= 1


def test_an_observers_page_lists_its_dead_letters_linked_to_the_job(client, observed):
    _as(client, "view_observer")
    pager = Observer.objects.get(observer_id="pager")
    body = client.get(f"{OBSERVERS}{pager.pk}/change/").content.decode()
    assert 'data-testid="bw-observer-dead-letter-table"' in body
    job = JobRecord.objects.get(job_id=observed["first"])
    assert f"/admin/backwave_django/jobrecord/{job.pk}/change/" in body
    assert 'data-state="Succeeded"' in body


def test_the_dead_letter_list_filters_by_observer_and_marks_a_purged_job(client, observed):
    _as(client, "view_observerdeadletter")
    body = client.get(DEAD_LETTERS, {"observer_id": "pager"}).content.decode()
    job = JobRecord.objects.get(job_id=observed["first"])
    assert f"/admin/backwave_django/jobrecord/{job.pk}/change/" in body
    JobTransition.objects.filter(job=job).delete()  # as retention purges a job with its log
    job.delete()
    body = client.get(DEAD_LETTERS, {"observer_id": "pager"}).content.decode()
    assert f'<code title="{observed["first"]}">' in body
    assert "(purged)" in body
    assert client.get(DEAD_LETTERS, {"observer_id": "scheduler"}).content.decode().count("(purged)") == 0


def test_the_pages_need_their_view_permissions_and_change_nothing(client, observed):
    _as(client, "view_jobrecord")
    assert client.get(OBSERVERS).status_code == 403
    assert client.get(DEAD_LETTERS).status_code == 403
    _as(client, "view_observer", "view_observerdeadletter")
    pager = Observer.objects.get(observer_id="pager")
    before = (pager.cursor, pager.lease_owner)
    assert client.post(f"{OBSERVERS}{pager.pk}/change/", {"cursor": 99}).status_code == 403
    assert client.post(f"{OBSERVERS}{pager.pk}/delete/", {"post": "yes"}).status_code == 403
    pager.refresh_from_db()
    assert (pager.cursor, pager.lease_owner) == before


def test_an_observer_whose_code_is_gone_is_marked_not_declared(client, observed):
    _as(client, "view_observer")
    body = client.get(OBSERVERS).content.decode()
    # Neither test observer is declared in this process (the test app declares its observers only
    # in worker processes), so both rows show the "no" icon.
    assert body.count('alt="False"') >= 2
