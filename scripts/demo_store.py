"""A walk through the backwave_django job store on a throwaway SQLite database.

Run it with ``make demo`` (or ``.venv/bin/python scripts/demo_store.py``). It plays the part of a
worker by hand: enqueue a parent and a child that waits for it, claim and finish the parent,
watch the child get released, fail the child once and retry it, cancel a third job, then print
every job's transition log. All writes go through ``backwave_django.store``; the log is read
back from the models.

A later release grows this into a full example project with a real worker and the admin console.
"""

from __future__ import annotations

import sys
import tempfile
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import django
from django.conf import settings
from django.core.management import call_command

WORKER = "demo-worker"
OPERATOR = "demo-operator"
LEASE = timedelta(seconds=60)


def configure(database: Path) -> None:
    settings.configure(
        INSTALLED_APPS=["django.contrib.contenttypes", "django.contrib.auth", "backwave_django"],
        USE_TZ=True,
        TIME_ZONE="UTC",
        DEFAULT_AUTO_FIELD="django.db.models.BigAutoField",
        DATABASES={
            "default": {
                "ENGINE": "django.db.backends.sqlite3",
                "NAME": str(database),
                # Writers take the lock when a transaction starts, so concurrent workers queue up
                # instead of failing with "database is locked" (system check backwave.W001).
                "OPTIONS": {"transaction_mode": "IMMEDIATE"},
            }
        },
    )
    django.setup()
    call_command("migrate", verbosity=0)


def now() -> datetime:
    """The store never reads a clock; callers pass one. Here it is the real one."""
    return datetime.now(UTC)


def step(text: str) -> None:
    print(f"\n-> {text}")


def demo() -> None:
    # Imported after django.setup(): the store uses the models.
    from backwave_django import store
    from backwave_django.core.outcomes import Failure, NewJob, OutcomeReport, Success
    from backwave_django.core.states import JobState
    from backwave_django.models import JobRecord

    def state_of(job_id: uuid.UUID) -> str:
        return JobState(JobRecord.objects.get(job_id=job_id).state).label

    def claim_one(queue: str) -> tuple[uuid.UUID, int]:
        [claimed] = store.claim(worker_id=WORKER, queues=[queue], max_jobs=1, lease_duration=LEASE, now=now())
        expiry = f"{claimed.lease_expiry:%H:%M:%S}"
        print(f"   claimed {claimed.wire_name} attempt {claimed.attempt}, lease held until {expiry}")
        return claimed.job_id, claimed.attempt

    names: dict[uuid.UUID, str] = {}

    step("enqueue a parent job, and a child that waits for it (parents=[parent])")
    parent = NewJob(
        job_id=uuid.uuid4(),
        wire_name="build-report",
        payload={"args": ["2026-11"], "kwargs": {}},
        due_time=now(),
    )
    child = NewJob(
        job_id=uuid.uuid4(),
        wire_name="email-report",
        payload={"args": [], "kwargs": {"to": "ops@example.com"}},
        due_time=now(),
        parents=(parent.job_id,),
        tags=("reports", ("tenant", "acme")),
    )
    for new_job in (parent, child):
        enqueued = store.enqueue(new_job, now=now())
        names[new_job.job_id] = new_job.wire_name
        print(f"   {new_job.wire_name}: {enqueued.name}, state {state_of(new_job.job_id)}")

    step("claim the parent and report Success with an output")
    job_id, attempt = claim_one("default")
    assert job_id == parent.job_id, "the child is Awaiting Parent, so only the parent is claimable"
    outcome = store.report_outcome(
        OutcomeReport(
            job_id=job_id, worker_id=WORKER, attempt=attempt, outcome=Success(), output={"rows": 42}
        ),
        now=now(),
    )
    print(f"   outcome {outcome.name}; parent is {state_of(parent.job_id)}")
    print(f"   the child was released by the parent's success: {state_of(child.job_id)}")

    step("claim the child and report a Failure with a retry due now")
    job_id, attempt = claim_one("default")
    outcome = store.report_outcome(
        OutcomeReport(
            job_id=job_id,
            worker_id=WORKER,
            attempt=attempt,
            outcome=Failure(next_due_time=now(), error="SMTP server said 421, try again later"),
            failure_detail="smtplib.SMTPServerDisconnected: SMTP server said 421, try again later",
        ),
        now=now(),
    )
    print(f"   outcome {outcome.name}; child is {state_of(child.job_id)} again")

    step("claim the child again (attempt 2) and report Success")
    job_id, attempt = claim_one("default")
    outcome = store.report_outcome(
        OutcomeReport(job_id=job_id, worker_id=WORKER, attempt=attempt, outcome=Success()), now=now()
    )
    print(f"   outcome {outcome.name}; child is {state_of(child.job_id)}")

    step("a stale report is fenced off: the same attempt reported twice changes nothing")
    outcome = store.report_outcome(
        OutcomeReport(job_id=job_id, worker_id=WORKER, attempt=attempt, outcome=Success()), now=now()
    )
    print(f"   outcome {outcome.name}")

    step("enqueue one more job and cancel it before any worker picks it up")
    doomed = NewJob(
        job_id=uuid.uuid4(), wire_name="resize-image", payload={"args": [7], "kwargs": {}}, due_time=now()
    )
    store.enqueue(doomed, now=now())
    names[doomed.job_id] = doomed.wire_name
    cancelled = store.cancel_job(doomed.job_id, actor=OPERATOR, now=now())
    print(f"   cancel_job: {cancelled.name}")

    print_logs(names)


def print_logs(names: dict[uuid.UUID, str]) -> None:
    from backwave_django.core.states import JobState
    from backwave_django.models import JobRecord, JobTransition

    print("\nTransition logs")
    print("===============")
    # Actors are a worker id, an operator, "enqueue" or "cascade:{parent job id}" (44 characters).
    header = f"{'#':>3}  {'state':<16} {'attempt':>7}  {'actor':<44}  {'recorded_at':<29}"
    for job_id, name in names.items():
        print(f"\n{name}  {job_id}")
        print(header.rstrip())
        print("-" * len(header))
        entries = JobTransition.objects.filter(job__job_id=job_id).order_by("ordinal")
        for ordinal, state, attempt, actor, recorded_at in entries.values_list(
            "ordinal", "state", "attempt", "actor", "recorded_at"
        ):
            print(
                f"{ordinal:>3}  {JobState(state).label:<16} {attempt:>7}  {actor:<44}  "
                f"{recorded_at.isoformat(timespec='milliseconds')}"
            )

    print("\nFinal states")
    print("============")
    for job_id, name in names.items():
        record = JobRecord.objects.get(job_id=job_id)
        cause = f", cause: {record.terminal_cause}" if record.terminal_cause else ""
        output = f", output: {record.output}" if record.output is not None else ""
        print(f"{name:<14} {JobState(record.state).label:<10} attempts: {record.attempt}{cause}{output}")


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="backwave-demo-") as directory:
        database = Path(directory) / "demo.sqlite3"
        configure(database)
        print(f"backwave_django store demo (Django {django.get_version()}, SQLite at {database})")
        demo()
        from django.db import connections

        connections.close_all()
    return 0


if __name__ == "__main__":
    sys.exit(main())
