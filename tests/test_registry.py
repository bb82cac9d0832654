import re
from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured

from backwave_django import JobContext, job
from backwave_django.registry import JobDefinition, NotRoutable, Routed, get, route, unregister
from tests.jobsapp import jobs


@pytest.fixture
def throwaway():
    names: list[str] = []
    yield names
    for name in names:
        unregister(name)


def test_jobs_modules_of_installed_apps_are_discovered():
    assert get("test.echo") is jobs.echo
    assert jobs.sleep.queue == "slow"
    assert jobs.flaky.retry is not None
    assert jobs.flaky.retry.max_attempts == 3


def test_a_wire_name_cannot_be_registered_twice(throwaway):
    throwaway.append("dup.name")

    @job("dup.name")
    def first() -> None: ...

    with pytest.raises(
        ImproperlyConfigured, match=r"Duplicate Wire Name 'dup\.name'.*Wire Names must be unique"
    ):

        @job("dup.name")
        def second() -> None: ...


@pytest.mark.parametrize("name", ["", "   "])
def test_empty_wire_names_are_refused(name):
    with pytest.raises(ImproperlyConfigured, match="empty Wire Name"):
        job(name)


def test_a_missing_wire_name_is_refused():
    def handler() -> None: ...

    with pytest.raises(ImproperlyConfigured, match="needs an explicit wire name"):
        job(handler)  # type: ignore[call-overload]


def test_payload_is_args_and_kwargs_and_binds_to_the_signature():
    assert jobs.sleep.encode((1.5,), {"marker": None}) == {"args": [1.5], "kwargs": {"marker": None}}
    with pytest.raises(TypeError, match=r"test\.sleep: missing a required argument: 'seconds'"):
        jobs.sleep.encode((), {})


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (object(), r"argument 'args\[0\]' of job 'test.echo' is not JSON-serializable"),
        ((1, 2), "does not survive a JSON round trip"),
        ({1: "a"}, "does not survive a JSON round trip"),
    ],
)
def test_arguments_that_do_not_round_trip_through_json_are_refused(value, message):
    with pytest.raises(TypeError, match=message):
        jobs.echo.encode((value,), {})


def test_keyword_argument_errors_name_the_argument():
    with pytest.raises(TypeError, match=r"argument 'marker' of job 'test\.sleep'"):
        jobs.sleep.encode((1,), {"marker": {1, 2}})


def test_route_binds_a_stored_payload():
    routed = route("test.sleep", {"args": [1], "kwargs": {"marker": "m"}})
    assert isinstance(routed, Routed)
    assert (routed.args, routed.kwargs) == ([1], {"marker": "m"})


@pytest.mark.parametrize(
    ("wire", "payload", "reason"),
    [
        ("nope", {"args": [], "kwargs": {}}, "no handler registered for wire name 'nope'"),
        (
            "test.sleep",
            {"args": [], "kwargs": {}},
            "payload for wire name 'test.sleep' no longer decodes: missing a required argument: 'seconds'",
        ),
        (
            "test.sleep",
            {"args": [1], "kwargs": {"renamed": 2}},
            "payload for wire name 'test.sleep' no longer decodes: got an unexpected keyword argument 'renamed'",
        ),
        (
            "test.echo",
            [1, 2],
            "payload for wire name 'test.echo' no longer decodes: expected an object with 'args' and 'kwargs', got [1, 2]",
        ),
    ],
)
def test_route_explains_exactly_why_a_job_is_unroutable(wire, payload, reason):
    assert route(wire, payload) == NotRoutable(reason)


def test_call_runs_inline_sync_async_and_with_a_context():
    assert jobs.echo.call(1, a=2) == {"args": [1], "kwargs": {"a": 2}}
    assert jobs.async_sleep.call(0) == "async 1"  # type: ignore[comparison-overlap]  # .call awaits
    assert jobs.echo(3) == {"args": [3], "kwargs": {}}


def test_context_collects_tags_and_cancel_requests():
    ctx = JobContext.detached("test.tagger")
    ctx.add_tag("tenant", "acme")
    ctx.add_label("seen")
    ctx.add_label("seen")
    assert ctx.added_tags == (("tenant", "acme"), "seen")
    ctx.raise_if_cancelled()
    ctx.request_cancel()
    assert ctx.cancel_requested
    from backwave_django import JobCancelled

    with pytest.raises(JobCancelled):
        ctx.raise_if_cancelled()
    with pytest.raises(ValueError, match="value must be non-empty"):
        ctx.add_label("")


def test_prepare_refuses_calls_that_do_not_bind_with_binds_own_words(throwaway):
    """Calls that the per-definition shape refuses go to ``Signature.bind`` for the message;
    calls it accepts store the call as given, defaults not applied."""
    throwaway.extend(["shape.plain", "shape.positional-only", "shape.variadic"])

    @job("shape.plain")
    def plain(order_id: str, count: int = 1, *, note: str | None = None) -> None: ...

    @job("shape.positional-only")
    def positional_only(order_id: str, /, count: int = 1) -> None: ...

    @job("shape.variadic")
    def variadic(order_id: str, *args: int, **kwargs: str) -> None: ...

    refused: list[tuple[JobDefinition[Any, Any], tuple[Any, ...], dict[str, Any], str]] = [
        (plain, (), {}, "missing a required argument: 'order_id'"),
        (plain, (), {"count": 2}, "missing a required argument: 'order_id'"),
        (plain, ("o-1",), {"colour": "red"}, "unexpected keyword argument 'colour'"),
        (plain, ("o-1", 2, "n"), {}, "too many positional arguments"),
        (plain, ("o-1",), {"order_id": "o-2"}, "multiple values for argument 'order_id'"),
        (positional_only, (), {"order_id": "o-1"}, "positional"),
        (variadic, (), {"count": 1}, "missing a required argument: 'order_id'"),
        (variadic, ("o-1",), {"order_id": "o-2"}, "multiple values for argument 'order_id'"),
    ]
    for definition, args, kwargs, words in refused:
        with pytest.raises(TypeError) as expected:
            definition.signature.bind(*args, **kwargs)
        assert words in str(expected.value)
        with pytest.raises(TypeError) as refusal:
            definition.prepare(*args, **kwargs)
        assert str(refusal.value) == f"{definition.wire_name}: {expected.value}"
        with pytest.raises(TypeError, match=f"^{re.escape(definition.wire_name)}: "):
            definition.using(priority=3).prepare(*args, **kwargs)
        assert isinstance(route(definition.wire_name, {"args": list(args), "kwargs": kwargs}), NotRoutable)

    accepted: list[tuple[JobDefinition[Any, Any], tuple[Any, ...], dict[str, Any]]] = [
        (plain, ("o-1",), {}),
        (plain, (), {"order_id": "o-1", "note": "n"}),
        (plain, ("o-1", 2), {"note": None}),
        (positional_only, ("o-1",), {"count": 2}),
        (variadic, ("o-1", 1, 2), {"order_id_": "x", "count": "y"}),
    ]
    for definition, args, kwargs in accepted:
        assert definition.prepare(*args, **kwargs).payload == {"args": list(args), "kwargs": kwargs}
        assert isinstance(route(definition.wire_name, {"args": list(args), "kwargs": kwargs}), Routed)


def test_prepare_stores_the_same_bytes_whichever_check_decides(throwaway):
    """A plain payload is checked by its types, one with a ``str`` subclass as a key by reading it
    back; both store the compact JSON of the call."""
    throwaway.append("shape.bytes")

    class Key(str):
        pass

    @job("shape.bytes")
    def handler(order_id: str, count: int, amount: float, meta: dict[str, Any]) -> None: ...

    plain = handler.prepare(order_id="o-1", count=3, amount=1.5, meta={"a": [1, None], "é": True})
    assert plain.payload_json == (
        b'{"args":[],"kwargs":{"order_id":"o-1","count":3,"amount":1.5,"meta":{"a":[1,null],"\xc3\xa9":true}}}'
    )
    subclass_key = handler.prepare("o-1", 3, 1.5, {Key("a"): 1})
    assert subclass_key.payload_json == b'{"args":["o-1",3,1.5,{"a":1}],"kwargs":{}}'
    with pytest.raises(TypeError, match=r"argument 'meta' of job 'shape\.bytes' does not survive"):
        handler.prepare("o-1", 3, 1.5, meta={"a": (1,)})
    with pytest.raises(TypeError, match=r"argument 'amount' of job 'shape\.bytes' is not JSON"):
        handler.prepare("o-1", 3, amount=float("nan"), meta={})
