"""``backwave limits`` (list), ``limits set`` and ``limits clear``."""

from __future__ import annotations

import pytest
from django.utils import timezone

from backwave_django.core.limits import LimitValues
from backwave_django.core.states import JobState
from backwave_django.models import LimitSettings, OperatorAudit

from ..flow_rows import declare, job_under, leased, started
from .conftest import ACTOR

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def limits() -> None:
    now = timezone.now()
    declare("customer-sync", concurrency=1, at=now)
    declare("payment-api", rate=100, period=1, at=now)
    leased("customer-sync", "acme", job_under((("customer-sync", "acme"),), state=JobState.LEASED, due=now))
    job_under((("customer-sync", "acme"),), due=now)
    job_under((("customer-sync", "acme"),), due=now)
    started("payment-api", "", at=now, times=3)


def test_limits_lists_each_limit_as_a_table_and_as_json(cli, limits):
    table = cli("limits")
    assert table.returncode == 0, table
    header, sync, payment = table.lines
    assert header.split() == ["LIMIT", "DECLARED", "IN", "FORCE", "LEASED", "STARTED", "HELD"]
    assert sync.split() == ["customer-sync", "1", "at", "once", "1", "at", "once", "1", "0", "2"]
    assert payment.startswith("payment-api")
    listed = cli("limits", "--json").json()
    assert [row["limit"] for row in listed] == ["customer-sync", "payment-api"]
    assert listed[0]["held"] == 2
    assert listed[0]["buckets"] == [
        {"bucket": "acme", "leased": 1, "started_in_window": 0, "due": 2, "held": 2, "full": True}
    ]
    assert listed[1]["in_force"] == {"concurrency": None, "rate": 100, "period": 1.0}
    assert listed[1]["started_in_window"] in (0, 3)  # 3 unless the run took over a second


def test_set_keeps_unspecified_bounds_and_clear_returns_to_the_declared_ones(cli, limits):
    run = cli("limits", "set", "payment-api", "--rate", "20")
    assert run.returncode == 0, run
    assert f"Limit 'payment-api' is now overridden: 20 per 1 s (audited as {ACTOR})" in run.stdout
    run = cli("limits", "set", "payment-api", "--concurrency", "4", "--period", "2.5")
    assert run.returncode == 0, run
    row = LimitSettings.objects.get(name="payment-api")
    assert row.values_in_force() == LimitValues(4, 20, 2.5)
    assert row.overridden_by == ACTOR
    run = cli("limits", "set", "payment-api", "--rate", "none")
    assert LimitSettings.objects.get(name="payment-api").values_in_force() == LimitValues(4, None, 2.5)
    listed = cli("limits", "--json").json()
    assert listed[1]["override"] == {"concurrency": 4, "rate": None, "period": 2.5}
    assert listed[1]["overridden_by"] == ACTOR
    run = cli("limits", "clear", "payment-api")
    assert run.returncode == 0, run
    assert LimitSettings.objects.get(name="payment-api").values_in_force() == LimitValues(None, 100, 1.0)
    assert list(OperatorAudit.objects.order_by("id").values_list("actor", "action", "target")) == [
        (ACTOR, "set_limit", "payment-api"),
        (ACTOR, "set_limit", "payment-api"),
        (ACTOR, "set_limit", "payment-api"),
        (ACTOR, "clear_limit", "payment-api"),
    ]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--concurrency", "two"), "--concurrency must be a whole number of 1 or more, or none, got 'two'"),
        (("--concurrency", "0"), "--concurrency must be a whole number of 1 or more"),
        (("--rate", "1.5"), "--rate must be a whole number of 1 or more"),
        (("--period", "0"), "--period must be a number of seconds greater than 0, got '0'"),
        (("--period", "-1"), "--period must be a number of seconds greater than 0"),
        ((), "give at least one of --concurrency, --rate and --period"),
        (("--concurrency", "none"), "a limit needs a concurrency, a rate, or both"),
    ],
)
def test_bad_numbers_are_usage_errors_and_change_nothing(cli, limits, args, message):
    run = cli("limits", "set", "customer-sync", *args)
    assert run.returncode == 2, run
    assert message in run.stderr
    assert LimitSettings.objects.get(name="customer-sync").values_in_force() == LimitValues(1, None, 1.0)
    assert not OperatorAudit.objects.exists()


def test_unknown_names_are_refused_unless_created(cli, limits):
    run = cli("limits", "set", "custmer-sync", "--concurrency", "2")
    assert run.returncode == 2
    assert "no worker declares limit 'custmer-sync'" in run.stderr
    assert "--create" in run.stderr
    assert not LimitSettings.objects.filter(name="custmer-sync").exists()
    run = cli("limits", "set", "a b", "--concurrency", "2")
    assert run.returncode == 2
    assert "limit name 'a b' is not a valid queue name" in run.stderr
    run = cli("limits", "set", "later", "--concurrency", "2", "--create")
    assert run.returncode == 0, run
    assert LimitSettings.objects.get(name="later").values_in_force() == LimitValues(2, None, 1.0)
    run = cli("limits", "clear", "nothing-here")
    assert run.returncode == 1
    assert "No limit 'nothing-here'" in run.stderr
    run = cli("limits", "clear", "customer-sync")
    assert run.returncode == 1
    assert "has no override to clear" in run.stderr
    assert list(OperatorAudit.objects.values_list("action", "target")) == [("set_limit", "later")]


def test_no_limits_says_so(cli):
    run = cli("limits")
    assert run.returncode == 0
    assert run.stdout.startswith("No limits yet")
