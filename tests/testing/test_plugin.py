"""The pytest plugin: the ``backwave`` fixture, and ``backwave_start`` overridden per module."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from django.utils import timezone

from backwave_django import clock
from tests.jobsapp import harness_jobs as jobs

START = datetime(2030, 6, 15, 9, 30, tzinfo=UTC)


@pytest.fixture
def backwave_start():
    return START


def test_backwave_start_moves_the_fixtures_clock(backwave):
    assert backwave.now == START
    assert backwave.job(jobs.square.enqueue(2).job_id).enqueued_at == START


@pytest.fixture
def after_the_harness(request):
    """Requested before ``backwave``, so it is torn down after it: the real clock must be back."""
    yield
    assert clock.now is timezone.now


def test_the_fixture_gives_the_real_clock_back(after_the_harness, backwave):
    assert clock.now() == START
