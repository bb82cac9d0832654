"""The metrics' settings: METRICS_COUNT_INTERVAL and METRICS_TOKEN."""

from __future__ import annotations

from datetime import timedelta

import pytest

from backwave_django import conf


def test_the_defaults_count_every_15_seconds_and_take_no_token():
    resolved, errors = conf.load({})
    assert errors == []
    assert resolved.metrics_count_interval == timedelta(seconds=15)
    assert resolved.metrics_token is None


def test_the_interval_takes_seconds_and_zero_reads_on_every_scrape():
    assert conf.load({"METRICS_COUNT_INTERVAL": 60})[0].metrics_count_interval == timedelta(seconds=60)
    assert conf.load({"METRICS_COUNT_INTERVAL": 0})[0].metrics_count_interval == timedelta(0)


@pytest.mark.parametrize(
    ("user", "message"),
    [
        ({"METRICS_COUNT_INTERVAL": -1}, "METRICS_COUNT_INTERVAL must be zero or more, got -1."),
        ({"METRICS_COUNT_INTERVAL": "15"}, "METRICS_COUNT_INTERVAL must be a timedelta or a number of seconds"),
        ({"METRICS_TOKEN": ""}, "METRICS_TOKEN must be a non-empty string (a bearer token) or None."),
        ({"METRICS_TOKEN": 1234}, "METRICS_TOKEN must be a non-empty string (a bearer token) or None."),
    ],
)
def test_bad_values_are_reported_without_echoing_a_token(user, message):
    errors = conf.load(user)[1]
    assert any(error.startswith(message) for error in errors), errors
    assert not any("1234" in error for error in errors)
