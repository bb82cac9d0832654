"""The monitor's job reads: get_job, list_jobs (filters, tag predicates, keyset paging) and count_jobs.

Every test here runs on PostgreSQL, SQLite and MariaDB (scripts/run_tests.sh runs tests/monitor on
all three).
"""

from __future__ import annotations

import dataclasses
import uuid
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from backwave_django import JobState, monitor
from backwave_django.models import JobRecord
from backwave_django.monitor import HasKey, HasKeyValue, HasLabel, JobQuery, JobSnapshot, MonitorJob

from ..conftest import T0, enqueue, lease_one, report
from ..factories import JobRecordFactory

pytestmark = pytest.mark.django_db


def _ids(rows):
    return [row.job_id for row in rows]


# --- get_job ---------------------------------------------------------------------------------


def test_get_job_reads_the_committed_row_with_its_tags():
    job_id = enqueue(queue="mail", wire_name="send-invoice", tags=["vip", ("tenant", "acme")], priority=5)
    lease_one(job_id)

    job = monitor.get_job(job_id)

    assert job is not None
    assert (job.job_id, job.queue, job.wire_name, job.priority) == (job_id, "mail", "send-invoice", 5)
    assert job.state is JobState.LEASED
    assert job.attempt == 1
    assert job.lease_owner == "worker-a"
    assert job.lease_expiry is not None
    assert job.cancel_requested is False
    assert job.sequence == JobRecord.objects.get(job_id=job_id).sequence
    assert job.tags == (("", "vip"), ("tenant", "acme"))
    assert (job.content_read, job.payload, job.output, job.transitions) == (False, None, None, ())


def test_get_job_of_an_unknown_id_is_none_and_a_non_uuid_is_refused():
    enqueue()
    assert monitor.get_job(uuid.uuid4()) is None
    with pytest.raises(TypeError, match=r"job_id must be a uuid\.UUID"):
        monitor.get_job(str(uuid.uuid4()))  # type: ignore[arg-type]


def test_a_job_snapshot_carries_every_column_its_tags_and_on_request_its_log():
    columns = {field.attname for field in JobRecord._meta.concrete_fields}
    fields = {field.name for field in dataclasses.fields(JobSnapshot)}
    assert fields == columns | {"tags", "content_read", "transitions"}
    assert MonitorJob is JobSnapshot


def test_get_job_reads_the_content_and_the_log_only_when_asked():
    job_id = enqueue(payload={"n": 1})
    lease_one(job_id)
    report(job_id, output={"sent": True})
    bare = monitor.get_job(job_id)
    full = monitor.get_job(job_id, content=True, history=True)
    assert bare is not None
    assert full is not None
    assert (bare.payload, bare.output, bare.transitions) == (None, None, ())
    assert (full.content_read, full.payload, full.output) == (True, {"n": 1}, {"sent": True})
    assert [entry.state for entry in full.transitions] == [
        JobState.SCHEDULED,
        JobState.LEASED,
        JobState.SUCCEEDED,
    ]
    assert [entry.ordinal for entry in full.transitions] == sorted(
        entry.ordinal for entry in full.transitions
    )


# --- list_jobs: paging ---------------------------------------------------------------------------


@pytest.fixture
def seven():
    """Seven jobs, oldest first."""
    return [enqueue() for _ in range(7)]


def test_oldest_first_pages_ascend_after_the_cursor(seven):
    pages, after = [], None
    while True:
        page = monitor.list_jobs(JobQuery(after_sequence=after, max_results=3))
        if not page:
            break
        pages.append(_ids(page))
        sequences = [row.sequence for row in page]
        assert sequences == sorted(sequences)
        assert after is None or sequences[0] > after
        after = page[-1].sequence
    assert pages == [seven[0:3], seven[3:6], seven[6:7]]


def test_newest_first_pages_descend_below_the_cursor(seven):
    pages, after = [], None
    while True:
        page = monitor.list_jobs(JobQuery(after_sequence=after, newest_first=True, max_results=3))
        if not page:
            break
        pages.append(_ids(page))
        sequences = [row.sequence for row in page]
        assert sequences == sorted(sequences, reverse=True)
        assert after is None or sequences[0] < after
        after = page[-1].sequence
    newest = seven[::-1]
    assert pages == [newest[0:3], newest[3:6], newest[6:7]]


def test_the_cursor_is_relative_to_the_direction(seven):
    middle = monitor.get_job(seven[3])
    assert middle is not None
    assert _ids(monitor.list_jobs(JobQuery(after_sequence=middle.sequence))) == seven[4:]
    assert _ids(monitor.list_jobs(JobQuery(after_sequence=middle.sequence, newest_first=True))) == [
        seven[2],
        seven[1],
        seven[0],
    ]


def test_the_page_is_capped_at_200_and_nothing_is_read_for_zero_or_less():
    JobRecord.objects.bulk_create(JobRecordFactory.build() for _ in range(monitor.MAX_PAGE + 5))
    assert len(monitor.list_jobs(JobQuery(max_results=10_000))) == monitor.MAX_PAGE == 200
    assert len(monitor.list_jobs(JobQuery(max_results=201))) == 200
    assert len(monitor.list_jobs(JobQuery(max_results=7))) == 7
    with CaptureQueriesContext(connection) as queries:
        assert monitor.list_jobs(JobQuery(max_results=0)) == []
        assert monitor.list_jobs(JobQuery(max_results=-3)) == []
    assert len(queries) == 0


def test_the_default_page_is_fifty_oldest_first():
    JobRecord.objects.bulk_create(JobRecordFactory.build() for _ in range(60))
    rows = monitor.list_jobs()
    assert len(rows) == 50
    assert [row.sequence for row in rows] == sorted(JobRecord.objects.values_list("sequence", flat=True))[:50]


def test_tags_are_read_in_one_batched_query_whatever_the_page_size():
    for n in range(20):
        enqueue(tags=[f"label-{n}", ("k", str(n)), "common"])
    with CaptureQueriesContext(connection) as queries:
        rows = monitor.list_jobs(JobQuery(max_results=20))
    assert len(queries) == 2  # the page, then the tags of its rows
    assert [row.tags for row in rows[:2]] == [
        (("", "common"), ("", "label-0"), ("k", "0")),
        (("", "common"), ("", "label-1"), ("k", "1")),
    ]


# --- list_jobs: filters and tag predicates ----------------------------------------------------


@pytest.fixture
def tagged():
    """Jobs whose tags tell a label from a keyed tag of the same text."""
    return {
        "label": enqueue(tags=["acme"]),
        "keyed": enqueue(tags=[("tenant", "acme")]),
        "both": enqueue(tags=["acme", ("tenant", "acme"), ("region", "eu")]),
        "other-tenant": enqueue(tags=[("tenant", "globex"), ("region", "eu")], queue="mail"),
        "upper": enqueue(tags=["ACME"]),
        "none": enqueue(),
    }


@pytest.mark.parametrize(
    ("predicates", "expected"),
    [
        ((), ["label", "keyed", "both", "other-tenant", "upper", "none"]),
        ((HasLabel("acme"),), ["label", "both"]),
        ((HasKeyValue("tenant", "acme"),), ["keyed", "both"]),
        ((HasKey("tenant"),), ["keyed", "both", "other-tenant"]),
        ((HasKey("acme"),), []),  # a label's text is not a key
        ((HasLabel("tenant"),), []),  # nor is a key a label
        ((HasLabel("ACME"),), ["upper"]),  # exact: case matters, on MariaDB too
        ((HasLabel("acme"), HasKeyValue("tenant", "acme")), ["both"]),
        ((HasKey("region"), HasKey("tenant")), ["both", "other-tenant"]),
        ((HasKey("region"), HasKeyValue("tenant", "acme")), ["both"]),
        ((HasLabel("acme"), HasKeyValue("tenant", "globex")), []),
    ],
)
def test_tag_predicates_are_anded_and_tell_labels_from_keyed_tags(tagged, predicates, expected):
    assert _ids(monitor.list_jobs(JobQuery(tags=predicates))) == [tagged[name] for name in expected]


def test_scalar_filters_and_predicates_are_anded():
    mail_vip = enqueue(queue="mail", wire_name="send-invoice", tags=["vip"])
    enqueue(queue="mail", wire_name="send-invoice")
    enqueue(queue="default", wire_name="send-invoice", tags=["vip"])
    mail_other = enqueue(queue="mail", wire_name="resize", tags=["vip"])
    leased = enqueue(queue="leased-q", tags=["vip"])
    lease_one(leased)

    assert _ids(monitor.list_jobs(JobQuery(queue="mail", tags=(HasLabel("vip"),)))) == [mail_vip, mail_other]
    assert _ids(monitor.list_jobs(JobQuery(queue="mail", wire_name="resize"))) == [mail_other]
    assert _ids(monitor.list_jobs(JobQuery(state=JobState.LEASED))) == [leased]
    assert _ids(monitor.list_jobs(JobQuery(state=2, tags=(HasLabel("vip"),)))) == [leased]
    assert monitor.list_jobs(JobQuery(queue="MAIL")) == []  # exact, on MariaDB too
    assert monitor.list_jobs(JobQuery(state=JobState.SUCCEEDED)) == []


def test_paging_applies_to_the_filtered_jobs():
    wanted = [enqueue(tags=["vip"]) if n % 2 else enqueue() for n in range(10)]
    vip = [job for n, job in enumerate(wanted) if n % 2]
    first = monitor.list_jobs(JobQuery(tags=(HasLabel("vip"),), newest_first=True, max_results=2))
    second = monitor.list_jobs(
        JobQuery(tags=(HasLabel("vip"),), newest_first=True, max_results=2, after_sequence=first[-1].sequence)
    )
    assert _ids(first) + _ids(second) == vip[::-1][:4]


# --- list_jobs: bad input ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("build", "error", "message"),
    [
        (lambda: HasKey(""), ValueError, "HasKey: key must be non-empty"),
        (lambda: HasLabel(""), ValueError, "HasLabel: value must be non-empty"),
        (lambda: HasKeyValue("", "acme"), ValueError, "HasKeyValue: key must be non-empty"),
        (lambda: HasKeyValue("tenant", ""), ValueError, "HasKeyValue: value must be non-empty"),
        (lambda: HasLabel(3), TypeError, "HasLabel: value must be a str"),  # type: ignore[arg-type]
        (lambda: JobQuery(state=9), ValueError, "unknown job state 9"),
        (lambda: JobQuery(state=-1), ValueError, "unknown job state -1"),
        (lambda: JobQuery(state="Leased"), ValueError, "unknown job state 'Leased'"),  # type: ignore[arg-type]
        (lambda: JobQuery(state=True), ValueError, "unknown job state True"),
        (lambda: JobQuery(tags=("vip",)), TypeError, "each tag predicate is a HasLabel"),  # type: ignore[arg-type]
        (lambda: JobQuery(tags=HasLabel("vip")), TypeError, "tags is a tuple"),  # type: ignore[arg-type]
        (lambda: JobQuery(max_results="5"), TypeError, "max_results must be an int"),  # type: ignore[arg-type]
        (lambda: JobQuery(after_sequence=1.5), TypeError, "after_sequence must be an int"),  # type: ignore[arg-type]
        (lambda: JobQuery(queue=3), TypeError, "queue must be a str"),  # type: ignore[arg-type]
    ],
)
def test_bad_queries_are_refused_with_a_clear_error(build, error, message):
    with pytest.raises(error, match=message):
        build()


def test_the_unknown_state_error_names_the_states():
    with pytest.raises(ValueError, match=r"0 \(Scheduled\).*6 \(Quarantined\)"):
        JobQuery(state=7)


def test_a_state_given_as_its_number_is_the_state_and_a_tag_list_becomes_a_tuple():
    query = JobQuery(state=5, tags=[HasLabel("vip")])  # type: ignore[arg-type]
    assert query.state is JobState.DEAD_LETTERED
    assert query.tags == (HasLabel("vip"),)
    with pytest.raises(TypeError, match="expected a JobQuery"):
        monitor.list_jobs({"queue": "mail"})  # type: ignore[arg-type]


# --- count_jobs ----------------------------------------------------------------------------------


def test_count_jobs_lists_only_pairs_with_jobs_by_queue_then_state():
    assert monitor.count_jobs() == []
    for queue in ("beta", "alpha", "beta", "Zed"):
        enqueue(queue=queue, due_time=T0 + timedelta(hours=1))  # not due: the claims below skip them
    done = enqueue(queue="beta")
    lease_one(done)
    report(done)
    leased = enqueue(queue="alpha-2")
    lease_one(leased)

    assert monitor.count_jobs() == [
        ("Zed", JobState.SCHEDULED, 1),  # code-point order: upper case first
        ("alpha", JobState.SCHEDULED, 1),
        ("alpha-2", JobState.LEASED, 1),
        ("beta", JobState.SCHEDULED, 2),
        ("beta", JobState.SUCCEEDED, 1),
    ]
