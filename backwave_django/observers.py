"""Declaring transition observers: ``@observer("alert-dead-letters", states=[...])``.

An observer is a function of one :class:`~backwave_django.TransitionEvent`, sync or ``async def``,
declared in an installed app's ``jobs.py`` (found like jobs). Workers deliver to it, at least once
and in log order, every recorded transition whose resulting state it subscribed to (optionally of
one wire name and one queue); see docs/observers.md. The observer id keys its durable cursor:
keep it stable, and change it only to start afresh.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from django.core.exceptions import ImproperlyConfigured

from .core.observing import TransitionEvent, require_states
from .core.states import JobState
from .core.validation import require_str, validate_queue_name

_OBSERVERS: dict[str, ObserverDefinition] = {}


@dataclass(frozen=True, eq=False)
class ObserverDefinition:
    """What :func:`observer` returns: the function and its subscription."""

    observer_id: str
    func: Callable[[TransitionEvent], Any]
    states: tuple[JobState, ...]
    wire_name: str | None
    queue: str | None

    @property
    def is_async(self) -> bool:
        return inspect.iscoroutinefunction(self.func)

    def __call__(self, event: TransitionEvent) -> Any:
        return self.func(event)


def observer(
    observer_id: str, *, states: Iterable[JobState], wire_name: str | None = None, queue: str | None = None
) -> Callable[[Callable[[TransitionEvent], Any]], ObserverDefinition]:
    """Declare a transition observer. A repeated id (another function) raises at import; a state
    that is not a ``JobState`` is a ``ValueError``."""
    try:
        require_str("observer_id", observer_id)
    except (TypeError, ValueError) as exc:
        raise ImproperlyConfigured(f"@observer needs an explicit, non-empty id: {exc}") from None
    subscription = require_states(states, "states")
    if wire_name is not None:
        require_str("wire_name", wire_name)
    if queue is not None:
        validate_queue_name(queue)

    def register(func: Callable[[TransitionEvent], Any]) -> ObserverDefinition:
        if not callable(func):
            raise TypeError(f"@observer({observer_id!r}) decorates a function, got {func!r}")
        definition = ObserverDefinition(observer_id, func, subscription, wire_name, queue)
        existing = _OBSERVERS.get(observer_id)
        if existing is not None and _origin(existing.func) != _origin(func):
            raise ImproperlyConfigured(
                f"Transition Observer '{observer_id}' is configured twice: {_origin(func)} and "
                f"{_origin(existing.func)}. Observer ids must be unique (each keys a durable cursor)."
            )
        _OBSERVERS[observer_id] = definition  # the same function imported again replaces itself
        return definition

    return register


def _origin(func: Callable[..., Any]) -> str:
    return f"{func.__module__}.{func.__qualname__}"


def definitions() -> dict[str, ObserverDefinition]:
    """Every registered observer, by id."""
    return dict(_OBSERVERS)


def unregister(observer_id: str) -> None:
    """Forget an observer (for tests that declare throwaway ones)."""
    _OBSERVERS.pop(observer_id, None)
