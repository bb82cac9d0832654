"""``backwave queues`` (counts, pause, resume, limit) and ``backwave schedules`` (list, trigger)."""

from __future__ import annotations

import pytest

from backwave_django import ScheduleSpec, store
from backwave_django.models import JobRecord, OperatorAudit, QueueSettings, RecurringSchedule

from ..conftest import T0, enqueue, lease_one
from .conftest import ACTOR

pytestmark = pytest.mark.django_db(transaction=True)


def test_queues_lists_counts_and_pause_resume_limit_are_audited(cli):
    enqueue(queue="billing")
    enqueue(queue="billing")
    lease_one(enqueue(queue="mail"))

    assert cli("queues", "pause", "billing").returncode == 0
    limited = cli("queues", "limit", "mail", "3")
    assert limited.returncode == 0
    assert "at most 3 Leased jobs" in limited.stdout
    listed = cli("queues", "--json").json()
    assert [(q["queue"], q["paused"], q["concurrency_limit"], q["total"]) for q in listed] == [
        ("billing", True, None, 2),
        ("mail", False, 3, 1),
    ]
    assert listed[0]["counts"] == {
        "scheduled": 2,
        "awaiting_parent": 0,
        "leased": 0,
        "succeeded": 0,
        "cancelled": 0,
        "dead_lettered": 0,
        "quarantined": 0,
    }
    assert listed[1]["counts"]["leased"] == 1

    assert cli("queues", "resume", "billing").returncode == 0
    assert cli("queues", "limit", "mail", "NONE").returncode == 0
    table = cli("queues")
    header, billing, mail = table.lines
    assert header.split() == [
        "QUEUE",
        "PAUSED",
        "LIMIT",
        "SCHEDULED",
        "AWAITING",
        "LEASED",
        "SUCCEEDED",
        "CANCELLED",
        "DEAD-LETTERED",
        "QUARANTINED",
        "TOTAL",
    ]
    assert billing.split() == ["billing", "-", "-", "2", "0", "0", "0", "0", "0", "0", "2"]
    assert mail.split() == ["mail", "-", "-", "0", "0", "1", "0", "0", "0", "0", "1"]
    assert header.index("LEASED") == mail.index("1")  # the columns line up

    assert list(OperatorAudit.objects.order_by("id").values_list("actor", "action", "target")) == [
        (ACTOR, "pause_queue", "billing"),
        (ACTOR, "set_concurrency_limit", "mail"),
        (ACTOR, "resume_queue", "billing"),
        (ACTOR, "set_concurrency_limit", "mail"),
    ]
    assert QueueSettings.objects.get(queue="mail").concurrency_limit is None

    for args in (
        ("queues", "limit", "mail", "-1"),
        ("queues", "limit", "mail", "lots"),
        ("queues", "pause", ""),
    ):
        bad = cli(*args)
        assert bad.returncode == 2, bad
        assert bad.stdout == "", bad
        assert len(bad.stderr.strip().splitlines()) == 1, bad
    assert OperatorAudit.objects.count() == 4


def test_schedules_lists_next_due_and_errors_and_trigger_mints_audited(cli):
    store.upsert_schedule(
        ScheduleSpec(
            schedule_id="nightly",
            cron="0 2 * * *",
            wire_name="nightly-report",
            payload={},
            queue="reports",
            time_zone="Europe/Berlin",
        ),
        now=T0,
    )
    RecurringSchedule.objects.create(
        schedule_id="broken",
        cron="0 0 0 * * *",
        wire_name="x",
        payload={},
        time_zone="Mars/Olympus_Mons",
        cursor=T0,
    )

    listed = cli("schedules", "--json").json()
    assert [row["schedule_id"] for row in listed] == ["broken", "nightly"]
    broken, nightly = listed
    assert broken["next_due"] is None
    assert "Mars/Olympus_Mons" in broken["error"]
    assert nightly["next_due"] == "2026-01-01T01:00:00+00:00"  # 02:00 in Berlin
    assert (nightly["wire_name"], nightly["queue"], nightly["time_zone"], nightly["error"]) == (
        "nightly-report",
        "reports",
        "Europe/Berlin",
        None,
    )
    table = cli("schedules")
    assert table.lines[0].split()[:2] == ["SCHEDULE", "CRON"]
    assert "2026-01-01T01:00:00Z" in table.lines[2]

    triggered = cli("schedules", "trigger", "nightly")
    assert triggered.returncode == 0, triggered
    assert JobRecord.objects.filter(schedule_id="nightly").count() == 1
    missing = cli("schedules", "trigger", "weekly")
    assert missing.returncode == 1
    assert "No schedule 'weekly'" in missing.stderr
    assert list(OperatorAudit.objects.values_list("actor", "action", "target")) == [
        (ACTOR, "trigger_schedule", "nightly")
    ]


def test_a_queue_nothing_uses_exits_2_naming_it_and_creates_nothing_without_create(cli):
    # "billing" is a declared job's queue (tests/jobsapp); "biling" is a typo of it.
    for args in (
        ("queues", "pause", "biling"),
        ("queues", "resume", "biling"),
        ("queues", "limit", "biling", "3"),
    ):
        refused = cli(*args)
        assert (refused.returncode, refused.stdout) == (2, ""), refused
        # The last line: on MariaDB, Django's own system-check warnings come first.
        assert refused.stderr.strip().splitlines()[-1] == (
            "backwave queues: no declared job, schedule or stored job uses queue 'biling'; did you mean "
            f"'billing'? Nothing was changed; pass --create to {args[1]} it anyway (its settings then wait "
            "for jobs to arrive)."
        )
    assert not QueueSettings.objects.exists()
    assert not OperatorAudit.objects.exists()

    created = cli("queues", "pause", "biling", "--create")
    assert created.returncode == 0, created
    assert QueueSettings.objects.get(queue="biling").paused
    assert cli("queues", "pause", "billing").returncode == 0  # a declared job's queue needs no flag


@pytest.mark.parametrize("queue", ["bad queue!", "a,b"])
def test_a_queue_name_that_breaks_the_rule_exits_2_with_the_rule_even_with_create(cli, queue):
    refused = cli("queues", "pause", queue, "--create")
    assert (refused.returncode, refused.stdout) == (2, ""), refused
    assert "is not a valid queue name: a queue name is 1 to 128 characters" in refused.stderr
    assert cli("queues", "remove", queue).returncode == 2
    assert not QueueSettings.objects.exists()


def test_queues_remove_deletes_the_settings_of_a_queue_without_jobs_and_refuses_one_with_jobs(cli):
    store.pause_queue("typo", actor="setup", now=T0)
    enqueue(queue="mail")
    store.pause_queue("mail", actor="setup", now=T0)
    OperatorAudit.objects.all().delete()

    removed = cli("queues", "remove", "typo")
    assert removed.returncode == 0, removed
    assert removed.stdout.strip() == (
        f"Removed the settings of queue 'typo': no pause flag, no limit. (audited as {ACTOR})"
    )
    kept = cli("queues", "remove", "mail")
    assert (kept.returncode, kept.stdout) == (1, ""), kept
    assert "Queue 'mail' holds jobs, so its settings stay" in kept.stderr
    missing = cli("queues", "remove", "typo")
    assert missing.returncode == 1, missing
    assert "has no stored settings; nothing to remove" in missing.stderr

    assert list(QueueSettings.objects.values_list("queue", flat=True)) == ["mail"]
    assert list(OperatorAudit.objects.values_list("actor", "action", "target")) == [
        (ACTOR, "remove_queue", "typo")
    ]
    assert [row["queue"] for row in cli("queues", "--json").json()] == ["mail"]
