"""Flow control's pure rules: limits, their buckets, partitions and the lane a job is claimed from
(docs/flow-control.md).

A :class:`Limit` bounds the attempts of every job declared under it, per *bucket*: at most
``concurrency`` Leased at once, at most ``rate`` claimed in any window of ``period`` seconds.
A job's buckets (one per limit, :data:`LimitKeys`) and its partition are worked out at enqueue and
stored on its row; :func:`lane_of` folds them into one integer, the *lane*, which the claim index
groups a queue's jobs by, so that a claim can step over a whole held lane without reading its jobs.
Jobs with neither a limit nor a partition are in lane 0 and are claimed exactly as before.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from .validation import validate_queue_name

#: The longest bucket or partition name (the same bound as the columns that store them).
MAX_BUCKET_LENGTH = 200
#: The bucket of a limit without a ``key``: one bucket for the whole limit.
WHOLE_LIMIT = ""
#: The lane of jobs with no limit and no partition.
PLAIN_LANE = 0
#: How long past the longest period a rate's starts are kept: a claim counts the starts after its
#: own ``now - period``, and a worker whose clock is behind another's (or that read its clock
#: before another's claim committed) must still find them. Rates are exact while the claimers'
#: clocks agree within this margin (docs/flow-control.md).
CLOCK_MARGIN_SECONDS = 60.0

#: A job's buckets: ``((limit name, bucket), ...)``, sorted by limit name, one per limit.
LimitKeys = tuple[tuple[str, str], ...]
#: How a bucket or a partition is named: an argument's name, or a callable given the job's
#: arguments as they were passed (``*args, **kwargs``) that returns the name.
KeySource = str | Callable[..., Any]


@dataclass(frozen=True, slots=True)
class LimitValues:
    """A limit's bounds: at most ``concurrency`` Leased at once and at most ``rate`` claims in any
    window of ``period`` seconds, per bucket; None is no bound of that kind."""

    concurrency: int | None
    rate: int | None
    period: float

    def __post_init__(self) -> None:
        _require_bound("concurrency", self.concurrency)
        _require_bound("rate", self.rate)
        object.__setattr__(self, "period", _require_period(self.period))
        if self.concurrency is None and self.rate is None:
            raise ValueError("a limit needs a concurrency, a rate, or both")

    def describe(self) -> str:
        """``"5 at once, 100 per 1 s"``: the bounds in words, for the console, the CLI and errors."""
        parts = []
        if self.concurrency is not None:
            parts.append(f"{self.concurrency} at once")
        if self.rate is not None:
            parts.append(f"{self.rate} per {self.period:g} s")
        return ", ".join(parts)


@dataclass(frozen=True, slots=True, init=False)
class Limit:
    """A limit jobs are declared under: ``@job(limits=[Limit("stripe", rate=100, period=1)])``.

    ``name`` identifies the limit across jobs and queues (the queue-name rule); every declaration
    of one name must agree on the bounds. ``key`` picks the bucket: None, one bucket for the whole
    limit; the name of one of the job's arguments, whose value (as ``str``) names the bucket; or a
    callable given the job's arguments (``*args, **kwargs``) that returns the bucket's name.
    """

    name: str
    values: LimitValues
    key: KeySource | None

    def __init__(
        self,
        name: str,
        *,
        concurrency: int | None = None,
        rate: int | None = None,
        period: float | timedelta = 1.0,
        key: KeySource | None = None,
    ) -> None:
        object.__setattr__(self, "name", validate_queue_name(name, "Limit name"))
        object.__setattr__(self, "values", LimitValues(concurrency, rate, _require_period(period)))
        object.__setattr__(self, "key", _require_key_source("key", key))

    @property
    def concurrency(self) -> int | None:
        return self.values.concurrency

    @property
    def rate(self) -> int | None:
        return self.values.rate

    @property
    def period(self) -> float:
        return self.values.period

    def bucket(self, args: Sequence[Any], kwargs: Mapping[str, Any], bound: Mapping[str, Any]) -> str:
        """The bucket a job with these arguments is in. ``bound`` maps each parameter's name to
        its value (defaults applied), for a ``key`` that names an argument."""
        if self.key is None:
            return WHOLE_LIMIT
        return key_value(f"limit {self.name!r}", self.key, args, kwargs, bound)

    def __repr__(self) -> str:
        return f"Limit({self.name!r}, {self.values.describe()}{'' if self.key is None else ', keyed'})"


def key_value(
    what: str, source: KeySource, args: Sequence[Any], kwargs: Mapping[str, Any], bound: Mapping[str, Any]
) -> str:
    """The bucket or partition name ``source`` gives for a job's arguments (see :class:`Limit`)."""
    if isinstance(source, str):
        if source not in bound:
            raise ValueError(f"{what}: the job has no argument named {source!r}")
        value: Any = bound[source]
    else:
        value = source(*args, **kwargs)
        if not isinstance(value, str):
            raise TypeError(f"{what}: the key function must return a str, got {type(value).__name__}")
    return require_bucket(what, str(value))


def require_bucket(what: str, value: object) -> str:
    """A bucket or partition name: a string of 1 to :data:`MAX_BUCKET_LENGTH` characters."""
    if not isinstance(value, str):
        raise TypeError(f"{what} must be a str, got {type(value).__name__}")
    if not value or len(value) > MAX_BUCKET_LENGTH:
        raise ValueError(f"{what} must be 1 to {MAX_BUCKET_LENGTH} characters, got {value!r}")
    return value


def agreeing(limits: Iterable[Limit], declared: Mapping[str, LimitValues]) -> dict[str, LimitValues]:
    """``declared`` with ``limits`` added; a limit whose name is declared with other bounds raises
    ``ValueError`` (every declaration of a name must agree)."""
    merged = dict(declared)
    for limit in limits:
        known = merged.setdefault(limit.name, limit.values)
        if known != limit.values:
            raise ValueError(
                f"limit {limit.name!r} is declared twice with different bounds: "
                f"{known.describe()} and {limit.values.describe()}"
            )
    return merged


def limit_keys(
    limits: Sequence[Limit],
    args: Sequence[Any],
    kwargs: Mapping[str, Any],
    bound: Mapping[str, Any],
    chosen: Mapping[str, str] | None = None,
) -> LimitKeys:
    """A job's buckets, one per limit, sorted by name. ``chosen`` (``.using(limit_keys=...)``) sets
    buckets by limit name; a name that is not one of ``limits`` raises ``ValueError``."""
    picked = dict(chosen or {})
    names = {limit.name for limit in limits}
    unknown = sorted(set(picked) - names)
    if unknown:
        known = ", ".join(sorted(names)) or "none"
        named = ", ".join(map(repr, unknown))
        raise ValueError(f"limit_keys names {named}, not a limit of this job (its limits: {known})")
    keys = {
        limit.name: (
            require_bucket(f"limit_keys[{limit.name!r}]", picked[limit.name])
            if limit.name in picked
            else limit.bucket(args, kwargs, bound)
        )
        for limit in limits
    }
    return tuple(sorted(keys.items()))


def lane_of(partition: str | None, keys: LimitKeys) -> int:
    """The lane of a job with this partition and these buckets: :data:`PLAIN_LANE` for neither,
    otherwise a stable, non-zero 63-bit number (the same on every host and release)."""
    if partition is None and not keys:
        return PLAIN_LANE
    text = "\x1e".join([partition or "", *(f"{name}\x1f{bucket}" for name, bucket in keys)])
    if partition is None:
        text = "\x1d" + text  # no partition differs from a partition named ""
    lane = int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "big") >> 1
    return lane or 1


def _require_bound(name: str, value: object) -> None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise ValueError(f"{name} must be an integer of at least 1, or None, got {value!r}")


def _require_period(value: object) -> float:
    if isinstance(value, timedelta):
        value = value.total_seconds()
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < float("inf"):
        raise ValueError(f"period must be a positive number of seconds or a timedelta, got {value!r}")
    return float(value)


def _require_key_source(name: str, value: object) -> KeySource | None:
    if value is None or callable(value):
        return value
    if isinstance(value, str) and value.isidentifier():
        return value
    raise TypeError(f"{name} must be an argument's name, a callable or None, got {value!r}")


def in_force(declared: LimitValues | None, override: LimitValues | None) -> LimitValues | None:
    """The bounds a claim obeys: an operator's override while one is set, else the declared ones;
    None when the limit is neither declared nor overridden (its jobs are held until it is)."""
    return override if override is not None else declared


def describe_bucket(name: str, bucket: str) -> str:
    """``"limit stripe, bucket acme"`` (``"limit stripe"`` for a limit without a key)."""
    return f"limit {name}" if bucket == WHOLE_LIMIT else f"limit {name}, bucket {bucket}"


def flow_columns(partition: str | None, keys: LimitKeys) -> dict[str, Any]:
    """What a job row (or a schedule's row, for its instances) stores for this partition and
    these buckets: ``partition``, ``limit_keys`` (``[[name, bucket], ...]``, None for none) and
    ``lane``."""
    return {
        "partition": partition,
        "limit_keys": [list(pair) for pair in keys] or None,
        "lane": lane_of(partition, keys),
    }


def stored_limit_keys(value: object) -> LimitKeys:
    """A stored ``limit_keys`` column (``[[name, bucket], ...]`` or null) as :data:`LimitKeys`."""
    if not value:
        return ()
    if not isinstance(value, list):
        raise TypeError(f"limit_keys must be a list of [name, bucket] pairs, got {value!r}")
    return tuple((str(name), str(bucket)) for name, bucket in value)
