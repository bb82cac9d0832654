"""Flow control on a job definition (docs/flow-control.md): checking ``@job(limits=...,
partition=...)`` when a job is declared, and working out each enqueued job's partition and
buckets from its arguments. The rules themselves (buckets, lanes, agreement) are in
``core/limits.py``; the registry keeps each definition's declaration.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from django.core.exceptions import ImproperlyConfigured

from .core.limits import (
    KeySource,
    Limit,
    LimitKeys,
    LimitValues,
    agreeing,
    key_value,
    limit_keys,
    require_bucket,
)

if TYPE_CHECKING:
    from .registry import JobDefinition


def limit_list(wire_name: str, limits: object) -> tuple[Limit, ...]:
    """``@job(limits=...)``: a sequence of ``Limit(...)`` (one alone is taken as a list), each name once."""
    if isinstance(limits, Limit):
        limits = (limits,)
    if isinstance(limits, str | bytes) or not isinstance(limits, Sequence):
        raise TypeError(f"@job({wire_name!r}) limits must be a sequence of Limit(...), got {limits!r}")
    seen: set[str] = set()
    for index, limit in enumerate(limits):
        if not isinstance(limit, Limit):
            raise TypeError(f"@job({wire_name!r}) limits[{index}] must be a Limit(...), got {limit!r}")
        if limit.name in seen:
            raise ValueError(f"@job({wire_name!r}) declares the limit {limit.name!r} twice")
        seen.add(limit.name)
    return tuple(limits)


def checked_options(
    wire_name: str, limits: object, partition: object
) -> tuple[tuple[Limit, ...], KeySource | None]:
    """``@job(limits=..., partition=...)`` checked: :func:`limit_list`, and a partition that is
    None, an argument's name or a callable (whether it names an argument is checked with the
    function, by :func:`require_declaration`)."""
    if partition is not None and not callable(partition) and not isinstance(partition, str):
        raise TypeError(
            f"@job({wire_name!r}) partition must be an argument's name or a callable, got {partition!r}"
        )
    return limit_list(wire_name, limits), partition


def require_declaration(definition: JobDefinition[Any, Any], declared: Mapping[str, LimitValues]) -> None:
    """Raise ``ImproperlyConfigured`` unless every key and partition given as an argument's name
    names one of the function's arguments, and every limit agrees with ``declared`` (the other
    registered jobs' declarations)."""
    sources: list[tuple[str, KeySource | None]] = [
        (f"limit {limit.name!r} key", limit.key) for limit in definition.limits
    ]
    parameters = definition.signature.parameters
    for what, source in [*sources, ("partition", definition.partition)]:
        if isinstance(source, str) and source not in parameters:
            raise ImproperlyConfigured(
                f"@job({definition.wire_name!r}) {what} names {source!r}, which is not an argument of "
                f"{definition.func.__qualname__} (its arguments: {', '.join(parameters) or '(none)'})"
            )
    try:
        agreeing(definition.limits, declared)
    except ValueError as exc:
        raise ImproperlyConfigured(
            f"@job({definition.wire_name!r}): {exc}; every declaration must agree"
        ) from None


def partition_and_buckets(
    definition: JobDefinition[Any, Any],
    args: Sequence[Any],
    kwargs: Mapping[str, Any],
    partition: str | None,
    chosen: Mapping[str, str] | None,
) -> tuple[str | None, LimitKeys]:
    """A call's partition and buckets (``JobDefinition.flow``). The call is bound (defaults
    applied) only when a key or the partition names an argument."""
    sources = [limit.key for limit in definition.limits]
    if definition.partition is not None and partition is None:
        sources.append(definition.partition)
    bound: Mapping[str, Any] = {}
    if any(isinstance(source, str) for source in sources):
        try:
            arguments = definition.signature.bind(*args, **kwargs)
        except TypeError as exc:
            raise TypeError(f"{definition.wire_name}: {exc}") from None
        arguments.apply_defaults()
        bound = arguments.arguments
    if partition is None and definition.partition is not None:
        what = f"job {definition.wire_name!r} partition"
        partition = key_value(what, definition.partition, args, kwargs, bound)
    return partition, limit_keys(definition.limits, args, kwargs, bound, chosen)


def checked_limit_keys(definition: JobDefinition[Any, Any], chosen: object) -> dict[str, str]:
    """``.using(limit_keys=...)``: a mapping of the job's limit names to buckets; a name that is
    not one of its limits raises ``ValueError`` naming them."""
    if not isinstance(chosen, Mapping):
        raise TypeError(f"limit_keys must be a mapping of limit name to bucket, got {chosen!r}")
    names = {limit.name for limit in definition.limits}
    unknown = sorted(str(name) for name in chosen if name not in names)
    if unknown:
        raise ValueError(
            f"limit_keys names {', '.join(map(repr, unknown))}, not a limit of job "
            f"{definition.wire_name!r} (its limits: {', '.join(sorted(names)) or 'none'})"
        )
    return {name: require_bucket(f"limit_keys[{name!r}]", bucket) for name, bucket in chosen.items()}
