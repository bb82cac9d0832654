"""``CallShape.binds`` against ``inspect.Signature.bind``, and ``plain_json`` against a real round trip."""

import enum
import inspect
import itertools
import json
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import pytest

from backwave_django.core.binding import CallShape
from backwave_django.core.encoding import json_bytes, plain_json
from backwave_django.registry import _same_json


def plain(a, b, c=3, *, d=4): ...
def required_keyword_only(a, *, d, c=3): ...
def all_defaults(a=1, b=2, *, c=3, d=4): ...
def nothing(): ...
def positional_only(a, /, b, c=3): ...
def var_positional(a, *args, d=4): ...
def var_keyword(a, b=2, **kwargs): ...
def everything(a, /, b, *args, c, d=4, **kwargs): ...


SIGNATURES: list[Callable[..., Any]] = [
    plain,
    required_keyword_only,
    all_defaults,
    nothing,
    positional_only,
    var_positional,
    var_keyword,
    everything,
]
#: Every keyword a call below passes: the parameters' names, one none of them has, and the names
#: of the variadic parameters themselves (which ``bind`` does not accept as keywords of theirs).
KEYWORDS = ["a", "b", "c", "d", "x", "args", "kwargs"]
CALLS = [
    (tuple(range(count)), dict.fromkeys(names, 0))
    for count in range(5)
    for size in range(len(KEYWORDS) + 1)
    for names in itertools.combinations(KEYWORDS, size)
]


def _bind_accepts(signature: inspect.Signature, args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    try:
        signature.bind(*args, **kwargs)
    except TypeError:
        return False
    return True


@pytest.mark.parametrize("func", SIGNATURES, ids=lambda f: f.__name__)
def test_a_shape_accepts_exactly_the_calls_bind_accepts(func):
    signature = inspect.signature(func)
    shape = CallShape(signature)
    accepted = 0
    for args, kwargs in CALLS:
        assert shape.binds(args, kwargs) is _bind_accepts(signature, args, kwargs), (args, kwargs)
        accepted += shape.binds(args, kwargs)
    assert 0 < accepted < len(CALLS)  # the calls above include both kinds for every signature


def test_the_set_checks_apply_to_positional_or_keyword_and_keyword_only_parameters_only():
    assert [CallShape(inspect.signature(f)).simple for f in SIGNATURES] == [
        True, True, True, True, False, False, False, False,
    ]  # fmt: skip


def test_a_shape_takes_any_mapping_of_keywords():
    shape = CallShape(inspect.signature(plain))
    assert shape.binds((1,), OrderedDict(b=2))
    assert not shape.binds((1,), OrderedDict(a=2, b=2))


class Color(enum.IntEnum):
    RED = 1


class Name(str):
    pass


PLAIN = [
    None, True, 0, -1, 2**100, 1.5, -0.0, 1e300, "", "é\u2028\x00", [], {}, [1, "a", None, [2.5, {}]],
    {"a": {"b": [True, {"c": "d"}]}},
]  # fmt: skip
NOT_PLAIN = [
    (1, 2), [(1,)], {1: "a"}, {"a": {None: 1}}, {"a": {True: 1}}, Color.RED, [Color.RED], Name("x"),
    {Name("k"): 1}, OrderedDict(a=1), {"a": OrderedDict(b=1)},
]  # fmt: skip


@pytest.mark.parametrize("value", PLAIN + NOT_PLAIN)
def test_plain_json_is_true_only_for_values_that_come_back_the_same(value):
    """True only where the payload check's own comparison (the registry's) finds the value
    unchanged; False for the rest (where that comparison decides, and for a ``str`` subclass
    as a key accepts it)."""
    assert plain_json(value) is any(value is item for item in PLAIN)
    if plain_json(value):
        assert _same_json(json.loads(json_bytes(value)), value)
