"""The speed tricks for the frozen dataclasses made once per job, in one place.

Every other module builds its values through their classes, which check them; these three skip the
checks (and the per-field ``object.__setattr__`` of a frozen ``__init__``) where a value is made
once per job on a hot path from fields known to be valid. Each pays, measured on 2026-12-07 (best
of five runs of 20,000 with ``timeit``, this module against the classes' own constructors):

- :func:`frozen_builder` builds the ``ClaimedJob`` of each claimed job (``store/claims.py``):
  0.46-0.48 µs instead of 1.94-1.96 µs through ``ClaimedJob(...)``; and the ``JobPolicy`` that
  every ``NewJob`` and every ``.using(...)`` with an override resolves (``core/policy.py``):
  0.36 µs, where building it through its ``__init__`` made ``.using(priority=3).prepare(...)``
  2.3 µs slower than before the policy had a type (24.82 µs now, 24.17 µs before).
- :func:`copy_unchecked` makes each prepared job from the ``NewJob`` its options were checked as
  (``client.JobWithOptions.prepare``), and fixes its due time when it is enqueued
  (``NewJob.due_at``): 0.76-0.90 µs a copy, instead of 10.5 µs through ``NewJob(...)`` (which
  encodes the payload and normalizes the tags again) or 12.6 µs through ``dataclasses.replace``.
  One ``.prepare()`` and its ``due_at`` cost 12.74-12.95 µs per job, as the separate prepared
  type and its copy did (12.70-12.99 µs); ``make bench``'s enqueue rows moved within the shared
  machine's noise (docs/performance.md, "One prepared shape").
- :func:`uuid_unchecked` makes the ``UUID`` of each ``uuid7()`` (``core/ids.py``): 0.24 µs
  instead of 0.79 µs through ``uuid.UUID(int=...)``; a ``uuid7()`` took 0.74-0.90 µs with the
  trick written inline there and 0.78-0.81 µs calling this.

Nothing else writes ``__dict__``, ``__class__`` or another class's slots;
``tests/core/test_frozen.py`` compares what they make with what the classes' own constructors
make.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import fields, make_dataclass
from typing import Any, TypeVar

T = TypeVar("T")


def frozen_builder(cls: type[T]) -> Callable[..., T]:
    """A function that builds a ``cls`` from the values of all its fields (those with defaults,
    and those ``init=False``, too), in field order or by name. ``cls`` must be a frozen dataclass
    with ``slots=True`` and no ``__post_init__`` (the builder would skip it).

    A frozen dataclass's ``__init__`` sets each field through ``object.__setattr__``, about five
    times slower than a plain one sets its attributes. The builder makes a plain twin with the
    same slots in the same order and then gives it ``cls`` as its class: from there it is as
    frozen, equal, hashable and printable as one built by ``cls(...)``."""
    params = getattr(cls, "__dataclass_params__", None)
    if params is None or not params.frozen or "__slots__" not in vars(cls):
        raise TypeError(f"{cls.__name__} is not a frozen dataclass with slots=True")
    if hasattr(cls, "__post_init__"):
        raise TypeError(f"{cls.__name__} has a __post_init__, which the builder would skip")
    twin: Any = make_dataclass(f"_Unfrozen{cls.__name__}", [f.name for f in fields(cls)], slots=True)  # type: ignore[arg-type]

    def build(*args: Any, **kwargs: Any) -> T:
        instance = twin(*args, **kwargs)
        instance.__class__ = cls
        return instance  # type: ignore[no-any-return]

    return build


def copy_unchecked(value: T, **changes: Any) -> T:
    """A copy of ``value`` (a frozen dataclass without slots) with ``changes`` in place of its
    fields' values, or of the private attributes its ``__post_init__`` keeps, made without
    calling ``__init__`` or ``__post_init__``: the caller has checked the changed values as
    ``__post_init__`` would have. One dict copy instead of a full construction."""
    copy = object.__new__(type(value))
    object.__setattr__(copy, "__dict__", {**value.__dict__, **changes})
    return copy


#: A ``UUID`` has two slots; setting them through their descriptors is what its constructor does.
_NEW = object.__new__
_SET_INT = uuid.UUID.__dict__["int"].__set__
_SET_IS_SAFE = uuid.UUID.__dict__["is_safe"].__set__
_UNKNOWN = uuid.SafeUUID.unknown


def uuid_unchecked(value: int) -> uuid.UUID:
    """``uuid.UUID(int=value)`` without its argument checks (a third of the cost): ``value`` must
    be an int from 0 to 2**128 - 1, with its version and variant bits already set."""
    made = _NEW(uuid.UUID)
    _SET_INT(made, value)
    _SET_IS_SAFE(made, _UNKNOWN)
    return made
