"""``backwave show`` takes what the console shows (short id with or without the ellipsis, sequence
number, full id) and refuses an ambiguous short id; ``backwave jobs --search`` finds each needle;
a filter option the CLI cannot read is a usage error (exit 2) and nothing is listed."""

from __future__ import annotations

import uuid

import pytest

from backwave_django import Failure
from backwave_django.admin.display import short_job_id
from backwave_django.models import JobRecord

from ..conftest import enqueue, lease_one, report

pytestmark = pytest.mark.django_db(transaction=True)


def test_show_takes_the_short_id_with_or_without_the_ellipsis_and_the_sequence_number(cli):
    wanted = enqueue(queue="billing")
    enqueue(queue="billing")
    sequence = JobRecord.objects.get(job_id=wanted).pk
    for reference in (short_job_id(wanted), short_job_id(wanted)[1:], str(sequence), str(wanted)):
        (shown,) = cli("show", reference, "--json").json()
        assert shown["job_id"] == str(wanted), reference


def test_show_refuses_an_ambiguous_short_id_and_lists_the_candidates(cli):
    tail = "b2c92a1a"
    first = uuid.UUID(f"01900000-0000-7000-8000-0000{tail}")
    second = uuid.UUID(f"01900000-0001-7000-8000-0000{tail}")
    enqueue(job_id=first)
    enqueue(job_id=second)
    refused = cli("show", f"…{tail}")
    assert refused.returncode == 2
    assert refused.stdout == ""
    assert str(first) in refused.stderr
    assert str(second) in refused.stderr
    assert "give the full id" in refused.stderr
    nonsense = cli("show", "not-a-job")
    assert nonsense.returncode == 2
    assert "a short id as the console shows it" in nonsense.stderr
    missing = cli("show", "ffffffff")
    assert missing.returncode == 1
    assert "No job ffffffff" in missing.stderr


def test_jobs_search_finds_each_needle(cli):
    declined = enqueue(queue="pay", max_attempts=1, payload={"args": [], "kwargs": {"order_id": 42}})
    lease_one(declined)
    report(declined, Failure(next_due_time=None, error="card declined"), failure_detail="PaymentError: funds")
    enqueue(queue="pay", payload={"args": [], "kwargs": {"order_id": 7}})
    sequence = JobRecord.objects.get(job_id=declined).pk
    for term in (short_job_id(declined), str(sequence), "card declined", "order_id=42"):
        found = cli("jobs", "--json", "--search", term).json()
        assert [job["job_id"] for job in found] == [str(declined)], term
    assert cli("jobs", "--json", "--search", "funds").json() == []  # failure detail is sensitive
    found = cli("jobs", "--json", "--search", "funds", "--sensitive").json()
    assert [job["job_id"] for job in found] == [str(declined)]


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (("--state", "banana"), "--state 'banana' is not a job state"),
        (("--queue", ""), "--queue '': expected a queue name, not empty"),
        (("--wire-name", ""), "--wire-name '': expected a wire name, not empty"),
        (("--tag", "=x"), "--tag '=x' is not a tag"),
        (("--search", " "), "--search must not be blank"),
        (("--limit", "many"), "--limit must be a whole number"),
        (("--priority", "5"), "unrecognized arguments: --priority"),
    ],
    ids=["state", "queue", "wire-name", "tag", "search", "limit", "unknown-option"],
)
def test_a_filter_option_the_cli_cannot_read_exits_2_and_lists_nothing(cli, args, says):
    enqueue()
    run = cli("jobs", *args)
    assert run.returncode == 2, run
    assert run.stdout == ""
    assert says in run.stderr
