"""The monitor's search (monitor/search.py): each needle the console shows finds its job, on
PostgreSQL, SQLite and MariaDB; the scans say when they stopped; ``resolve_job`` for ``show``."""

from __future__ import annotations

import uuid

import pytest
from django.db import connection

from backwave_django import Failure, monitor
from backwave_django.admin.display import short_job_id
from backwave_django.models import JobRecord
from backwave_django.monitor import JobQuery, search
from backwave_django.monitor.search import needles, resolve_job, search_jobs

from ..conftest import enqueue, lease_one, report

pytestmark = pytest.mark.django_db


def _found(term: str, *, failure_detail: bool = False) -> set[uuid.UUID]:
    jobs = search_jobs(JobRecord.objects.all(), term, failure_detail=failure_detail).jobs
    return set(jobs.values_list("job_id", flat=True))


def _job(**kwargs: object) -> uuid.UUID:
    return enqueue(payload={"args": [], "kwargs": kwargs})


def _failed(cause: str, detail: str) -> uuid.UUID:
    job_id = enqueue(queue="failing", max_attempts=1)
    lease_one(job_id)
    report(job_id, Failure(next_due_time=None, error=cause), failure_detail=detail)
    return job_id


def test_the_short_id_as_the_console_shows_it_finds_the_job_with_or_without_the_ellipsis():
    wanted, other = _job(), _job()
    shown = short_job_id(wanted)
    assert shown.startswith("…")
    assert _found(shown) == {wanted}
    assert _found(shown[1:]) == {wanted}
    assert _found(shown[1:].upper()) == {wanted}
    assert _found("..." + shown[1:]) == {wanted}
    assert other not in _found(shown)


def test_a_short_id_shared_by_two_jobs_finds_both_and_show_lists_them():
    tail = "b2c92a1a"
    first = uuid.UUID(f"01900000-0000-7000-8000-0000{tail}")
    second = uuid.UUID(f"01900000-0001-7000-8000-0000{tail}")
    enqueue(job_id=first)
    enqueue(job_id=second)
    assert _found(f"…{tail}") == {first, second}
    resolved = resolve_job(tail)
    assert resolved is not None
    assert resolved.job_id is None
    assert {candidate[0] for candidate in resolved.candidates} == {first, second}


def test_the_sequence_number_and_the_full_id_find_the_job():
    wanted, _ = _job(), _job()
    sequence = JobRecord.objects.get(job_id=wanted).pk
    assert wanted in _found(str(sequence))
    assert _found(str(wanted)) == {wanted}
    assert _found(wanted.hex) == {wanted}  # without the dashes
    assert _found(str(uuid.uuid4())) == set()  # a full id is that id only, never a fragment


def test_error_text_finds_the_cause_and_the_failure_detail_only_for_those_allowed():
    declined = _failed("card declined by the bank", "Traceback …\nPaymentError: insufficient funds")
    _failed("timeout", "TimeoutError")
    assert _found("Card Declined") == {declined}
    assert _found("insufficient funds") == set()  # the detail is sensitive
    assert _found("insufficient funds", failure_detail=True) == {declined}


@pytest.mark.parametrize(
    ("term", "matches"),
    [
        ("order_id=42", {"number", "text"}),  # the number 42, and the text "42"
        ('order_id="42"', {"text"}),  # a quoted string is that string only
        ("customer=alice", {"number"}),
        ("express=true", {"text"}),
        ("order_id=43", set()),
        ("missing=42", set()),
    ],
)
def test_key_equals_value_finds_the_jobs_whose_argument_has_that_value(term, matches):
    jobs = {
        "number": _job(order_id=42, customer="alice"),
        "text": _job(order_id="42", express=True),
        "other": _job(order_id=7, customer="bob"),
    }
    assert _found(term) == {jobs[name] for name in matches}


def test_an_argument_named_like_a_lookup_is_still_an_argument():
    wanted = _job(contains="x")
    _job(other="x")
    assert _found("contains=x") == {wanted}


def test_wire_names_and_tags_are_still_found():
    tagged = enqueue(wire_name="charge-card", tags=(("tenant", "acme"),))
    assert _found("charge") == {tagged}
    assert _found("tenant:acme") == {tagged}
    assert _found("acm") == {tagged}


def test_a_scan_reads_only_the_newest_jobs_and_says_so(monkeypatch):
    old = _failed("card declined", "detail")
    newest = [_failed("card declined", "detail") for _ in range(2)]
    monkeypatch.setattr(search, "SCAN_LIMIT", 2)
    found = search_jobs(JobRecord.objects.all(), "declined", failure_detail=False)
    assert set(found.jobs.values_list("job_id", flat=True)) == set(newest)
    [note] = found.notes
    assert "newest 2 jobs" in note
    assert old not in set(found.jobs.values_list("job_id", flat=True))
    # The id needles are never bounded: the old job's short id still finds it.
    assert _found(short_job_id(old)) == {old}


def test_arguments_are_searched_through_the_index_on_postgresql_and_by_a_bounded_scan_elsewhere(monkeypatch):
    old = _job(order_id=1)
    _job(order_id=2)
    _job(order_id=3)
    monkeypatch.setattr(search, "SCAN_LIMIT", 2)
    found = search_jobs(JobRecord.objects.all(), "order_id=1", failure_detail=False)
    ids = set(found.jobs.values_list("job_id", flat=True))
    if connection.vendor == "postgresql":
        assert ids == {old}
        assert not any("arguments" in note for note in found.notes)
    else:
        assert ids == set()
        assert any("The arguments of the newest 2 jobs only were searched" in note for note in found.notes)


@pytest.mark.skipif("connection.vendor != 'postgresql'")
def test_postgresql_has_the_indexes_the_search_expressions_use():
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT indexname, indexdef FROM pg_indexes WHERE indexname IN "
            "('backwave_job_short_id', 'backwave_job_arguments')"
        )
        found = dict(cursor.fetchall())
    assert '"right"((job_id)::text, 8)' in found["backwave_job_short_id"]
    assert "gin (((payload -> 'kwargs'::text)) jsonb_path_ops)" in found["backwave_job_arguments"]
    with connection.cursor() as cursor:
        cursor.execute("SET enable_seqscan = off")
        short = search_jobs(JobRecord.objects.all(), "…b2c92a1a", failure_detail=True).jobs.explain()
        arguments = search_jobs(JobRecord.objects.all(), "order_id=1", failure_detail=True).jobs.explain()
        cursor.execute("RESET enable_seqscan")
    assert "backwave_job_short_id" in short
    assert "backwave_job_arguments" in arguments


def test_a_short_id_with_its_ellipsis_and_key_equals_value_are_that_needle_only():
    text = enqueue(wire_name="order_id=1-b2c92a1a")
    argument = _job(order_id=1)
    assert _found("order_id=1") == {argument}
    assert _found("…b2c92a1a") == set()
    assert _found("b2c92a1a") == {text}  # without the ellipsis it is text too


def test_needles_read_every_form_a_term_can_be():
    assert needles("…B2C92A1A").short_id == "b2c92a1a"
    assert needles("12345678").sequence == 12345678
    assert needles("12345678").short_id == "12345678"  # both: either one matches
    assert needles("order_id=42").argument == ("order_id", ("42", 42))
    assert needles("a__b=1").argument is None
    assert needles("b2c92a1").short_id is None  # seven digits: not a short id


def test_resolve_job_takes_what_the_console_shows():
    wanted = _job()
    sequence = JobRecord.objects.get(job_id=wanted).pk
    for reference in (str(wanted), short_job_id(wanted), short_job_id(wanted)[1:], str(sequence)):
        resolved = resolve_job(reference)
        assert resolved is not None
        assert (reference, resolved.job_id) == (reference, wanted)
    assert resolve_job("not an id") is None
    missing = resolve_job(str(uuid.uuid4()))
    assert missing is not None
    assert missing.job_id is None
    assert not missing.candidates


def test_list_jobs_takes_a_search():
    wanted = _job(order_id=99)
    _job(order_id=98)
    assert [job.job_id for job in monitor.list_jobs(JobQuery(search="order_id=99"))] == [wanted]
