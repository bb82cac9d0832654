"""The Queues page: every queue (settings or only jobs), status, in-use / limit, depth, controls."""

from __future__ import annotations

import re

import pytest
from django.contrib.admin.models import LogEntry
from django.urls import reverse
from django.utils import timezone

from backwave_django import JobState, store
from backwave_django.models import OperatorAudit, QueueSettings

from ..conftest import LEASE, enqueue
from .conftest import flashed

pytestmark = pytest.mark.django_db

QUEUES = "admin:backwave_django_queuesettings_changelist"


def _row(html: str, queue: str) -> str:
    match = re.search(rf'<tr data-queue="{re.escape(queue)}">(.*?)</tr>', html, re.S)
    assert match, f"no row for {queue!r}"
    return match.group(1)


@pytest.fixture
def queues():
    """Queue "mail" has only jobs (two Scheduled, one Leased), "billing" only settings (paused, limit 2)."""
    now = timezone.now()
    for _ in range(3):
        enqueue(now=now, queue="mail")
    store.claim(worker_id="w", queues=["mail"], max_jobs=1, lease_duration=LEASE, now=now)
    store.pause_queue("billing", actor="setup", now=now)
    store.set_concurrency_limit("billing", 2, actor="setup", now=now)
    OperatorAudit.objects.all().delete()


def test_queues_with_only_jobs_and_queues_with_only_settings_are_both_listed(client, login, queues):
    login()
    html = client.get(reverse(QUEUES)).content.decode()
    assert re.findall(r'<tr data-queue="([^"]+)">', html) == ["billing", "mail"]
    mail, billing = _row(html, "mail"), _row(html, "billing")
    assert 'data-state="Paused"' not in mail
    assert ">Claiming<" in mail
    assert ">Paused<" in billing
    assert "1 / ∞" in mail
    assert "0 / 2" in billing
    # The states the queue has jobs in, each linking to them; none for a queue without jobs.
    depth = re.findall(
        r'<a href="([^"]+)" data-testid="bw-queue-depth" data-state="([^"]+)"[^>]*>[^<]*<strong>(\d+)', mail
    )
    by_state = {label: (int(count), href) for href, label, count in depth}
    assert set(by_state) == {str(JobState.SCHEDULED.label), str(JobState.LEASED.label)}
    assert by_state[str(JobState.SCHEDULED.label)][0] == 2
    assert by_state[str(JobState.LEASED.label)][0] == 1
    assert (
        by_state[str(JobState.LEASED.label)][1]
        == "/admin/backwave_django/jobrecord/?queue=mail&amp;state__exact=2"
    )
    assert re.search(r'data-testid="bw-queue-total">3<', mail)
    assert "bw-queue-depth" not in billing


def test_a_viewer_sees_no_controls_and_a_queue_admin_sees_all_of_them(client, login, queues):
    login()
    html = client.get(reverse(QUEUES)).content.decode()
    assert "bw-pause" not in html
    assert "bw-resume" not in html
    assert "bw-set-limit" not in html
    assert 'id="bw-queues-bulk"' not in html
    login("pause_queuesettings")
    html = client.get(reverse(QUEUES)).content.decode()
    assert 'data-testid="bw-pause" data-queue="mail"' in html
    assert 'data-testid="bw-resume" data-queue="billing"' in html
    assert 'data-testid="bw-set-limit" data-queue="mail"' in html
    assert 'id="bw-queues-bulk"' in html


def test_the_page_needs_the_view_permission(client, queues):
    from .conftest import make_staff

    client.force_login(make_staff(view=False))
    assert client.get(reverse(QUEUES)).status_code == 403


def test_the_page_itself_answers_only_get(client, login, queues):
    login("pause_queuesettings")
    assert client.post(reverse(QUEUES), {"action": "x"}).status_code == 405


def test_pausing_a_queue_that_only_has_jobs_creates_its_settings_and_is_audited(client, login, queues):
    user = login("pause_queuesettings")
    response = client.post(reverse("admin:backwave_django_queuesettings_pause", args=["mail"]))
    assert (response.status_code, flashed(response)) == (303, ["Paused (1): mail."])
    assert QueueSettings.objects.get(queue="mail").paused
    assert list(OperatorAudit.objects.values_list("actor", "action", "target")) == [
        (user.username, "pause_queue", "mail")
    ]
    assert LogEntry.objects.get().change_message == "Pause queue"
    client.get(reverse(QUEUES))
    response = client.post(reverse("admin:backwave_django_queuesettings_resume", args=["mail"]))
    assert flashed(response) == ["Resumed (1): mail."]
    assert not QueueSettings.objects.get(queue="mail").paused


def test_bulk_pause_and_resume_name_the_queues(client, login, queues):
    login("pause_queuesettings")
    bulk = reverse("admin:backwave_django_queuesettings_bulk")
    response = client.post(bulk, {"action": "pause", "queue": ["mail", "billing", "mail"]})
    assert flashed(response) == ["Paused (2): mail, billing."]
    assert set(QueueSettings.objects.values_list("queue", "paused")) == {("mail", True), ("billing", True)}
    assert OperatorAudit.objects.count() == 2
    client.get(reverse(QUEUES))
    response = client.post(bulk, {"action": "resume", "queue": ["billing"]})
    assert flashed(response) == ["Resumed (1): billing."]
    client.get(reverse(QUEUES))
    assert flashed(client.post(bulk, {"action": "resume"})) == [
        "No queues were selected; nothing was changed."
    ]
    client.get(reverse(QUEUES))
    assert flashed(client.post(bulk, {"action": "drain", "queue": ["mail"]})) == [
        "Choose Pause or Resume; nothing was changed."
    ]
    assert OperatorAudit.objects.count() == 3


@pytest.mark.parametrize(
    ("posted", "stored", "message"),
    [
        ("5", 5, "Queue “mail” now has a limit of 5."),
        ("0", 0, "Queue “mail” now has a limit of 0: it is blocked, nothing is claimed from it."),
        ("", None, "Queue “mail” now has no limit."),
    ],
)
def test_setting_a_limit(client, login, queues, posted, stored, message):
    login("pause_queuesettings")
    response = client.post(
        reverse("admin:backwave_django_queuesettings_limit", args=["mail"]), {"limit": posted}
    )
    assert (response.status_code, flashed(response)) == (303, [message])
    assert QueueSettings.objects.get(queue="mail").concurrency_limit == stored
    assert OperatorAudit.objects.get().action == "set_concurrency_limit"
    assert LogEntry.objects.get().change_message.startswith("Set concurrency limit")


@pytest.mark.parametrize("posted", ["-1", "abc", "2.5", "99999999999999999999"])
def test_an_invalid_limit_is_a_clear_error_and_changes_nothing(client, login, queues, posted):
    login("pause_queuesettings")
    response = client.post(
        reverse("admin:backwave_django_queuesettings_limit", args=["billing"]), {"limit": posted}
    )
    assert response.status_code == 303
    [message] = flashed(response)
    assert message.startswith("Queue “billing”: The limit must be")
    assert message.endswith("Nothing was changed.")
    assert QueueSettings.objects.get(queue="billing").concurrency_limit == 2
    assert not OperatorAudit.objects.exists()


@pytest.mark.parametrize("queue", ["a/b", "x/pause", "ünï?#%", "7"])
def test_queue_names_with_awkward_characters_round_trip_through_the_urls(client, login, queue):
    login("pause_queuesettings")
    enqueue(queue=queue)
    html = client.get(reverse(QUEUES)).content.decode()
    assert 'data-testid="bw-pause"' in html
    client.post(reverse("admin:backwave_django_queuesettings_pause", args=[queue]))
    client.post(reverse("admin:backwave_django_queuesettings_limit", args=[queue]), {"limit": "3"})
    assert list(QueueSettings.objects.values_list("queue", "paused", "concurrency_limit")) == [
        (queue, True, 3)
    ]


def test_an_overlong_queue_name_is_a_message_not_a_500(client, login):
    login("pause_queuesettings")
    response = client.post(reverse("admin:backwave_django_queuesettings_pause", args=["q" * 300]))
    assert response.status_code == 303
    assert "at most 128 characters" in flashed(response)[0]
    assert not QueueSettings.objects.exists()


def test_queue_names_are_escaped(client, login):
    login("pause_queuesettings")
    enqueue(queue="<script>q()</script>")
    html = client.get(reverse(QUEUES)).content.decode()
    assert "<script>q()" not in html
    assert "&lt;script&gt;q()" in html


@pytest.mark.parametrize("posted", [{}, {"limit_": "5"}, {"queue": "billing"}])
def test_a_limit_post_without_the_limit_field_is_refused_and_changes_nothing(client, login, queues, posted):
    """Only an empty field clears the limit; a POST that lacks the field is malformed, not a clear."""
    login("pause_queuesettings")
    response = client.post(reverse("admin:backwave_django_queuesettings_limit", args=["billing"]), posted)
    assert (response.status_code, flashed(response)) == (
        303,
        ["Queue “billing”: no limit was sent; nothing was changed."],
    )
    assert QueueSettings.objects.get(queue="billing").concurrency_limit == 2
    assert not OperatorAudit.objects.exists()
    assert not LogEntry.objects.exists()
