"""The Queues page and queues nothing uses: a confirmation before settings are stored for one, the
rule for a bad name, and Remove settings for a settings row of a queue that holds no jobs."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse
from django.utils import timezone

from backwave_django import store
from backwave_django.models import OperatorAudit, QueueSettings

from ..conftest import enqueue
from .conftest import flashed

pytestmark = pytest.mark.django_db

QUEUES = "admin:backwave_django_queuesettings_changelist"


def _url(action: str, queue: str) -> str:
    return reverse(f"admin:backwave_django_queuesettings_{action}", args=[queue])


@pytest.mark.parametrize(
    ("action", "posted", "submit"),
    [
        ("pause", {}, "Yes, pause “biling” anyway"),
        ("resume", {}, "Yes, resume “biling” anyway"),
        ("limit", {"limit": "4"}, "Yes, set the limit of “biling” anyway"),
    ],
)
def test_a_queue_nothing_uses_asks_for_confirmation_naming_why_and_changes_nothing(
    client, login, action, posted, submit
):
    login("pause_queuesettings")
    response = client.post(_url(action, "biling"), posted)
    assert response.status_code == 200
    html = response.content.decode()
    assert 'data-testid="bw-confirm-unused-queue"' in html
    assert "No declared job, schedule or stored job uses queue &#x27;biling&#x27;; did you mean" in html
    assert "&#x27;billing&#x27;?</p>" in html
    assert submit in html
    assert '<input type="hidden" name="create" value="yes">' in html
    assert f'action="{_url(action, "biling")}"' in html
    assert not QueueSettings.objects.exists()
    assert not OperatorAudit.objects.exists()

    confirmed = client.post(_url(action, "biling"), {**posted, "create": "yes"})
    assert confirmed.status_code == 303
    settings = QueueSettings.objects.get(queue="biling")
    assert (settings.paused, settings.concurrency_limit) == (
        action == "pause",
        4 if action == "limit" else None,
    )
    assert OperatorAudit.objects.count() == 1


def test_a_bulk_action_with_a_queue_nothing_uses_changes_none_of_them(client, login):
    login("pause_queuesettings")
    enqueue(queue="mail")
    store.pause_queue("typo", actor="setup", now=timezone.now())
    response = client.post(
        reverse("admin:backwave_django_queuesettings_bulk"), {"action": "resume", "queue": ["mail", "typo"]}
    )
    assert response.status_code == 303
    assert flashed(response) == [
        "Queue “typo”: no declared job, schedule or stored job uses queue 'typo'; nothing was changed. "
        "Use its own Resume button to confirm."
    ]
    assert QueueSettings.objects.get(queue="typo").paused
    assert not QueueSettings.objects.filter(queue="mail").exists()
    assert OperatorAudit.objects.filter(actor="setup").count() == OperatorAudit.objects.count()


@pytest.mark.parametrize("queue", ["bad queue!", "a,b", "x=1"])
def test_a_name_that_breaks_the_rule_is_refused_with_the_rule_even_when_confirmed(client, login, queue):
    login("pause_queuesettings")
    for action, posted in (
        ("pause", {"create": "yes"}),
        ("limit", {"limit": "1", "create": "yes"}),
        ("remove", {}),
    ):
        response = client.post(_url(action, queue), posted)
        assert response.status_code == 303
        (message,) = flashed(response)
        assert "is not a valid queue name: a queue name is 1 to 128 characters" in message
        assert message.endswith("nothing was changed.")
        client.get(reverse(QUEUES))  # shows (and so consumes) the message
    assert not QueueSettings.objects.exists()
    assert not OperatorAudit.objects.exists()


def test_an_unused_settings_row_is_marked_and_can_be_removed_audited(client, login):
    user = login("pause_queuesettings")
    now = timezone.now()
    store.pause_queue("typo", actor="setup", now=now)
    store.pause_queue("billing", actor="setup", now=now)  # a declared job's queue, no jobs
    enqueue(queue="mail")
    store.pause_queue("mail", actor="setup", now=now)
    html = client.get(reverse(QUEUES)).content.decode()
    rows = dict(re.findall(r'<tr data-queue="([^"]+)">(.*?)</tr>', html, re.S))
    assert 'data-testid="bw-queue-unused"' in rows["typo"]
    assert "bw-queue-unused" not in rows["billing"]
    assert "bw-queue-unused" not in rows["mail"]
    assert 'data-testid="bw-remove-queue" data-queue="typo"' in rows["typo"]
    assert 'data-testid="bw-remove-queue" data-queue="billing"' in rows["billing"]
    assert "bw-remove-queue" not in rows["mail"]  # it holds a job

    response = client.post(_url("remove", "typo"))
    assert (response.status_code, flashed(response)) == (
        303,
        ["Removed the settings of queue “typo”: no pause flag, no limit."],
    )
    assert not QueueSettings.objects.filter(queue="typo").exists()
    assert OperatorAudit.objects.filter(action="remove_queue").values_list("actor", "target").get() == (
        user.username,
        "typo",
    )
    client.get(reverse(QUEUES))
    refused = client.post(_url("remove", "mail"))
    assert flashed(refused) == [
        "Queue “mail” holds jobs, so its settings stay: remove them once it holds none."
    ]
    assert QueueSettings.objects.filter(queue="mail").exists()
    client.get(reverse(QUEUES))
    again = client.post(_url("remove", "typo"))
    assert flashed(again) == ["Queue “typo” has no stored settings; nothing was removed."]
    assert OperatorAudit.objects.filter(action="remove_queue").count() == 1


def test_remove_needs_the_pause_permission_and_a_post(client, login):
    store.pause_queue("typo", actor="setup", now=timezone.now())
    login()
    assert client.post(_url("remove", "typo")).status_code == 403
    login("pause_queuesettings")
    assert client.get(_url("remove", "typo")).status_code == 405
    assert QueueSettings.objects.filter(queue="typo").exists()
