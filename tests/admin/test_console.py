"""The admin console: permissions, forged posts, result messages, escaping, the sensitive gate."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.admin.models import LogEntry
from django.contrib.auth.models import User
from django.urls import reverse
from django.utils import timezone

from backwave_django import Failure, JobState, store
from backwave_django.models import JobRecord, OperatorAudit, RecurringSchedule

from ..conftest import LEASE, enqueue, report
from .conftest import make_staff

pytestmark = pytest.mark.django_db

JOBS = "admin:backwave_django_jobrecord_changelist"


def _user(*codenames: str) -> User:
    return make_staff(*codenames)


@pytest.fixture
def jobs():
    """A scheduled job and a dead-lettered one, at the real clock (the admin acts on it)."""
    now = timezone.now()
    pending = enqueue(now=now, due_time=now + timedelta(hours=1))
    dead = enqueue(now=now, queue="q2", payload={"args": ["<script>alert(1)</script>"], "kwargs": {}})
    store.claim(worker_id="w", queues=["q2"], max_jobs=1, lease_duration=LEASE, now=now)
    report(
        dead,
        Failure(next_due_time=None, error="<b>boom</b>"),
        now=now,
        worker="w",
        failure_detail="<script>x</script>",
    )
    return pending, dead


def _post_action(client, action, ids):
    return client.post(
        reverse(JOBS),
        {"action": action, "_selected_action": [str(JobRecord.objects.get(job_id=i).pk) for i in ids]},
    )


def test_a_view_only_user_sees_no_actions_and_a_forged_post_changes_nothing(client, jobs):
    pending, dead = jobs
    client.force_login(_user())
    page = client.get(reverse(JOBS))
    assert page.status_code == 200
    assert b"cancel_selected_jobs" not in page.content
    assert b"requeue_selected_jobs" not in page.content
    for action in ("cancel_selected_jobs", "requeue_selected_jobs", "delete_selected"):
        response = _post_action(client, action, [pending, dead])
        assert response.status_code < 500
    assert JobRecord.objects.get(job_id=pending).state == JobState.SCHEDULED
    assert JobRecord.objects.get(job_id=dead).state == JobState.DEAD_LETTERED
    assert not OperatorAudit.objects.exists()


@pytest.mark.parametrize(
    ("codename", "visible", "hidden"),
    [
        ("cancel_jobrecord", "cancel_selected_jobs", "requeue_selected_jobs"),
        ("requeue_jobrecord", "requeue_selected_jobs", "cancel_selected_jobs"),
    ],
)
def test_each_permission_enables_exactly_its_action(client, jobs, codename, visible, hidden):
    client.force_login(_user(codename))
    page = client.get(reverse(JOBS)).content
    assert visible.encode() in page
    assert hidden.encode() not in page


def test_cancel_names_each_job_under_its_result_and_audits_with_the_username(client, jobs):
    pending, dead = jobs
    user = _user("cancel_jobrecord")
    client.force_login(user)
    response = _post_action(client, "cancel_selected_jobs", [pending, dead])
    assert response.status_code == 302
    messages = [str(m) for m in client.get(reverse(JOBS)).context["messages"]]
    pending_pk, dead_pk = (JobRecord.objects.get(job_id=job_id).pk for job_id in (pending, dead))
    assert messages == [
        f'Cancelled immediately (1): <a href="/admin/backwave_django/jobrecord/{pending_pk}/change/">'
        f"send-invoice <code>…{pending.hex[-8:]}</code></a>. "
        f'Not cancellable (1): <a href="/admin/backwave_django/jobrecord/{dead_pk}/change/">'
        f"send-invoice <code>…{dead.hex[-8:]}</code></a>."
    ]
    record = JobRecord.objects.get(job_id=pending)
    assert (record.state, record.terminal_cause) == (JobState.CANCELLED, user.username)
    assert list(OperatorAudit.objects.values_list("actor", "action", "target")) == [
        (user.username, "cancel", str(pending))
    ]
    assert LogEntry.objects.filter(user=user).count() == 2


def test_requeue_from_the_console(client, jobs):
    _, dead = jobs
    client.force_login(_user("requeue_jobrecord"))
    _post_action(client, "requeue_selected_jobs", [dead])
    assert JobRecord.objects.get(job_id=dead).state == JobState.SCHEDULED


def test_job_rows_cannot_be_added_changed_or_deleted(client, jobs):
    pending, _ = jobs
    admin = User.objects.create_superuser("root", "root@example.com", None)
    client.force_login(admin)
    pk = JobRecord.objects.get(job_id=pending).pk
    assert client.get(reverse("admin:backwave_django_jobrecord_add")).status_code == 403
    response = client.post(
        reverse("admin:backwave_django_jobrecord_change", args=[pk]), {"queue": "hijacked"}
    )
    assert response.status_code == 403
    assert JobRecord.objects.get(job_id=pending).queue == "default"
    assert client.get(reverse("admin:backwave_django_jobrecord_delete", args=[pk])).status_code == 403


def test_everything_shown_is_escaped(client, jobs):
    _, dead = jobs
    client.force_login(User.objects.create_superuser("root", "root@example.com", None))
    pk = JobRecord.objects.get(job_id=dead).pk
    detail = client.get(reverse("admin:backwave_django_jobrecord_change", args=[pk])).content
    assert b"<script>alert(1)" not in detail  # payload
    assert b"<script>x</script>" not in detail  # failure detail
    assert b"&lt;script&gt;" in detail
    assert b"<b>boom</b>" not in detail  # terminal cause
    assert b"&lt;b&gt;boom&lt;/b&gt;" in detail


def test_sensitive_content_needs_its_permission_and_the_kill_switch_off(client, jobs, monkeypatch):
    _, dead = jobs
    pk = JobRecord.objects.get(job_id=dead).pk
    url = reverse("admin:backwave_django_jobrecord_change", args=[pk])
    client.force_login(_user())
    page = client.get(url).content.decode()
    assert "alert(1)" not in page  # payload hidden
    assert "script&gt;x" not in page  # failure detail hidden
    assert "Hidden: needs the" in page
    client.force_login(_user("view_sensitive_jobrecord"))
    page = client.get(url).content.decode()
    assert "alert(1)" in page  # escaped, but shown
    assert "&lt;script&gt;x&lt;/script&gt;" in page  # failure detail
    monkeypatch.setenv("BACKWAVE_DISABLE_SENSITIVE_DATA", "TRUE")
    page = client.get(url).content.decode()
    assert "alert(1)" not in page


def test_schedules_are_triggered_with_their_permission(client):
    from backwave_django import ScheduleSpec

    store.upsert_schedule(
        ScheduleSpec(
            schedule_id="nightly", cron="0 2 * * *", wire_name="test.echo", payload={"args": [], "kwargs": {}}
        ),
        now=timezone.now(),
    )
    url = reverse("admin:backwave_django_recurringschedule_changelist")
    pk = RecurringSchedule.objects.get().pk
    client.force_login(_user())
    client.post(url, {"action": "trigger_selected_schedules_now", "_selected_action": [str(pk)]})
    assert not JobRecord.objects.filter(schedule_id="nightly").exists()
    client.force_login(_user("trigger_recurringschedule"))
    client.post(url, {"action": "trigger_selected_schedules_now", "_selected_action": [str(pk)]})
    assert JobRecord.objects.filter(schedule_id="nightly").count() == 1


def test_search_by_job_id_and_by_wire_name(client, jobs):
    pending, _ = jobs
    client.force_login(_user())
    page = client.get(reverse(JOBS), {"q": str(pending)})
    assert page.context["cl"].result_count == 1
    page = client.get(reverse(JOBS), {"q": "send-inv"})
    assert page.context["cl"].result_count == 2
