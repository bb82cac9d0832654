"""The ``settings.BACKWAVE`` accessor: defaults, validation, and a cache reset on ``setting_changed``.

Read settings through :func:`get_settings`; it returns a frozen, fully resolved
:class:`BackWaveSettings` (durations as ``timedelta``, the history policy as a member, the
environment kill-switch applied). Invalid settings raise ``ImproperlyConfigured`` with every
problem listed; ``manage.py check`` reports the same problems as ``backwave.E001``.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.core.signals import setting_changed
from django.dispatch import receiver

from .core.retry import RetryPolicy
from .core.states import HistoryPolicy
from .core.validation import validate_queue_name, validate_schedule_id

SETTING_NAME = "BACKWAVE"
DISABLE_FAILURE_DETAIL_ENV = "BACKWAVE_DISABLE_FAILURE_DETAIL"
#: Set (``1``/``true``/``yes``/``on``), no one sees payloads, outputs or failure detail: not in the
#: console whatever the permissions, not with the CLI's ``show --sensitive``.
DISABLE_SENSITIVE_ENV = "BACKWAVE_DISABLE_SENSITIVE_DATA"
TRUTHY = frozenset({"1", "true", "yes", "on"})

#: Largest wire name / schedule id the columns hold; MAX_WIRE_NAME_LENGTH may not exceed it.
WIRE_NAME_COLUMN_LENGTH = 255

DEFAULTS: dict[str, Any] = {
    "MAX_PAYLOAD_BYTES": 65_536,
    "MAX_WIRE_NAME_LENGTH": 128,
    "MAX_PARENTS_PER_JOB": 16,
    "MAX_OUTPUT_BYTES": 65_536,
    "MAX_FAILURE_DETAIL_BYTES": 8_192,
    "MAX_TRANSITIONS_PER_JOB": 64,
    "MAX_CLAIM_BATCH": 32,
    "MAX_PURGE_BATCH": 500,
    "MAX_RECORDED_SKIPPED_TICKS": 32,
    "LEASE_DURATION": timedelta(seconds=60),
    "HEARTBEAT_INTERVAL": None,  # None: a third of LEASE_DURATION
    "POLL_INTERVAL": timedelta(seconds=1),
    "MAINTENANCE_INTERVAL": timedelta(seconds=5),
    "CONCURRENCY": 20,
    "PREFETCH": None,  # leases held ready beyond the busy slots; None: fill a claim batch (worker.md)
    "BATCH_WINDOW": timedelta(0),  # how long a claim or an outcome write may wait for company (worker.md)
    "JOB_TIMEOUT": None,  # None: handlers run without a time limit unless their job sets one
    "TIMEOUT_GRACE": timedelta(seconds=10),  # after a timeout, how long a sync handler has to stop
    "RETRY": {"MAX_ATTEMPTS": 10, "BACKOFF": None},  # None: min(2 ** attempt, 300) seconds
    "OBSERVER_RETRY": {"MAX_ATTEMPTS": 10, "BACKOFF": None},  # for observer deliveries, the same shape
    "OBSERVER_TIMEOUT": timedelta(seconds=30),  # one delivery may take this long
    "RETENTION": {
        "SUCCEEDED_OR_CANCELLED": timedelta(hours=24),
        "DEAD_LETTERED_OR_QUARANTINED": timedelta(days=14),
    },
    "HISTORY": HistoryPolicy.TRANSITIONS_AND_FAILURE_DETAIL,
    "SCHEDULES": {},
    "PRUNE_SCHEDULES": True,  # remove settings-declared schedules that are no longer declared
    "QUEUES": {},
    # The console's actions over a whole filter ask for a second confirmation above this many jobs.
    "CONSOLE_BULK_LIMIT": 10_000,
    "DATABASE": None,  # None: wherever the routers send the job models ("default" without one)
    "LISTEN_DATABASE": None,  # None: the jobs' own alias
    "METRICS_COUNT_INTERVAL": timedelta(seconds=15),  # the metrics' job counts are at most this old
    "METRICS_TOKEN": None,  # None: the metrics view answers staff sessions only
}

_POSITIVE_INTS = (
    "MAX_PAYLOAD_BYTES",
    "MAX_WIRE_NAME_LENGTH",
    "MAX_PARENTS_PER_JOB",
    "MAX_OUTPUT_BYTES",
    "MAX_FAILURE_DETAIL_BYTES",
    "MAX_TRANSITIONS_PER_JOB",
    "MAX_CLAIM_BATCH",
    "MAX_PURGE_BATCH",
    "MAX_RECORDED_SKIPPED_TICKS",
    "CONCURRENCY",
    "CONSOLE_BULK_LIMIT",
)
_RETENTION_KEYS = ("SUCCEEDED_OR_CANCELLED", "DEAD_LETTERED_OR_QUARANTINED")
_RETRY_KEYS = ("MAX_ATTEMPTS", "BACKOFF")


@dataclass(frozen=True, kw_only=True)
class BackWaveSettings:
    max_payload_bytes: int
    max_wire_name_length: int
    max_parents_per_job: int
    max_output_bytes: int
    max_failure_detail_bytes: int
    max_transitions_per_job: int
    max_claim_batch: int
    max_purge_batch: int
    max_recorded_skipped_ticks: int
    lease_duration: timedelta
    heartbeat_interval: timedelta
    poll_interval: timedelta
    maintenance_interval: timedelta
    concurrency: int
    prefetch: int | None
    batch_window: timedelta
    job_timeout: timedelta | None
    timeout_grace: timedelta
    retry: RetryPolicy
    observer_retry: RetryPolicy
    observer_timeout: timedelta
    retention_succeeded_or_cancelled: timedelta | None
    retention_dead_lettered_or_quarantined: timedelta | None
    history: HistoryPolicy
    schedules: Mapping[str, Mapping[str, Any]]
    prune_schedules: bool
    queues: Mapping[str, Mapping[str, Any]]
    console_bulk_limit: int
    database: str | None
    listen_database: str | None
    metrics_count_interval: timedelta
    metrics_token: str | None


def env_flag(name: str) -> bool:
    """True when the environment variable is ``1``/``true``/``yes``/``on`` (trimmed, any case)."""
    return os.environ.get(name, "").strip().lower() in TRUTHY


def _duration(value: Any, key: str, errors: list[str], *, allow_zero: bool = False) -> timedelta:
    if isinstance(value, bool) or not isinstance(value, int | float | timedelta):
        errors.append(f"{key} must be a timedelta or a number of seconds, got {value!r}.")
        return timedelta(seconds=1)
    result = value if isinstance(value, timedelta) else timedelta(seconds=value)
    if result < timedelta(0) or (result == timedelta(0) and not allow_zero):
        bound = "zero or more" if allow_zero else "greater than zero"
        errors.append(f"{key} must be {bound}, got {value!r}.")
    return result


#: The longest ``BATCH_WINDOW``: the latency it adds to every job stays under a second.
MAX_BATCH_WINDOW = timedelta(seconds=1)


def _batch_window(value: Any, lease_left: timedelta, errors: list[str]) -> timedelta:
    """``BATCH_WINDOW``: a duration from zero (the default: nothing waits) to one second, and
    shorter than ``lease_left``, the least a finished job's lease has left (its lease less the
    heartbeat interval: a lease is renewed only while its job runs)."""
    window = _duration(value, "BATCH_WINDOW", errors, allow_zero=True)
    if window > MAX_BATCH_WINDOW:
        errors.append(f"BATCH_WINDOW must be at most one second, got {value!r}.")
    elif window and window >= lease_left:
        errors.append(
            f"BATCH_WINDOW ({window}) must be shorter than LEASE_DURATION less HEARTBEAT_INTERVAL "
            f"({lease_left}): a finished job's outcome would wait past its lease."
        )
    return window


def _flag(value: Any, key: str, errors: list[str]) -> bool:
    if not isinstance(value, bool):
        errors.append(f"{key} must be True or False, got {value!r}.")
        return True
    return value


def _alias(value: Any, key: str, errors: list[str]) -> str | None:
    """A database alias or None (whether ``DATABASES`` has it is checked once apps are ready: E006)."""
    if value is None or (isinstance(value, str) and value):
        return value
    errors.append(f"{key} must be a database alias (a key of DATABASES) or None, got {value!r}.")
    return None


def _token(value: Any, errors: list[str]) -> str | None:
    if value is None or (isinstance(value, str) and value.strip()):
        return value
    errors.append("METRICS_TOKEN must be a non-empty string (a bearer token) or None.")
    return None


def _history(value: Any, errors: list[str]) -> HistoryPolicy:
    if isinstance(value, HistoryPolicy):
        return value
    if isinstance(value, str) and value.upper() in HistoryPolicy.names:
        return HistoryPolicy[value.upper()]
    errors.append(
        f"HISTORY must be a HistoryPolicy member or one of {', '.join(HistoryPolicy.names)}, got {value!r}."
    )
    return HistoryPolicy.TRANSITIONS_AND_FAILURE_DETAIL


def _sub_dict(
    user: Mapping[str, Any], key: str, allowed: tuple[str, ...], errors: list[str]
) -> dict[str, Any]:
    merged = dict(DEFAULTS[key])
    value = user.get(key, {})
    if not isinstance(value, Mapping):
        errors.append(f"{key} must be a dict with the keys {', '.join(allowed)}, got {value!r}.")
        return merged
    for unknown in sorted(set(value) - set(allowed)):
        errors.append(f"{key} has an unknown key {unknown!r}; known keys: {', '.join(allowed)}.")
    merged.update({k: v for k, v in value.items() if k in allowed})
    return merged


def _queues(value: Any, errors: list[str]) -> dict[str, dict[str, Any]]:
    if not isinstance(value, Mapping):
        errors.append(f"QUEUES must be a dict of queue name -> options, got {value!r}.")
        return {}
    result: dict[str, dict[str, Any]] = {}
    for queue, options in value.items():
        try:
            validate_queue_name(queue, "QUEUES key")
        except (TypeError, ValueError) as exc:
            errors.append(f"{exc}.")
            continue
        if not isinstance(options, Mapping):
            errors.append(f"QUEUES[{queue!r}] must be a dict, got {options!r}.")
            continue
        for unknown in sorted(set(options) - {"concurrency_limit"}):
            errors.append(f"QUEUES[{queue!r}] has an unknown key {unknown!r}; known keys: concurrency_limit.")
        limit = options.get("concurrency_limit")
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
            errors.append(
                f"QUEUES[{queue!r}]['concurrency_limit'] must be None or an int >= 0, got {limit!r}."
            )
        result[queue] = dict(options)
    return result


_SCHEDULE_KEYS = ("job", "cron", "time_zone", "args", "kwargs", "queue", "catch_up", "no_overlap")


def _schedules(value: Any, errors: list[str]) -> dict[str, dict[str, Any]]:
    """Validate settings-declared schedules (whether the job exists is checked once apps are ready)."""
    from .core import planner

    if not isinstance(value, Mapping) or not all(
        isinstance(k, str) and k and isinstance(v, Mapping) for k, v in value.items()
    ):
        errors.append(f"SCHEDULES must be a dict of schedule id -> options dict, got {value!r}.")
        return {}
    for schedule_id, options in value.items():
        where = f"SCHEDULES[{schedule_id!r}]"
        try:
            validate_schedule_id(schedule_id, "SCHEDULES key")
        except ValueError as exc:
            errors.append(f"{exc}.")
        if options.get("queue") is not None:
            try:
                validate_queue_name(options["queue"], f"{where}['queue']")
            except (TypeError, ValueError) as exc:
                errors.append(f"{exc}.")
        for unknown in sorted(set(options) - set(_SCHEDULE_KEYS)):
            errors.append(f"{where} has an unknown key {unknown!r}; known keys: {', '.join(_SCHEDULE_KEYS)}.")
        if not isinstance(options.get("job"), str) or not options.get("job"):
            errors.append(f"{where} needs 'job': the wire name of the job to run.")
        try:
            planner.require_schedulable(options.get("cron"), options.get("time_zone"))
        except (TypeError, ValueError) as exc:
            errors.append(f"{where}: {exc}")
        if str(options.get("catch_up", "skip")).lower() not in ("skip", "coalesce"):
            errors.append(
                f"{where}['catch_up'] must be 'skip' or 'coalesce', got {options.get('catch_up')!r}."
            )
        if not isinstance(options.get("no_overlap", False), bool):
            errors.append(f"{where}['no_overlap'] must be True or False.")
        if not isinstance(options.get("args", []), list | tuple) or not isinstance(
            options.get("kwargs", {}), Mapping
        ):
            errors.append(f"{where}: 'args' must be a list and 'kwargs' a dict.")
    return {k: dict(v) for k, v in value.items()}


def load(user: Any) -> tuple[BackWaveSettings, list[str]]:
    """Resolve a user's ``BACKWAVE`` dict against the defaults; returns the settings and any errors."""
    errors: list[str] = []
    if user is None:
        user = {}
    if not isinstance(user, Mapping):
        return load({})[0], [f"settings.BACKWAVE must be a dict, got {type(user).__name__}."]
    for unknown in sorted(set(user) - set(DEFAULTS)):
        errors.append(f"BACKWAVE has an unknown key {unknown!r}.")
    merged = {**DEFAULTS, **{k: v for k, v in user.items() if k in DEFAULTS}}

    ints = _positive_ints(merged, errors)
    lease, heartbeat = _lease_and_heartbeat(merged, errors)
    retry = _retry_policy(user, "RETRY", errors)
    observer_retry = _retry_policy(user, "OBSERVER_RETRY", errors)
    retention_options = _sub_dict(user, "RETENTION", _RETENTION_KEYS, errors)
    retention = {
        key: None if value is None else _duration(value, f"RETENTION[{key!r}]", errors, allow_zero=True)
        for key, value in retention_options.items()
    }
    history = _history(merged["HISTORY"], errors)
    if history is HistoryPolicy.TRANSITIONS_AND_FAILURE_DETAIL and env_flag(DISABLE_FAILURE_DETAIL_ENV):
        history = HistoryPolicy.TRANSITIONS
    prefetch = _prefetch(merged["PREFETCH"], errors)

    resolved = BackWaveSettings(
        **ints,
        prefetch=prefetch,
        batch_window=_batch_window(merged["BATCH_WINDOW"], lease - heartbeat, errors),
        lease_duration=lease,
        heartbeat_interval=heartbeat,
        poll_interval=_duration(merged["POLL_INTERVAL"], "POLL_INTERVAL", errors),
        maintenance_interval=_duration(merged["MAINTENANCE_INTERVAL"], "MAINTENANCE_INTERVAL", errors),
        job_timeout=None
        if merged["JOB_TIMEOUT"] is None
        else _duration(merged["JOB_TIMEOUT"], "JOB_TIMEOUT", errors),
        timeout_grace=_duration(merged["TIMEOUT_GRACE"], "TIMEOUT_GRACE", errors, allow_zero=True),
        retry=retry,
        observer_retry=observer_retry,
        observer_timeout=_duration(merged["OBSERVER_TIMEOUT"], "OBSERVER_TIMEOUT", errors),
        retention_succeeded_or_cancelled=retention["SUCCEEDED_OR_CANCELLED"],
        retention_dead_lettered_or_quarantined=retention["DEAD_LETTERED_OR_QUARANTINED"],
        history=history,
        schedules=_schedules(merged["SCHEDULES"], errors),
        prune_schedules=_flag(merged["PRUNE_SCHEDULES"], "PRUNE_SCHEDULES", errors),
        queues=_queues(merged["QUEUES"], errors),
        database=_alias(merged["DATABASE"], "DATABASE", errors),
        listen_database=_alias(merged["LISTEN_DATABASE"], "LISTEN_DATABASE", errors),
        metrics_count_interval=_duration(
            merged["METRICS_COUNT_INTERVAL"], "METRICS_COUNT_INTERVAL", errors, allow_zero=True
        ),
        metrics_token=_token(merged["METRICS_TOKEN"], errors),
    )
    return resolved, errors


def _positive_ints(merged: Mapping[str, Any], errors: list[str]) -> dict[str, int]:
    """The settings that are positive ints, by their lower-case field names (a bad one: its default)."""
    ints: dict[str, int] = {}
    for key in _POSITIVE_INTS:
        value = merged[key]
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            errors.append(f"{key} must be a positive int, got {value!r}.")
            value = DEFAULTS[key]
        ints[key.lower()] = value
    if ints["max_wire_name_length"] > WIRE_NAME_COLUMN_LENGTH:
        errors.append(
            f"MAX_WIRE_NAME_LENGTH is at most {WIRE_NAME_COLUMN_LENGTH} (the column size), "
            f"got {ints['max_wire_name_length']}."
        )
    return ints


def _lease_and_heartbeat(merged: Mapping[str, Any], errors: list[str]) -> tuple[timedelta, timedelta]:
    """``LEASE_DURATION`` and ``HEARTBEAT_INTERVAL`` (a third of the lease unless set; shorter than it)."""
    lease = _duration(merged["LEASE_DURATION"], "LEASE_DURATION", errors)
    if merged["HEARTBEAT_INTERVAL"] is None:
        return lease, lease / 3
    heartbeat = _duration(merged["HEARTBEAT_INTERVAL"], "HEARTBEAT_INTERVAL", errors)
    if heartbeat >= lease:
        errors.append(
            f"HEARTBEAT_INTERVAL ({heartbeat}) must be shorter than LEASE_DURATION ({lease}); "
            "a third of it is the default."
        )
    return lease, heartbeat


def _retry_policy(user: Mapping[str, Any], key: str, errors: list[str]) -> RetryPolicy:
    """The retry policy the sub-dict ``key`` (``RETRY`` or ``OBSERVER_RETRY``) declares."""
    options = _sub_dict(user, key, _RETRY_KEYS, errors)
    try:
        return RetryPolicy(max_attempts=options["MAX_ATTEMPTS"], backoff=options["BACKOFF"])
    except (TypeError, ValueError) as exc:
        errors.append(f"{key} is invalid: {exc}")
        return RetryPolicy()


def _prefetch(value: Any, errors: list[str]) -> int | None:
    """``PREFETCH``: None or an int >= 0."""
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
        errors.append(f"PREFETCH must be None or an int >= 0, got {value!r}.")
        return DEFAULTS["PREFETCH"]  # type: ignore[no-any-return]
    return value


@functools.cache
def _load_cached() -> tuple[BackWaveSettings, tuple[str, ...]]:
    resolved, errors = load(getattr(settings, SETTING_NAME, None))
    return resolved, tuple(errors)


def settings_errors() -> list[str]:
    """Every problem with ``settings.BACKWAVE`` (empty when it is valid)."""
    return list(_load_cached()[1])


def get_settings() -> BackWaveSettings:
    """The resolved settings; raises ``ImproperlyConfigured`` listing every problem."""
    resolved, errors = _load_cached()
    if errors:
        raise ImproperlyConfigured("Invalid settings.BACKWAVE:\n- " + "\n- ".join(errors))
    return resolved


def resolved_settings() -> BackWaveSettings:
    """The settings as far as they resolve, never raising: an invalid value reads as its default.

    For code that must keep working while an unrelated key is wrong, such as the database router
    (``manage.py check`` reports the problem as ``backwave.E001``). Everything else uses
    :func:`get_settings`.
    """
    return _load_cached()[0]


def reset() -> None:
    """Forget the cached settings (and re-read the environment switches) on the next access."""
    _load_cached.cache_clear()


@receiver(setting_changed)
def _reset_on_setting_changed(*, setting: str, **kwargs: Any) -> None:
    if setting == SETTING_NAME:
        reset()
