"""How the CLI reads the operator's words (no database, no subprocess)."""

from __future__ import annotations

import uuid

import pytest

from backwave_django import JobState
from backwave_django.cli.values import (
    UsageError,
    concurrency_limit,
    cursor,
    job_ids,
    job_state,
    label,
    page_size,
    tag_predicate,
)
from backwave_django.monitor import MAX_PAGE, HasKey, HasKeyValue, HasLabel


@pytest.mark.parametrize(
    ("text", "predicate"),
    [
        ("vip", HasLabel("vip")),
        ("tenant:", HasKey("tenant")),
        ("tenant=acme", HasKeyValue("tenant", "acme")),
        ("query=a=b", HasKeyValue("query", "a=b")),  # split at the first "="
        ("url:http://x", HasLabel("url:http://x")),  # a colon inside is part of a label
    ],
)
def test_tags_read_as_the_monitors_predicates(text, predicate):
    assert tag_predicate(text) == predicate


@pytest.mark.parametrize("text", ["", "=acme", "tenant=", ":"])
def test_a_tag_with_an_empty_part_is_a_usage_error(text):
    with pytest.raises(UsageError, match="is not a tag"):
        tag_predicate(text)


@pytest.mark.parametrize(
    ("text", "state"),
    [
        ("dead-lettered", JobState.DEAD_LETTERED),
        ("Awaiting Parent", JobState.AWAITING_PARENT),
        ("LEASED", JobState.LEASED),
    ],
)
def test_state_names_are_read_in_any_case_and_spelling(text, state):
    assert job_state(text) is state


def test_numbers_and_ids():
    assert page_size("500") == MAX_PAGE
    assert page_size("7") == 7
    assert cursor("0") == 0
    assert concurrency_limit("None") is None
    assert concurrency_limit("0") == 0
    one = uuid.uuid4()
    assert job_ids([str(one), str(one).upper()]) == [one]
    assert label("a=b:") == HasLabel("a=b:")
    for read, text in (
        (label, ""),
        (page_size, "0"),
        (page_size, "ten"),
        (cursor, "-1"),
        (concurrency_limit, "-2"),
        (job_state, "3"),
    ):
        with pytest.raises(UsageError):
            read(text)
