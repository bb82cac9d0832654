"""``backwave purge`` and ``backwave stats``, and what bad usage gets: status 2, one line, no traceback."""

from __future__ import annotations

import re

import pytest
from django.utils import timezone

from backwave_django import Failure, JobState, store
from backwave_django.models import JobRecord, OperatorAudit

from ..conftest import enqueue, lease_one, report
from .conftest import ACTOR

pytestmark = pytest.mark.django_db(transaction=True)


def succeed(now=None, **fields):
    job = enqueue(**fields)
    if now is None:
        lease_one(job)
        report(job)
    else:
        lease_one(job, now=now)
        report(job, now=now)
    return job


def dead_letter(now=None, **fields):
    job = enqueue(max_attempts=1, **fields)
    kw = {} if now is None else {"now": now}
    lease_one(job, **kw)
    report(job, Failure(next_due_time=None, error="boom"), **kw)
    return job


def test_purge_dry_run_counts_and_purge_deletes_in_batches_audited_once(cli):
    cli.settings = {
        "RETENTION": {"SUCCEEDED_OR_CANCELLED": 3600, "DEAD_LETTERED_OR_QUARANTINED": None},
        "MAX_PURGE_BATCH": 2,
    }
    old = [succeed(queue=f"q{n}") for n in range(5)]  # ended 2026-01-01, long past an hour
    recent = succeed(now=timezone.now(), queue="recent")
    kept = dead_letter(queue="dead")

    dry = cli("purge", "--dry-run", "--json").json()
    assert dry["dry_run"] is True
    assert dry["jobs"] == 5
    assert [(c["state_class"], c["retention_seconds"], c["jobs"]) for c in dry["classes"]] == [
        ("succeeded_or_cancelled", 3600.0, 5),
        ("dead_lettered_or_quarantined", None, 0),
    ]
    assert JobRecord.objects.count() == 7
    assert OperatorAudit.objects.count() == 0

    purged = cli("purge")
    assert purged.returncode == 0, purged
    assert purged.lines[0].startswith("Succeeded or Cancelled: purged 5 jobs that ended at or before ")
    assert "(RETENTION 1h 00m)" in purged.lines[0]
    assert purged.lines[1] == "Dead-Lettered or Quarantined: kept forever (RETENTION is None), nothing purged"
    assert purged.lines[2] == f"Purged 5 jobs (audited as {ACTOR})."
    # Progress on stderr, one line per batch of MAX_PURGE_BATCH.
    assert re.findall(r"purged so far", purged.stderr)
    assert "5 purged so far" in purged.stderr
    assert not JobRecord.objects.filter(job_id__in=old).exists()
    assert set(JobRecord.objects.values_list("job_id", flat=True)) == {recent, kept}
    assert list(OperatorAudit.objects.values_list("actor", "action", "target")) == [
        (ACTOR, "purge", "5 jobs (succeeded_or_cancelled 5, dead_lettered_or_quarantined 0)")
    ]


def test_stats_reports_counts_latency_workers_and_dead_letters_of_the_last_hour(cli):
    now = timezone.now()
    enqueue(queue="billing")
    enqueue(queue="billing")
    dead_letter(now=now, queue="mail")
    dead_letter(queue="mail")  # dead-lettered on 2026-01-01: not in the last hour
    store.register_worker(
        worker_id="host-a:1:abc", hostname="host-a", pid=1, queues=["billing"], concurrency=4, now=now
    )

    stats = cli("stats", "--json").json()
    counts = {row["queue"]: row["counts"] for row in stats["queues"]}
    assert counts["billing"]["scheduled"] == 2
    assert counts["mail"]["dead_lettered"] == 2
    assert [(entry["queue"], entry["oldest_due"]) for entry in stats["latency"]] == [
        ("billing", "2026-01-01T00:00:00+00:00")
    ]
    assert stats["latency"][0]["waiting_seconds"] > 0
    assert stats["workers"]["live"] == 1
    assert stats["workers"]["live_workers"][0]["worker_id"] == "host-a:1:abc"
    assert stats["dead_lettered_last_hour"] == 1
    assert stats["dead_lettered_last_hour_by_queue"] == {"mail": 1}

    text = cli("stats")
    assert text.returncode == 0
    assert re.search(r"^billing\s+2\s+0\s+0\s+0\s+0\s+0\s+0\s+2$", text.stdout, re.M)
    assert re.search(r"^\s+billing\s+2026-01-01T00:00:00Z\s+\d+d \d\dh$", text.stdout, re.M)
    assert "Workers: 1 live" in text.stdout
    assert "Dead-Lettered in the last hour: 1 (mail 1)" in text.stdout
    assert JobRecord.objects.filter(state=JobState.DEAD_LETTERED).count() == 2


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("nonsense",), "invalid choice: 'nonsense'"),
        ((), "the following arguments are required: SUBCOMMAND"),
        (
            ("jobs", "--state", "finished"),
            "backwave jobs: --state 'finished' is not a job state: expected one of ",
        ),
        (("jobs", "--limit", "-5"), "backwave jobs: --limit must be at least 1"),
        (("jobs", "--tag", "=acme"), "backwave jobs: --tag '=acme' is not a tag"),
    ],
)
def test_bad_usage_exits_2_with_a_message_and_no_traceback(cli, args, message):
    bad = cli(*args)
    assert bad.returncode == 2, bad
    assert bad.stdout == ""
    assert message in bad.stderr
    if args and args[0] == "jobs":  # a bad value: one line, no usage block
        assert len(bad.stderr.strip().splitlines()) == 1, bad
    else:
        assert bad.stderr.startswith("usage: ")
