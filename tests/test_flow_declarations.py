"""Declaring flow control on a job (docs/flow-control.md): ``@job(limits=..., partition=...)``,
the checks made at decoration, and the partition and buckets each enqueue works out."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured

import backwave_django
from backwave_django import Limit, job, registry
from backwave_django.core.limits import PLAIN_LANE, LimitValues, lane_of
from backwave_django.registry import unregister
from tests.jobsapp import jobs


@pytest.fixture
def throwaway() -> Iterator[list[str]]:
    names: list[str] = []
    yield names
    for name in names:
        unregister(name)


def test_limit_is_exported_from_the_package():
    assert backwave_django.Limit is Limit
    assert "Limit" in backwave_django.__all__
    assert backwave_django.__all__ == sorted(backwave_django.__all__)


def test_a_definition_keeps_its_limits_and_partition():
    (limit,) = jobs.limited_sync.limits
    assert (limit.name, limit.concurrency, limit.key) == ("customer-sync", 1, "customer_id")
    assert jobs.limited_sync.partition is None
    assert jobs.tenant_import.partition == "tenant"
    assert jobs.tenant_import.limits == ()
    assert jobs.echo.limits == ()
    assert jobs.echo.partition is None


def test_declared_limits_has_every_registered_limit():
    declared = registry.declared_limits()
    assert declared["customer-sync"] == LimitValues(concurrency=1, rate=None, period=1.0)
    assert declared["payment-api"] == LimitValues(concurrency=None, rate=5, period=1.0)


def test_agreeing_declarations_of_one_limit_are_accepted(throwaway):
    throwaway.append("flow.same-limit")

    @job("flow.same-limit", limits=[Limit("payment-api", rate=5, period=1)])
    def same(account: str) -> None: ...

    assert registry.declared_limits()["payment-api"].rate == 5


def test_a_mismatched_declaration_raises_at_decoration(throwaway):
    throwaway.append("flow.mismatch")
    with pytest.raises(
        ImproperlyConfigured,
        match=r"@job\('flow\.mismatch'\): limit 'payment-api' is declared twice with different bounds: "
        r"5 per 1 s and 6 per 1 s; every declaration must agree",
    ):

        @job("flow.mismatch", limits=[Limit("payment-api", rate=6)])
        def mismatched() -> None: ...

    assert registry.get("flow.mismatch") is None
    assert registry.declared_limits()["payment-api"].rate == 5


def test_redeclaring_the_same_job_replaces_its_own_declaration(throwaway):
    throwaway.append("flow.redeclared")

    def handler() -> None: ...

    job("flow.redeclared", limits=[Limit("flow-own", concurrency=2)])(handler)
    job("flow.redeclared", limits=[Limit("flow-own", concurrency=3)])(handler)
    assert registry.declared_limits()["flow-own"].concurrency == 3


@pytest.mark.parametrize(
    ("limits", "error", "message"),
    [
        ("payment-api", TypeError, r"limits must be a sequence of Limit\(\.\.\.\), got 'payment-api'"),
        (42, TypeError, r"limits must be a sequence of Limit\(\.\.\.\), got 42"),
        ([("payment-api", 5)], TypeError, r"limits\[0\] must be a Limit\(\.\.\.\), got \('payment-api', 5\)"),
        (
            [Limit("flow-x", rate=1), Limit("flow-x", rate=1)],
            ValueError,
            r"declares the limit 'flow-x' twice",
        ),
    ],
)
def test_bad_limits_are_refused(limits: Any, error: type[Exception], message: str):
    with pytest.raises(error, match=message):
        job("flow.bad-limits", limits=limits)


def test_a_single_limit_is_taken_as_a_list(throwaway):
    throwaway.append("flow.single")

    declare: Any = job
    single = declare("flow.single", limits=Limit("flow-single", concurrency=1))(lambda: None)

    assert [limit.name for limit in single.limits] == ["flow-single"]


def test_a_key_naming_a_missing_argument_raises_at_decoration():
    with pytest.raises(
        ImproperlyConfigured,
        match=r"@job\('flow\.no-arg'\) limit 'flow-k' key names 'account', which is not an argument of "
        r".*handler \(its arguments: customer\)",
    ):

        @job("flow.no-arg", limits=[Limit("flow-k", concurrency=1, key="account")])
        def handler(customer: str) -> None: ...

    assert registry.get("flow.no-arg") is None


def test_a_partition_naming_a_missing_argument_raises_at_decoration():
    with pytest.raises(ImproperlyConfigured, match=r"partition names 'tenant', which is not an argument"):

        @job("flow.no-tenant", partition="tenant")
        def handler(customer: str) -> None: ...


def test_a_partition_that_is_neither_a_name_nor_a_callable_is_refused():
    with pytest.raises(TypeError, match=r"partition must be an argument's name or a callable, got 42"):
        job("flow.bad-partition", partition=42)  # type: ignore[call-overload]


def test_the_context_parameter_cannot_name_a_bucket():
    with pytest.raises(ImproperlyConfigured, match=r"key names 'ctx', which is not an argument"):

        @job("flow.ctx", takes_context=True, limits=[Limit("flow-ctx", concurrency=1, key="ctx")])
        def handler(ctx: backwave_django.JobContext, n: int) -> None: ...


# --- Buckets and partitions at enqueue ----------------------------------------------------------


def test_a_str_key_names_the_bucket_by_the_arguments_value():
    assert jobs.limited_sync.prepare("acme").limit_keys == (("customer-sync", "acme"),)
    assert jobs.limited_sync.prepare(customer_id="globex").limit_keys == (("customer-sync", "globex"),)


def test_a_key_argument_left_to_its_default_names_the_bucket(throwaway):
    throwaway.append("flow.default-key")

    @job("flow.default-key", limits=[Limit("flow-default", concurrency=1, key="region")])
    def handler(n: int, region: str = "eu", size: int = 3) -> None: ...

    assert handler.prepare(1).limit_keys == (("flow-default", "eu"),)
    assert handler.prepare(1, size=5).limit_keys == (("flow-default", "eu"),)
    assert handler.prepare(1, 7).limit_keys == (("flow-default", "7"),)  # type: ignore[arg-type]


def test_a_callable_key_is_given_the_arguments_as_passed(throwaway):
    throwaway.append("flow.callable")
    calls: list[tuple[Any, ...]] = []

    def bucket(*args: Any, **kwargs: Any) -> str:
        calls.append((args, kwargs))
        return f"shard-{kwargs.get('n', args[0] if args else 0) % 2}"

    @job("flow.callable", limits=[Limit("flow-callable", rate=10, key=bucket)], partition=lambda n: f"p{n}")
    def handler(n: int) -> None: ...

    made = handler.prepare(3)
    assert made.limit_keys == (("flow-callable", "shard-1"),)
    assert made.partition == "p3"
    assert handler.prepare(n=4).limit_keys == (("flow-callable", "shard-0"),)
    assert calls == [((3,), {}), ((), {"n": 4})]


def test_a_callable_key_must_return_a_str(throwaway):
    throwaway.append("flow.callable-int")

    @job("flow.callable-int", limits=[Limit("flow-int", rate=10, key=lambda n: n)])
    def handler(n: int) -> None: ...

    with pytest.raises(TypeError, match="the key function must return a str, got int"):
        handler.prepare(3)


def test_a_limit_without_key_has_one_bucket():
    assert jobs.rated_call.prepare("a").limit_keys == (("payment-api", ""),)
    assert jobs.rated_call.prepare("b").limit_keys == jobs.rated_call.prepare("a").limit_keys


def test_several_limits_give_buckets_sorted_by_name(throwaway):
    throwaway.append("flow.several")

    @job(
        "flow.several",
        limits=[Limit("flow-z", concurrency=2, key="account"), Limit("flow-a", rate=3)],
    )
    def handler(account: str) -> None: ...

    assert handler.prepare("acme").limit_keys == (("flow-a", ""), ("flow-z", "acme"))


def test_using_limit_keys_sets_buckets():
    made = jobs.limited_sync.using(limit_keys={"customer-sync": "vip"}).prepare("acme")
    assert made.limit_keys == (("customer-sync", "vip"),)
    assert made.lane == lane_of(None, (("customer-sync", "vip"),))


def test_using_limit_keys_with_an_unknown_name_raises_naming_the_jobs_limits():
    with pytest.raises(
        ValueError,
        match=r"limit_keys names 'stripe', not a limit of job 'test\.limited-sync' "
        r"\(its limits: customer-sync\)",
    ):
        jobs.limited_sync.using(limit_keys={"stripe": "acct_1"})
    with pytest.raises(ValueError, match=r"\(its limits: none\)"):
        jobs.echo.using(limit_keys={"stripe": "acct_1"})


@pytest.mark.parametrize(
    ("limit_keys", "error", "message"),
    [
        ([("customer-sync", "x")], TypeError, "limit_keys must be a mapping of limit name to bucket"),
        ({"customer-sync": ""}, ValueError, r"must be 1 to 200 characters"),
        ({"customer-sync": "x" * 201}, ValueError, r"must be 1 to 200 characters"),
        ({"customer-sync": 5}, TypeError, r"limit_keys\['customer-sync'\] must be a str, got int"),
    ],
)
def test_bad_limit_keys_are_refused(limit_keys: Any, error: type[Exception], message: str):
    with pytest.raises(error, match=message):
        jobs.limited_sync.using(limit_keys=limit_keys)


def test_a_partition_comes_from_its_argument():
    made = jobs.tenant_import.prepare("acme", 1)
    assert (made.partition, made.limit_keys) == ("acme", ())
    assert made.lane == lane_of("acme", ()) != PLAIN_LANE


def test_using_partition_overrides_the_argument_and_works_for_any_job():
    assert jobs.tenant_import.using(partition="override").prepare("acme", 1).partition == "override"
    plain = jobs.echo.using(partition="acme").prepare(1)
    assert (plain.partition, plain.limit_keys, plain.lane) == ("acme", (), lane_of("acme", ()))


@pytest.mark.parametrize(
    ("partition", "error"), [("", ValueError), ("x" * 201, ValueError), (5, TypeError)]
)
def test_bad_partitions_are_refused(partition: Any, error: type[Exception]):
    with pytest.raises(error, match="partition must"):
        jobs.echo.using(partition=partition)


def test_a_partition_argument_must_give_a_valid_name():
    with pytest.raises(ValueError, match=r"partition must be 1 to 200 characters, got ''"):
        jobs.tenant_import.prepare("", 1)


def test_plain_jobs_have_no_partition_no_buckets_and_lane_zero():
    made = jobs.echo.prepare(1, a=2)
    assert (made.partition, made.limit_keys, made.lane) == (None, (), PLAIN_LANE)
    unique = jobs.echo.using(unique=backwave_django.Unique()).prepare(1)
    assert (unique.partition, unique.limit_keys, unique.lane) == (None, (), PLAIN_LANE)


def test_flow_jobs_keep_job_ids_unique_and_options():
    made = jobs.limited_sync.using(job_id="order-1", priority=5).prepare("acme")
    again = jobs.limited_sync.using(job_id="order-1").prepare("acme")
    assert made.job_id == again.job_id
    assert made.priority == 5
    assert made.limit_keys == (("customer-sync", "acme"),)
    assert not made.id_is_new
    assert jobs.limited_sync.prepare("acme").id_is_new


def test_a_schedule_spec_of_a_flow_job_carries_its_partition_and_buckets():
    payload = jobs.limited_sync.encode(("acme",), {})
    assert jobs.limited_sync.schedule_flow(payload) == {
        "partition": None,
        "limit_keys": (("customer-sync", "acme"),),
    }
    assert jobs.echo.schedule_flow({"args": [], "kwargs": {}}) == {}
