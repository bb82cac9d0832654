"""Many hosts, one database: worker groups under different names share one PostgreSQL database,
and one of them dies with SIGKILL in the middle of the run.

Each group is a ``backwave_worker --processes 2`` in a process group of its own, as a separate
host would be. The jobs sleep briefly and journal each start and finish with their job id. Every
job must end Succeeded, with exactly one Succeeded entry in its transition log, whichever host
ran it and however often it ran: the killed host's jobs run again elsewhere once their leases
expire (at-least-once execution), and only one outcome per job counts (effect-once outcomes).
"""

from __future__ import annotations

import os
import signal
from collections import Counter
from pathlib import Path

import pytest
from django.db.models import Count, Q

from backwave_django import JobState, enqueue_many
from backwave_django.core.actors import LEASE_EXPIRY as LEASE_EXPIRY_ACTOR
from backwave_django.models import JobRecord, JobTransition
from tests.jobsapp import jobs
from tests.worker.conftest import wait_for

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

JOBS = 300
HOSTS = ("host-a", "host-b", "host-c")
DOOMED = "host-a"


def _journal(path: Path) -> list[list[str]]:
    """``[event, job id, attempt, pid]`` per line the handlers wrote."""
    return [line.split() for line in path.read_text().splitlines()] if path.exists() else []


def _started_leases_of(host: str, journal: Path) -> set[str]:
    """Jobs leased by ``host`` whose handler has started (and, sleeping, not finished yet)."""
    leased = {
        str(job_id)
        for job_id in JobRecord.objects.filter(
            state=JobState.LEASED, lease_owner__startswith=f"{host}:"
        ).values_list("job_id", flat=True)
    }
    return leased & {entry[1] for entry in _journal(journal) if entry[0] == "start"}


def test_workers_on_several_hosts_finish_every_job_once_when_one_host_is_killed(workers, tmp_path):
    journal = tmp_path / "journal"
    receipts = enqueue_many([jobs.sleep.prepare(0.3, marker=str(journal)) for _ in range(JOBS)])
    job_ids = {str(receipt.job_id) for receipt in receipts}
    groups = {
        host: workers.start("--queues", "slow", "--name", host, "--processes", "2", "--concurrency", "4")
        for host in HOSTS
    }

    # Kill the doomed host (its supervisor and both children) while its handlers are running.
    wait_for(lambda: len(_started_leases_of(DOOMED, journal)) >= 4, timeout=60, what=f"{DOOMED} to run jobs")
    os.killpg(groups[DOOMED].pid, signal.SIGKILL)
    groups[DOOMED].wait(10)

    wait_for(
        lambda: JobRecord.objects.filter(state=JobState.SUCCEEDED).count() == JOBS,
        timeout=180,
        what="every job to succeed",
    )
    for host in HOSTS:
        if host != DOOMED:
            os.killpg(groups[host].pid, signal.SIGTERM)
            assert groups[host].wait(30) == 0

    # Every job Succeeded, and its transition log records exactly one Succeeded.
    assert Counter(JobRecord.objects.values_list("state", flat=True)) == {JobState.SUCCEEDED: JOBS}
    succeeded = Counter(
        str(job_id)
        for job_id in JobTransition.objects.filter(state=JobState.SUCCEEDED).values_list(
            "job__job_id", flat=True
        )
    )
    assert set(succeeded) == job_ids
    assert max(succeeded.values()) == 1

    # Every handler finished at least once (some ran twice: the killed host's).
    finished = {entry[1] for entry in _journal(journal) if entry[0] == "done"}
    assert finished == job_ids

    # The kill cut attempts short: their leases expired, and other hosts ran those jobs again.
    cut_short = JobRecord.objects.annotate(
        expiries=Count("transitions", filter=Q(transitions__actor=LEASE_EXPIRY_ACTOR))
    ).filter(expiries__gt=0)
    assert cut_short.exists()
    assert all(attempt >= 2 for attempt in cut_short.values_list("attempt", flat=True))
    finishers = JobTransition.objects.filter(job__in=cut_short, state=JobState.SUCCEEDED)
    assert not [
        actor for actor in finishers.values_list("actor", flat=True) if actor.startswith(f"{DOOMED}:")
    ]
