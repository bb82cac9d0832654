"""Per-object operator buttons: POST only, CSRF, one permission each, counted messages, audit + LogEntry.

The permission matrix: a view-only staff user sees no button and a forged POST answers 403 and
changes nothing; each permission shows and enables exactly its own buttons.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.admin.models import LogEntry
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from backwave_django import Failure, JobState, ScheduleSpec, store
from backwave_django.models import JobRecord, OperatorAudit, QueueSettings, RecurringSchedule

from ..conftest import LEASE, enqueue, report
from .conftest import flashed, make_staff, named

pytestmark = pytest.mark.django_db

BUTTON_IDS = (
    "bw-cancel",
    "bw-requeue",
    "bw-retry-now",
    "bw-trigger",
    "bw-pause",
    "bw-resume",
    "bw-set-limit",
)


@pytest.fixture
def world():
    """A pending job, a dead-lettered job, a job waiting for a retry, a schedule and a queue with
    jobs but no settings row."""
    now = timezone.now()
    pending = enqueue(now=now, due_time=now + timedelta(hours=1), queue="mail")
    dead = enqueue(now=now, queue="q2")
    store.claim(worker_id="w", queues=["q2"], max_jobs=1, lease_duration=LEASE, now=now)
    report(dead, Failure(next_due_time=None, error="boom"), now=now, worker="w")
    waiting = enqueue(now=now, queue="q3")
    store.claim(worker_id="w", queues=["q3"], max_jobs=1, lease_duration=LEASE, now=now)
    report(waiting, Failure(next_due_time=now + timedelta(hours=1), error="boom"), now=now, worker="w")
    store.upsert_schedule(
        ScheduleSpec(
            schedule_id="nightly", cron="0 2 * * *", wire_name="test.echo", payload={"args": [], "kwargs": {}}
        ),
        now=now,
    )
    pk = {job_id: JobRecord.objects.get(job_id=job_id).pk for job_id in (pending, dead, waiting)}
    schedule_pk = RecurringSchedule.objects.get(schedule_id="nightly").pk
    return {
        "pending": pending,
        "dead": dead,
        "waiting": waiting,
        "pages": {
            "pending": reverse("admin:backwave_django_jobrecord_change", args=[pk[pending]]),
            "dead": reverse("admin:backwave_django_jobrecord_change", args=[pk[dead]]),
            "waiting": reverse("admin:backwave_django_jobrecord_change", args=[pk[waiting]]),
            "schedule": reverse("admin:backwave_django_recurringschedule_change", args=[schedule_pk]),
            "queues": reverse("admin:backwave_django_queuesettings_changelist"),
        },
        "posts": {
            "cancel": reverse("admin:backwave_django_jobrecord_cancel", args=[pk[pending]]),
            "requeue": reverse("admin:backwave_django_jobrecord_requeue", args=[pk[dead]]),
            "retry-now": reverse("admin:backwave_django_jobrecord_retry_now", args=[pk[waiting]]),
            "trigger": reverse("admin:backwave_django_recurringschedule_trigger", args=[schedule_pk]),
            "pause": reverse("admin:backwave_django_queuesettings_pause", args=["mail"]),
            "resume": reverse("admin:backwave_django_queuesettings_resume", args=["mail"]),
            "limit": reverse("admin:backwave_django_queuesettings_limit", args=["mail"]),
            "bulk": reverse("admin:backwave_django_queuesettings_bulk"),
        },
    }


def _buttons_seen(client, world) -> set[str]:
    html = "".join(client.get(url).content.decode() for url in world["pages"].values())
    return {testid for testid in BUTTON_IDS if f'data-testid="{testid}"' in html}


def _state() -> tuple:
    """Everything an operator action could change."""
    return (
        sorted(JobRecord.objects.values_list("job_id", "state", "cancel_requested", "due_time")),
        sorted(QueueSettings.objects.values_list("queue", "paused", "concurrency_limit")),
        OperatorAudit.objects.count(),
    )


@pytest.mark.parametrize(
    ("codename", "buttons"),
    [
        (None, set()),
        ("cancel_jobrecord", {"bw-cancel"}),
        ("requeue_jobrecord", {"bw-requeue", "bw-retry-now"}),
        ("trigger_recurringschedule", {"bw-trigger"}),
        ("pause_queuesettings", {"bw-pause", "bw-set-limit"}),
        ("view_sensitive_jobrecord", set()),
    ],
)
def test_each_permission_shows_exactly_its_buttons(client, login, world, codename, buttons):
    login(*([codename] if codename else []))
    assert _buttons_seen(client, world) == buttons


ALLOWED_BY = {
    "cancel": "cancel_jobrecord",
    "requeue": "requeue_jobrecord",
    "retry-now": "requeue_jobrecord",
    "trigger": "trigger_recurringschedule",
    "pause": "pause_queuesettings",
    "resume": "pause_queuesettings",
    "limit": "pause_queuesettings",
    "bulk": "pause_queuesettings",
}
FORGED = {"limit": {"limit": "3"}, "bulk": {"action": "pause", "queue": ["mail"]}}


@pytest.mark.parametrize("codename", [None, *sorted(set(ALLOWED_BY.values())), "view_sensitive_jobrecord"])
def test_a_forged_post_without_the_permission_is_403_and_changes_nothing(client, login, world, codename):
    login(*([codename] if codename else []))
    before = _state()
    for action, url in world["posts"].items():
        if ALLOWED_BY[action] == codename:
            continue
        response = client.post(url, FORGED.get(action, {}))
        assert response.status_code == 403, action
    assert _state() == before
    assert not LogEntry.objects.exists()


@pytest.mark.parametrize("action", sorted(ALLOWED_BY))
def test_buttons_answer_only_post(client, login, world, action):
    login(ALLOWED_BY[action])
    before = _state()
    assert client.get(world["posts"][action]).status_code == 405
    assert _state() == before


@pytest.mark.parametrize("action", sorted(ALLOWED_BY))
def test_a_post_without_a_csrf_token_is_refused_even_with_the_permission(world, action):
    client = Client(enforce_csrf_checks=True)
    client.force_login(make_staff(ALLOWED_BY[action]))
    before = _state()
    response = client.post(world["posts"][action], FORGED.get(action, {}))
    assert response.status_code == 403
    assert _state() == before


def test_anonymous_posts_are_sent_to_the_login_page(client, world):
    before = _state()
    for url in world["posts"].values():
        response = client.post(url)
        assert response.status_code == 302
        assert "/login/" in response["Location"]
    assert _state() == before


def test_cancel_button_cancels_audits_logs_and_counts(client, login, world):
    user = login("cancel_jobrecord")
    response = client.post(world["posts"]["cancel"])
    assert response.status_code == 303
    assert response["Location"] == world["pages"]["pending"]
    assert flashed(response) == [f"Cancelled immediately (1): {named(world['pending'])}."]
    record = JobRecord.objects.get(job_id=world["pending"])
    assert (record.state, record.terminal_cause) == (JobState.CANCELLED, user.username)
    assert list(OperatorAudit.objects.values_list("actor", "action", "target")) == [
        (user.username, "cancel", str(world["pending"]))
    ]
    entry = LogEntry.objects.get()
    assert (entry.user_id, entry.object_id, entry.change_message) == (
        user.pk,
        str(record.pk),
        "Cancel: cancelled immediately",
    )
    # The button is gone once the job is terminal; a second POST is counted, not an error.
    assert 'data-testid="bw-cancel"' not in client.get(world["pages"]["pending"]).content.decode()
    assert flashed(client.post(world["posts"]["cancel"])) == [f"Not cancellable (1): {named(world['pending'])}."]
    assert OperatorAudit.objects.count() == 1


def test_cancel_of_a_running_job_asks_first_then_requests_cancellation(client, login):
    now = timezone.now()
    running = enqueue(now=now, queue="run")
    store.claim(worker_id="w", queues=["run"], max_jobs=1, lease_duration=LEASE, now=now)
    login("cancel_jobrecord")
    pk = JobRecord.objects.get(job_id=running).pk
    url = reverse("admin:backwave_django_jobrecord_cancel", args=[pk])
    # The button's POST answers with a confirmation page and changes nothing ...
    page = client.post(url)
    assert page.status_code == 200
    html = page.content.decode()
    assert 'data-testid="bw-confirm-cancel-running"' in html
    assert "is running now" in html
    assert '<input type="hidden" name="confirm" value="yes">' in html
    assert not JobRecord.objects.get(job_id=running).cancel_requested
    assert not OperatorAudit.objects.exists()
    # ... and the confirmation's POST cancels.
    response = client.post(url, {"confirm": "yes"})
    assert flashed(response) == [f"Cancellation requested (1): {named(running)}."]
    assert JobRecord.objects.get(job_id=running).cancel_requested
    assert OperatorAudit.objects.count() == 1


def test_requeue_button_requeues_and_audits(client, login, world):
    user = login("requeue_jobrecord")
    response = client.post(world["posts"]["requeue"])
    assert (response.status_code, flashed(response)) == (303, [f"Requeued (1): {named(world['dead'])}."])
    record = JobRecord.objects.get(job_id=world["dead"])
    assert (record.state, record.attempt) == (JobState.SCHEDULED, 0)
    assert OperatorAudit.objects.get().actor == user.username
    assert LogEntry.objects.get().user_id == user.pk
    assert 'data-testid="bw-requeue"' not in client.get(world["pages"]["dead"]).content.decode()
    assert flashed(client.post(world["posts"]["requeue"])) == [f"Not requeueable (1): {named(world['dead'])}."]


def test_trigger_button_mints_one_instance(client, login, world):
    user = login("trigger_recurringschedule")
    response = client.post(world["posts"]["trigger"])
    assert (response.status_code, response["Location"]) == (303, world["pages"]["schedule"])
    assert flashed(response) == ["Triggered (1): nightly (its instances)."]
    assert JobRecord.objects.filter(schedule_id="nightly").count() == 1
    assert list(OperatorAudit.objects.values_list("actor", "action", "target")) == [
        (user.username, "trigger_schedule", "nightly")
    ]
    assert LogEntry.objects.get().change_message == "Trigger now: triggered"


@pytest.mark.parametrize(
    ("name", "unknown"),
    [
        ("admin:backwave_django_jobrecord_cancel", "999999"),
        ("admin:backwave_django_jobrecord_requeue", "not-a-job"),
        ("admin:backwave_django_jobrecord_retry_now", "123456"),
        ("admin:backwave_django_recurringschedule_trigger", "424242"),
    ],
)
def test_unknown_ids_get_a_clear_message_never_a_500(client, world, name, unknown):
    client.force_login(make_staff(*set(ALLOWED_BY.values())))
    before = _state()
    response = client.post(reverse(name, args=[unknown]))
    assert response.status_code == 303
    assert flashed(response)[0].startswith("No ")
    assert "nothing was" in flashed(response)[0]
    assert _state() == before


def test_the_console_button_gate_checks_method_then_permission_before_the_view_runs(rf):
    """``console_button``: anything but POST is 405 and a POST without the permission is 403, and in
    neither case does the view run; with the permission the view answers."""
    from django.contrib.auth.models import AnonymousUser
    from django.core.exceptions import PermissionDenied
    from django.http import HttpResponse

    from backwave_django.admin.console import CANCEL_PERMISSION, console_button

    ran = []

    class Page:
        @console_button(permission=CANCEL_PERMISSION)
        def button_view(self, request, object_id):
            ran.append(object_id)
            return HttpResponse("acted")

    def request(method, user):
        built = getattr(rf, method)("/")
        built.user = user
        return built

    allowed = make_staff("cancel_jobrecord")
    assert Page().button_view(request("get", allowed), "1").status_code == 405
    with pytest.raises(PermissionDenied):
        Page().button_view(request("post", make_staff()), "2")
    with pytest.raises(PermissionDenied):
        Page().button_view(request("post", AnonymousUser()), "3")
    assert ran == []
    assert Page().button_view(request("post", allowed), "4").content == b"acted"
    assert ran == ["4"]
