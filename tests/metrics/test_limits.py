"""The flow-control gauges: per limit only (buckets are never labels), from the periodic count."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from backwave_django.core.states import JobState
from backwave_django.metrics import names

from ..flow_rows import declare, job_under, leased, started
from .conftest import samples, value

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.metrics.urls")]


def test_each_limit_has_its_leased_held_back_and_started_per_second_gauges(client, metrics_settings):
    now = timezone.now()
    declare("customer-sync", concurrency=1, at=now)
    declare("payment-api", rate=10, period=2, at=now)
    for bucket in ("acme", "globex"):
        leased("customer-sync", bucket, job_under((("customer-sync", bucket),), state=JobState.LEASED, due=now))
    for _ in range(3):
        job_under((("customer-sync", "acme"),), due=now - timedelta(seconds=1))
    job_under((("customer-sync", "acme"),), due=now + timedelta(hours=1))  # not due: not held
    started("payment-api", "", at=now - timedelta(seconds=1), times=4)
    started("payment-api", "", at=now - timedelta(minutes=5), times=50)  # outside the window
    job_under((("ghost", "x"),), due=now - timedelta(seconds=1))
    client.force_login(User.objects.create_user("operator", is_staff=True))

    response = client.get("/metrics/")

    assert response.status_code == 200
    text = response.content.decode()
    found = samples(text)
    assert value(found, "backwave_limit_leased", limit="customer-sync") == 2
    assert value(found, "backwave_limit_held_back", limit="customer-sync") == 3
    assert value(found, "backwave_limit_started_per_second", limit="customer-sync") == 0
    assert value(found, "backwave_limit_leased", limit="payment-api") == 0
    assert value(found, "backwave_limit_started_per_second", limit="payment-api") == pytest.approx(2.0)
    assert value(found, "backwave_limit_held_back", limit="payment-api") == 0
    assert value(found, "backwave_limit_held_back", limit="ghost") == 1  # declared by no worker
    # Only the limit names the samples: no bucket, whatever it is called.
    limit_samples = [key for key in found if key[0].startswith("backwave_limit_")]
    assert {labels for _, labels in limit_samples} == {
        (("limit", "customer-sync"),),
        (("limit", "payment-api"),),
        (("limit", "ghost"),),
    }
    assert "acme" not in text


def test_the_limit_gauges_are_labelled_by_limit_only():
    for spec in (names.LIMIT_LEASED, names.LIMIT_HELD_BACK, names.LIMIT_STARTED_PER_SECOND):
        assert spec.labels == ("limit",)
        assert spec in names.COUNT_METRICS
