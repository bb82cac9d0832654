"""Operator overrides of flow-control limits (store/limit_overrides.py): set, clear, audit."""

from __future__ import annotations

from datetime import timedelta

import pytest

from backwave_django import store
from backwave_django.core.limits import LimitValues
from backwave_django.core.states import ClearLimitResult
from backwave_django.models import LimitSettings, OperatorAudit

from ..conftest import T0
from ..flow_rows import declare

pytestmark = pytest.mark.django_db

LATER = T0 + timedelta(minutes=5)


def _audit() -> list[tuple[str, str, str]]:
    return list(OperatorAudit.objects.order_by("id").values_list("actor", "action", "target"))


def test_an_override_wins_over_the_declaration_and_is_audited():
    declare("stripe", rate=100, period=1)
    values = store.set_limit("stripe", rate=20, actor="alice", now=LATER)
    assert values == LimitValues(None, 20, 1.0)
    row = LimitSettings.objects.get(name="stripe")
    assert row.values_in_force() == LimitValues(None, 20, 1.0)
    assert row.declared_values() == LimitValues(None, 100, 1.0)  # the declaration is kept
    assert (row.overridden_by, row.overridden_at) == ("alice", LATER)
    assert _audit() == [("alice", "set_limit", "stripe")]


def test_unspecified_bounds_keep_the_values_in_force_and_none_removes_one():
    declare("crm", concurrency=5, rate=10, period=60)
    store.set_limit("crm", concurrency=2, actor="a", now=T0)
    assert LimitSettings.objects.get(name="crm").values_in_force() == LimitValues(2, 10, 60.0)
    store.set_limit("crm", rate=None, actor="a", now=T0)
    assert LimitSettings.objects.get(name="crm").values_in_force() == LimitValues(2, None, 60.0)
    store.set_limit("crm", period=5, actor="a", now=T0)
    assert LimitSettings.objects.get(name="crm").values_in_force() == LimitValues(2, None, 5.0)


def test_an_undeclared_limit_may_be_overridden_and_clearing_removes_its_row():
    store.set_limit("later", concurrency=3, actor="bob", now=T0)
    assert LimitSettings.objects.get(name="later").values_in_force() == LimitValues(3, None, 1.0)
    assert store.clear_limit("later", actor="bob", now=LATER) is ClearLimitResult.CLEARED
    assert not LimitSettings.objects.filter(name="later").exists()
    assert _audit() == [("bob", "set_limit", "later"), ("bob", "clear_limit", "later")]


def test_clearing_returns_to_the_declared_values():
    declare("stripe", rate=100)
    store.set_limit("stripe", rate=1, actor="a", now=T0)
    assert store.clear_limit("stripe", actor="a", now=T0) is ClearLimitResult.CLEARED
    row = LimitSettings.objects.get(name="stripe")
    assert (row.overridden, row.overridden_by, row.override_rate) == (False, None, None)
    assert row.values_in_force() == LimitValues(None, 100, 1.0)


def test_clearing_nothing_is_refused_and_not_audited():
    declare("stripe", rate=100)
    assert store.clear_limit("stripe", actor="a", now=T0) is ClearLimitResult.NOT_OVERRIDDEN
    assert store.clear_limit("typo", actor="a", now=T0) is ClearLimitResult.UNKNOWN_LIMIT
    assert not LimitSettings.objects.filter(name="typo").exists()
    assert _audit() == []


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"concurrency": None, "rate": None}, "needs a concurrency, a rate"),
        ({"concurrency": 0}, "concurrency must be an integer of at least 1"),
        ({"rate": -1}, "rate must be an integer of at least 1"),
        ({"concurrency": 2**31}, "at most"),
        ({"rate": 5, "period": 0}, "period must be a positive number"),
        ({"concurrency": 1.5}, "concurrency must be an integer"),
    ],
)
def test_bad_bounds_change_nothing(arguments, message):
    declare("stripe", rate=100)
    with pytest.raises(ValueError, match=message):
        store.set_limit("stripe", actor="a", now=T0, **arguments)
    assert LimitSettings.objects.get(name="stripe").values_in_force() == LimitValues(None, 100, 1.0)
    assert _audit() == []


def test_bad_bounds_on_an_undeclared_limit_leave_no_row():
    with pytest.raises(ValueError, match="needs a concurrency, a rate"):
        store.set_limit("new", concurrency=None, actor="a", now=T0)
    assert not LimitSettings.objects.exists()


@pytest.mark.parametrize("name", ["", "a b", "a,b", "x" * 201])
def test_a_name_breaking_the_queue_name_rule_is_refused(name):
    with pytest.raises(ValueError, match="limit name"):
        store.set_limit(name, concurrency=1, actor="a", now=T0)
    with pytest.raises(ValueError, match="limit name"):
        store.clear_limit(name, actor="a", now=T0)
    assert not LimitSettings.objects.exists()


def test_the_actor_and_now_are_required():
    with pytest.raises(ValueError, match="actor"):
        store.set_limit("stripe", concurrency=1, actor="", now=T0)
    with pytest.raises(ValueError, match="timezone-aware"):
        store.clear_limit("stripe", actor="a", now=T0.replace(tzinfo=None))
