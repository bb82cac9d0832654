"""``manage.py backwave_demo``: a realistic mix in every state, with real transition logs."""

from __future__ import annotations

import io
import re

import pytest
from backwave_django import JobState, WorkflowStatus, store
from backwave_django.models import JobRecord, JobTransition, OperatorAudit, QueueSettings, RecurringSchedule
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.test import Client

from shop import jobs
from shop.demo import CRASHED_WORKER, state_counts

pytestmark = pytest.mark.django_db

PASSWORD = re.compile(r"^Admin user: admin  password: (\S+)$", re.MULTILINE)


def seed(*args: str) -> str:
    out = io.StringIO()
    call_command("backwave_demo", *args, stdout=out)
    return out.getvalue()


def test_default_seed_stores_thousands_of_jobs_in_every_state():
    output = seed()
    counts = state_counts()
    assert sum(counts.values()) >= 2_500
    assert all(counts[state] > 0 for state in JobState), counts
    assert counts[JobState.SUCCEEDED] > sum(counts.values()) // 2
    assert f"Jobs by state ({sum(counts.values()):,} in all):" in output
    for state, count in counts.items():
        assert re.search(rf"^  {state.label} +{count:,}$", output, re.MULTILINE), state


def test_seeded_transition_logs_tell_what_happened_to_each_job():
    seed("--hours", "0.5", "--orders", "200", "--live-orders", "10")
    causes = set(
        JobRecord.objects.filter(state=JobState.DEAD_LETTERED).values_list("terminal_cause", flat=True)
    )
    assert any((cause or "").endswith("card declined (insufficient funds)") for cause in causes)
    quarantined = set(
        JobRecord.objects.filter(state=JobState.QUARANTINED).values_list("terminal_cause", flat=True)
    )
    assert quarantined == {
        "payload for wire name 'send-welcome-email' no longer decodes: missing a required argument: 'customer_id'"
    }
    cancelled = set(
        JobRecord.objects.filter(state=JobState.CANCELLED).values_list("terminal_cause", flat=True)
    )
    assert {
        "alice",
        "operator-cancel",
        "parent-failure:Cancelled",
        "parent-failure:DeadLettered",
    } <= cancelled
    log_actors = set(JobTransition.objects.values_list("actor", flat=True))
    assert {"enqueue", "schedule:exchange-rates", "alice", "bob"} <= log_actors
    assert any(actor.startswith("cascade:") for actor in log_actors)
    retried = JobRecord.objects.filter(state=JobState.SUCCEEDED, attempt__gt=1)
    assert retried.filter(wire_name="sync-exchange-rates").exists()
    assert retried.filter(wire_name="charge-order").exists()
    assert set(JobRecord.objects.filter(state=JobState.LEASED).values_list("lease_owner", flat=True)) == {
        CRASHED_WORKER
    }
    assert set(OperatorAudit.objects.values_list("action", flat=True)) == {"cancel", "requeue", "pause_queue"}
    assert QueueSettings.objects.get(queue="exports").paused
    assert set(RecurringSchedule.objects.values_list("schedule_id", flat=True)) == {
        "exchange-rates",
        "nightly-sales-report",
    }


def test_seeded_catalogue_imports_are_workflows_done_failed_and_running():
    seed("--hours", "0.5", "--orders", "40", "--live-orders", "0")
    statuses = {summary.name: summary.status for summary in store.list_workflows()}
    yesterday, today = (jobs.resolve_day(day) for day in ("yesterday", "today"))
    assert statuses == {
        **{jobs.catalogue_import_name(s, yesterday): WorkflowStatus.SUCCEEDED for s in jobs.SUPPLIERS[:-1]},
        jobs.catalogue_import_name(jobs.SUPPLIERS[-1], yesterday): WorkflowStatus.FAILED,
        **{jobs.catalogue_import_name(s, today): WorkflowStatus.RUNNING for s in jobs.SUPPLIERS},
    }
    failed = JobRecord.objects.filter(wire_name="resize-product-images", state=JobState.DEAD_LETTERED)
    assert failed.count() == 1
    assert JobRecord.objects.get(
        wire_name="publish-catalogue", state=JobState.CANCELLED
    ).terminal_cause == "parent-failure:DeadLettered"
    # A second seed leaves today's imports alone: their workflow ids are taken.
    seed("--hours", "0.5", "--orders", "40", "--live-orders", "0")
    assert len(store.list_workflows()) == 6


def test_seed_creates_an_admin_whose_printed_password_logs_in():
    output = seed("--hours", "0.2", "--orders", "20", "--live-orders", "0")
    [password] = PASSWORD.findall(output)
    client = Client()
    assert client.login(username="admin", password=password)
    assert client.get("/admin/backwave_django/jobrecord/").status_code == 200


def test_reseeding_keeps_the_admin_and_does_not_replay_the_history():
    seed("--hours", "0.2", "--orders", "20", "--live-orders", "5")
    history = JobRecord.objects.filter(
        enqueued_at__lt=JobRecord.objects.order_by("-enqueued_at")[0].enqueued_at
    )
    before = history.count()
    output = seed("--hours", "0.2", "--orders", "20", "--live-orders", "5")
    assert get_user_model().objects.filter(username="admin").count() == 1
    assert "password: unchanged" in output
    assert "history not seeded again" in output
    assert history.count() == before


@pytest.mark.django_db(transaction=True)  # flush truncates tables: not inside a test's transaction
def test_reset_flushes_the_database_and_creates_a_new_admin():
    first = PASSWORD.findall(seed("--hours", "0.2", "--orders", "20", "--live-orders", "0"))
    output = seed("--reset", "--hours", "0.2", "--orders", "20", "--live-orders", "0")
    second = PASSWORD.findall(output)
    assert first
    assert second
    assert first != second
    assert "hours of history in" in output
    assert get_user_model().objects.filter(username="admin").count() == 1


def test_out_of_range_options_are_refused():
    from django.core.management.base import CommandError

    with pytest.raises(CommandError, match="--orders"):
        seed("--orders", "-1")
    with pytest.raises(CommandError, match="--hours"):
        seed("--hours", "24")
