"""Limits are names something uses: ``operator.set_limit`` refuses a limit that no worker declares,
no override or lease names and no job that has not ended names, unless asked to create it
(``operator.py``, ``monitor/limit_names.py``; docs/flow-control.md, "Overrides")."""

from __future__ import annotations

import pytest

from backwave_django import monitor, operator, store
from backwave_django.core.limits import LimitValues
from backwave_django.core.states import JobState
from backwave_django.models import LimitSettings, OperatorAudit

from ..conftest import T0
from ..flow_rows import declare, job_under, leased

pytestmark = pytest.mark.django_db


def _audit() -> list[tuple[str, str, str]]:
    return list(OperatorAudit.objects.order_by("id").values_list("actor", "action", "target"))


def test_a_limit_nothing_uses_is_refused_with_a_suggestion_and_created_only_when_asked():
    declare("payment-api", rate=100)
    with pytest.raises(operator.UnknownLimitError) as refused:
        operator.set_limit("paymnet-api", rate=5, actor="ops")
    assert str(refused.value) == (
        "no worker declares limit 'paymnet-api' and no job uses it; did you mean 'payment-api'?"
    )
    assert (refused.value.name, refused.value.suggestions) == ("paymnet-api", ["payment-api"])
    assert list(LimitSettings.objects.values_list("name", flat=True)) == ["payment-api"]
    assert _audit() == []

    values = operator.set_limit("paymnet-api", rate=5, actor="ops", create=True)
    assert values == LimitValues(None, 5, 1.0)
    assert LimitSettings.objects.get(name="paymnet-api").values_in_force() == LimitValues(None, 5, 1.0)
    assert _audit() == [("ops", "set_limit", "paymnet-api")]
    # Created, it is known: the next override needs no create.
    assert operator.set_limit("paymnet-api", concurrency=2, actor="ops") == LimitValues(2, 5, 1.0)


def test_a_name_far_from_every_limit_gets_no_suggestion():
    declare("payment-api", rate=100)
    with pytest.raises(
        operator.UnknownLimitError, match=r"^no worker declares limit 'zz9' and no job uses it$"
    ):
        operator.set_limit("zz9", concurrency=1, actor="ops")
    assert operator.UnknownLimitError("zz9", []).suggestions == []


@pytest.mark.parametrize("name", ["bad name!", "a,b", "a=6", "\tx", "x" * 129])
def test_a_name_that_breaks_the_rule_is_refused_even_with_create(name):
    with pytest.raises(ValueError, match="limit name") as refused:
        operator.set_limit(name, concurrency=1, actor="ops", create=True)
    assert not isinstance(refused.value, operator.UnknownLimitError)
    assert not LimitSettings.objects.exists()
    assert _audit() == []


def test_a_limit_is_known_by_its_row_its_leases_and_the_jobs_not_yet_ended_naming_it():
    declare("declared", concurrency=1)
    store.set_limit("overridden-only", rate=1, actor="setup", now=T0)
    leased("lease-only", "acme", job_under((("other", "y"),), state=JobState.SUCCEEDED))
    job_under((("a-scheduled", "x"), ("b-second", "y")))
    job_under((("leased-rate", ""),), state=JobState.LEASED)
    job_under((("awaiting", ""),), state=JobState.AWAITING_PARENT)
    odd = 'quote"back\\slash-naïve-100%_'
    job_under(((odd, "z"),))
    for name in (
        "declared",
        "overridden-only",
        "lease-only",
        "a-scheduled",
        "b-second",
        "leased-rate",
        "awaiting",
        odd,
    ):
        assert monitor.known_limit(name), name
    # Ended jobs, a bucket that is spelled like a limit, and parts of names do not count.
    job_under((("ended", ""),), state=JobState.SUCCEEDED)
    job_under((("dead", ""),), state=JobState.DEAD_LETTERED)
    job_under((("named-bucket", "bucket-only"),))
    for name in (
        "ended",
        "dead",
        "bucket-only",
        "A-Scheduled",
        "a-sched",
        "scheduled",
        "quote",
        "100%_",
        "x",
        "",
    ):
        assert not monitor.known_limit(name), name


def test_a_limit_only_a_job_names_is_overridden_without_create():
    job_under((("ghost", "x"),))
    assert operator.set_limit("ghost", concurrency=3, actor="ops") == LimitValues(3, None, 1.0)
    assert _audit() == [("ops", "set_limit", "ghost")]
