"""The monitor's tag reads: facets (counts per value) and suggestions (prefix completion).

Case variants of a tag sit on different jobs: MariaDB's default collation makes the tag table's
unique constraint ignore case, so one job cannot carry both ``ACME`` and ``acme`` there.
"""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from backwave_django import JobState, monitor
from backwave_django.models import JobRecord, JobTag
from backwave_django.monitor import HasKey, HasLabel, JobQuery, tags as monitor_tags

from ..conftest import enqueue, lease_one
from ..factories import JobRecordFactory

pytestmark = pytest.mark.django_db


def tag_each(*tags, **job):
    """One job per tag given (a label string or a (key, value) pair)."""
    return [enqueue(tags=[tag], **job) for tag in tags]


@pytest.fixture(params=["index walk", "portable"])
def suggestion_path(request, monkeypatch, vendor):
    """Both statements of suggest_tags: PostgreSQL's walk of backwave_tag_folded, and the portable
    one SQLite and MariaDB run (exercised on PostgreSQL too, where they must agree)."""
    if request.param == "index walk" and vendor != "postgresql":
        pytest.skip("the index walk is PostgreSQL's")
    if request.param == "portable":
        monkeypatch.setattr(monitor_tags, "INDEX_WALK_VENDORS", frozenset())
    return request.param


# --- tag_facet -----------------------------------------------------------------------------------


def test_a_facet_counts_jobs_per_value_most_first_then_by_code_point():
    tag_each(*["b", "B", "a", "é", "Z", "_x", "~", "a b", "ab"])  # one job each: all tied
    tag_each("vip", "vip", "vip", "ab")
    assert monitor.tag_facet("") == [
        ("vip", 3),
        ("ab", 2),
        ("B", 1),  # 0x42
        ("Z", 1),  # 0x5A
        ("_x", 1),  # 0x5F
        ("a", 1),  # 0x61
        ("a b", 1),  # "a" then space (0x20) before "ab"
        ("b", 1),
        ("~", 1),  # 0x7E
        ("é", 1),  # 0xC3 0xA9: after every ASCII character
    ]


def test_a_facet_counts_labels_under_the_empty_key_and_keyed_values_under_their_key():
    enqueue(tags=["acme", ("tenant", "acme"), ("region", "eu")])
    enqueue(tags=[("tenant", "acme")])
    enqueue(tags=[("tenant", "globex"), ("Tenant", "acme")])
    assert monitor.tag_facet("") == [("acme", 1)]
    assert monitor.tag_facet("tenant") == [("acme", 2), ("globex", 1)]
    assert monitor.tag_facet("Tenant") == [("acme", 1)]  # keys are exact, on MariaDB too
    assert monitor.tag_facet("nope") == []


def test_a_facet_counts_distinct_jobs():
    jobs = [enqueue(tags=["x", ("k", "x"), "y"]) for _ in range(3)]
    assert len(jobs) == 3
    assert monitor.tag_facet("") == [("x", 3), ("y", 3)]
    assert monitor.tag_facet("k") == [("x", 3)]


def test_max_results_keeps_the_top_values():
    tag_each("a", "b", "b", "c", "c", "c", "d")
    assert monitor.tag_facet("", max_results=None) == [("c", 3), ("b", 2), ("a", 1), ("d", 1)]
    assert monitor.tag_facet("", max_results=2) == [("c", 3), ("b", 2)]
    assert monitor.tag_facet("", max_results=3) == [("c", 3), ("b", 2), ("a", 1)]
    with CaptureQueriesContext(connection) as queries:
        assert monitor.tag_facet("", max_results=0) == []
        assert monitor.tag_facet("", max_results=-1) == []
    assert len(queries) == 0


def test_a_base_query_scopes_the_counted_jobs_and_its_paging_is_ignored():
    tag_each(("tenant", "acme"), ("tenant", "acme"), ("tenant", "globex"), queue="mail")
    enqueue(queue="mail", tags=[("tenant", "globex"), "vip"])
    enqueue(queue="mail", tags=[("tenant", "initech"), "vip"])
    tag_each(("tenant", "initech"), ("tenant", "initech"), ("tenant", "initech"), queue="default")
    leased = enqueue(queue="leased", tags=[("tenant", "acme")])
    lease_one(leased)

    everything = [("initech", 4), ("acme", 3), ("globex", 2)]
    assert monitor.tag_facet("tenant") == everything
    assert monitor.tag_facet("tenant", JobQuery()) == everything
    assert monitor.tag_facet("tenant", JobQuery(queue="mail")) == [("acme", 2), ("globex", 2), ("initech", 1)]
    assert monitor.tag_facet("tenant", JobQuery(queue="mail", tags=(HasLabel("vip"),))) == [
        ("globex", 1),
        ("initech", 1),
    ]
    assert monitor.tag_facet("tenant", JobQuery(state=JobState.LEASED)) == [("acme", 1)]
    assert monitor.tag_facet("", JobQuery(tags=(HasKey("tenant"),))) == [("vip", 2)]
    paged = JobQuery(queue="mail", after_sequence=10**9, newest_first=True, max_results=0)
    assert monitor.tag_facet("tenant", paged) == monitor.tag_facet("tenant", JobQuery(queue="mail"))


def test_facet_arguments_are_checked():
    with pytest.raises(TypeError, match="key must be a str"):
        monitor.tag_facet(None)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="base_query must be a JobQuery"):
        monitor.tag_facet("", {"queue": "mail"})  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="max_results must be an int or None"):
        monitor.tag_facet("", max_results="3")  # type: ignore[arg-type]


def test_the_sampled_facet_counts_among_the_newest_matching_jobs_only():
    old = tag_each(*["old"] * 3)
    new = [enqueue(tags=["new", ("tenant", "acme")]) for _ in range(2)]
    enqueue(tags=["newest"])  # no tenant: not in a sample of jobs with a tenant
    jobs = JobRecord.objects.all()
    assert (len(old), len(new)) == (3, 2)
    assert monitor.facet_sample("", jobs, sample=3) == [("new", 2), ("newest", 1)]
    assert monitor.facet_sample("", jobs, sample=100) == [("old", 3), ("new", 2), ("newest", 1)]
    assert monitor.facet_sample("tenant", jobs, sample=1) == [("acme", 1)]
    assert monitor.facet_sample("", jobs.filter(queue="elsewhere"), sample=100) == []
    assert monitor.facet_sample("", jobs, sample=100, max_results=1) == [("old", 3)]
    assert monitor.facet_sample("", jobs, sample=0) == []


# --- suggest_tags --------------------------------------------------------------------------------


@pytest.fixture
def vocabulary():
    """Labels and keys with case variants, look-alike characters and repeats."""
    tag_each("acme", "ACME", "Acme", "abc", "Beta", "a%b", "axb", "a_b", "ab", "a[b", "a\\b", "émile", "Émile")
    tag_each("acme", "acme", "abc")  # repeats: each suggestion comes once
    tag_each(("tenant", "acme"), ("Tenant", "x"), ("region", "eu"), ("ACCOUNT", "1"), ("account", "2"))
    tag_each(("tenant", "Acme"), ("tenant", "beta"), ("tenant", "acme"))


LABELS = ["a%b", "a[b", "a\\b", "a_b", "ab", "abc", "ACME", "Acme", "acme", "axb", "Beta", "Émile", "émile"]
KEYS = ["ACCOUNT", "account", "region", "Tenant", "tenant"]


def test_labels_come_first_then_keys_each_by_folded_then_code_points(vocabulary, suggestion_path):
    assert monitor.suggest_tags() == [("", label) for label in LABELS] + [(key, "") for key in KEYS]


def test_the_prefix_matches_ascii_case_insensitively_and_keeps_the_stored_casing(vocabulary, suggestion_path):
    expected = [("", "ACME"), ("", "Acme"), ("", "acme"), ("ACCOUNT", ""), ("account", "")]
    assert monitor.suggest_tags("ac") == expected
    assert monitor.suggest_tags("AC") == expected
    assert monitor.suggest_tags("aCmE") == [("", "ACME"), ("", "Acme"), ("", "acme")]
    assert monitor.suggest_tags("T") == [("Tenant", ""), ("tenant", "")]
    # Only A-Z fold: É and é stay apart.
    assert monitor.suggest_tags("é") == [("", "émile")]
    assert monitor.suggest_tags("É") == [("", "Émile")]


@pytest.mark.parametrize(
    ("prefix", "expected"),
    [
        ("a%", ["a%b"]),
        ("a_", ["a_b"]),
        ("a[", ["a[b"]),
        ("a\\", ["a\\b"]),
        ("%", []),
        ("_", []),
        ("a%b", ["a%b"]),
        ("a%bc", []),
    ],
)
def test_the_prefix_is_literal(vocabulary, suggestion_path, prefix, expected):
    assert monitor.suggest_tags(prefix) == [("", label) for label in expected]


def test_an_empty_prefix_matches_everything_and_a_long_one_nothing(vocabulary, suggestion_path):
    assert len(monitor.suggest_tags("")) == len(LABELS) + len(KEYS)
    assert monitor.suggest_tags("acme-and-more") == []


def test_a_key_suggests_its_distinct_values(vocabulary, suggestion_path):
    assert monitor.suggest_tags(key="tenant") == [("tenant", "Acme"), ("tenant", "acme"), ("tenant", "beta")]
    assert monitor.suggest_tags("A", key="tenant") == [("tenant", "Acme"), ("tenant", "acme")]
    assert monitor.suggest_tags("", key="Tenant") == [("Tenant", "x")]
    assert monitor.suggest_tags("", key="nope") == []
    # The empty key is the labels, and then there is no block of keys.
    assert monitor.suggest_tags("a", key="") == [("", label) for label in LABELS if label.lower().startswith("a")]


def test_pages_follow_each_other_across_the_labels_to_keys_boundary(vocabulary, suggestion_path):
    everything = monitor.suggest_tags(max_results=100)
    for size in (1, 2, 3, 5, 13, 14):
        pages, after = [], None
        while True:
            page = monitor.suggest_tags(after=after, max_results=size)
            if not page:
                break
            assert len(page) <= size
            pages.extend(page)
            after = page[-1]
        assert pages == everything, size


def test_after_a_key_only_keys_follow_and_after_a_value_only_values(vocabulary, suggestion_path):
    assert monitor.suggest_tags(after=("", "émile")) == [(key, "") for key in KEYS]
    assert monitor.suggest_tags(after=("", "Émile"), max_results=2) == [("", "émile"), ("ACCOUNT", "")]
    assert monitor.suggest_tags(after=("region", "")) == [("Tenant", ""), ("tenant", "")]
    assert monitor.suggest_tags("ac", after=("", "ACME")) == [
        ("", "Acme"),
        ("", "acme"),
        ("ACCOUNT", ""),
        ("account", ""),
    ]
    assert monitor.suggest_tags(key="tenant", after=("tenant", "Acme")) == [
        ("tenant", "acme"),
        ("tenant", "beta"),
    ]
    # The cursor need not match the prefix: the page starts strictly after it in the same order.
    after_a_amp = [("", label) for label in LABELS if label.lower().startswith("a") and label != "a%b"]
    keys = [("ACCOUNT", ""), ("account", "")]
    assert monitor.suggest_tags("a", after=("", "a&")) == after_a_amp + keys  # "%" < "&" < "["


def test_max_results_is_clamped_to_one_to_a_hundred(suggestion_path):
    job = JobRecordFactory()
    JobTag.objects.bulk_create(JobTag(job=job, key="", value=f"label-{n:03}") for n in range(105))
    assert len(monitor.suggest_tags()) == 50
    assert len(monitor.suggest_tags(max_results=1000)) == 100
    assert monitor.suggest_tags(max_results=0) == [("", "label-000")]
    assert monitor.suggest_tags(max_results=-7) == [("", "label-000")]
    assert monitor.suggest_tags(max_results=3) == [("", "label-000"), ("", "label-001"), ("", "label-002")]


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"after": ("tenant", "acme")}, ValueError, "after must be a suggestion"),
        ({"after": ("", "")}, ValueError, "after must be a suggestion"),
        ({"key": "tenant", "after": ("region", "eu")}, ValueError, "after must be a suggestion"),
        ({"key": "tenant", "after": ("tenant", "")}, ValueError, "after must be a suggestion"),
        ({"after": "acme"}, TypeError, r"after must be a \(key, value\)"),
        ({"prefix": None}, TypeError, "prefix must be a str"),
        ({"key": 3}, TypeError, "key must be a str or None"),
        ({"max_results": "5"}, TypeError, "max_results must be an int"),
    ],
)
def test_bad_suggestion_arguments_are_refused(kwargs, error, message):
    with pytest.raises(error, match=message):
        monitor.suggest_tags(**kwargs)


def test_suggestions_are_global_and_a_page_costs_a_fixed_number_of_queries(vocabulary, suggestion_path):
    with CaptureQueriesContext(connection) as queries:
        monitor.suggest_tags(max_results=100)
    assert len(queries) == 2  # the labels, then the keys
    with CaptureQueriesContext(connection) as queries:
        monitor.suggest_tags(key="tenant")
    assert len(queries) == 1


@pytest.mark.postgres
def test_postgresql_walks_the_folded_index(vocabulary):
    with CaptureQueriesContext(connection) as queries:
        monitor.suggest_tags("a", key="tenant")
    (query,) = queries.captured_queries
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute("EXPLAIN " + query["sql"])
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert "backwave_tag_folded" in plan, plan
