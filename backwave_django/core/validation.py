"""Argument checks shared by every layer: each returns the value or raises naming the argument.

A malformed call fails here, before any database work, with a message that says which argument
was wrong and what was expected.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterable
from datetime import datetime, timedelta

MAX_QUEUE_NAME_LENGTH = 128
#: The longest schedule id: its instances' transition entries carry the actor ``schedule:{id}``,
#: which must fit the 255-character actor column.
MAX_SCHEDULE_ID_LENGTH = 128
#: The longest trace context accepted (a version-00 ``traceparent`` is 55 characters; later
#: versions may append fields, which W3C Trace Context bounds at 512 characters in all).
MAX_TRACE_CONTEXT_LENGTH = 512
#: A W3C ``traceparent``: version, trace id, parent span id and flags, lowercase hex; versions
#: after 00 may carry more fields after a ``-``.
_TRACEPARENT = re.compile(r"([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-[0-9a-f]{2}(-.*)?", re.DOTALL)


def require_aware(name: str, value: object) -> datetime:
    """Return ``value`` if it is a timezone-aware datetime, else raise naming the argument."""
    if not isinstance(value, datetime):
        raise TypeError(f"{name} must be a timezone-aware datetime, got {type(value).__name__}")
    if value.tzinfo is None or value.tzinfo.utcoffset(value) is None:
        raise ValueError(f"{name} must be timezone-aware, got the naive datetime {value.isoformat()}")
    return value


def require_positive_duration(name: str, value: object) -> timedelta:
    """Return ``value`` if it is a ``timedelta`` greater than zero, else raise naming the argument."""
    if not isinstance(value, timedelta):
        raise TypeError(f"{name} must be a timedelta, got {type(value).__name__}")
    if value <= timedelta(0):
        raise ValueError(f"{name} must be greater than zero, got {value}")
    return value


def require_uuid(name: str, value: object) -> uuid.UUID:
    """Return ``value`` if it is a ``uuid.UUID``, else raise naming the argument."""
    if not isinstance(value, uuid.UUID):
        raise TypeError(f"{name} must be a uuid.UUID, got {type(value).__name__}")
    return value


def require_timeout(value: object, name: str = "timeout") -> float:
    """A handler's time limit: a ``timedelta`` or seconds, greater than zero; returns seconds."""
    if isinstance(value, bool) or not isinstance(value, int | float | timedelta):
        raise TypeError(f"{name} must be a timedelta or a number of seconds, got {value!r}")
    seconds = value.total_seconds() if isinstance(value, timedelta) else float(value)
    if not seconds > 0 or seconds == float("inf"):
        raise ValueError(f"{name} must be greater than zero (and finite), got {value!r}")
    return seconds


def require_str(name: str, value: object, *, allow_empty: bool = False) -> str:
    """Return ``value`` if it is a string (non-empty unless ``allow_empty``), else raise."""
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a str, got {type(value).__name__}")
    if not allow_empty and not value:
        raise ValueError(f"{name} must be non-empty")
    return value


def require_count(name: str, value: object) -> int:
    """Return ``value`` if it is an int >= 0 (not a bool), else raise naming the argument."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{name} must be an int >= 0, got {value!r}")
    return value


def require_concurrency_limit(limit: object) -> int | None:
    """A queue's concurrency limit: None (no limit) or an int >= 0 (0 blocks the queue)."""
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
        raise ValueError(f"limit must be None or an int >= 0, got {limit!r}")
    return limit


def require_actor(actor: object) -> str:
    """Who acts (an operator's name, ``settings``, ``cli:…``): a non-empty string."""
    if not isinstance(actor, str) or not actor:
        raise ValueError(f"actor must be a non-empty string naming who acts, got {actor!r}")
    return actor


def require_worker_id(worker_id: object) -> str:
    if not isinstance(worker_id, str) or not worker_id:
        raise ValueError(f"worker_id must be a non-empty string, got {worker_id!r}")
    return worker_id


#: The queue-name rule, as messages state it (docs/admin.md, "Queues"; docs/cli.md, "Queues").
QUEUE_NAME_RULE = (
    f"a queue name is 1 to {MAX_QUEUE_NAME_LENGTH} characters with no whitespace or control "
    "characters and no ',' or '=' (backwave_worker --queues a,b and --weighted a=6 use them "
    "to separate queues)"
)
#: The schedule-id rule, as messages state it (docs/schedules.md, "Schedule ids").
SCHEDULE_ID_RULE = (
    f"a schedule id is 1 to {MAX_SCHEDULE_ID_LENGTH} characters with no whitespace or control characters"
)


def _first_unprintable(value: str, also: str = "") -> str | None:
    """The first whitespace or control character of ``value`` (or one of ``also``), or None."""
    for char in value:
        if char.isspace() or not char.isprintable() or char in also:
            return char
    return None


def validate_queue_name(queue: object, name: str = "queue") -> str:
    """A queue name by :data:`QUEUE_NAME_RULE`, the one rule every layer applies; else ``ValueError``."""
    require_str(name, queue)
    assert isinstance(queue, str)
    if len(queue) > MAX_QUEUE_NAME_LENGTH:
        raise ValueError(f"{name} is at most {MAX_QUEUE_NAME_LENGTH} characters, got {len(queue)}")
    bad = _first_unprintable(queue, ",=")
    if bad is not None:
        raise ValueError(
            f"{name} {queue!r} is not a valid queue name: {QUEUE_NAME_RULE}; it contains {bad!r}"
        )
    return queue


def validate_schedule_id(schedule_id: object, name: str = "schedule_id") -> str:
    """A schedule id by :data:`SCHEDULE_ID_RULE` (forms, the operator, settings, code); else raise."""
    require_str(name, schedule_id)
    assert isinstance(schedule_id, str)
    if len(schedule_id) > MAX_SCHEDULE_ID_LENGTH:
        raise ValueError(
            f"{name} is at most {MAX_SCHEDULE_ID_LENGTH} characters, got {len(schedule_id)}: "
            f"{SCHEDULE_ID_RULE}"
        )
    bad = _first_unprintable(schedule_id)
    if bad is not None:
        raise ValueError(
            f"{name} {schedule_id!r} is not a valid schedule id: {SCHEDULE_ID_RULE}; it contains {bad!r}"
        )
    return schedule_id


def require_queues(queues: object) -> list[str]:
    """A list of queue names (not a single string), de-duplicated in the order given."""
    if isinstance(queues, str) or not isinstance(queues, Iterable):
        raise TypeError(f"queues must be a list of queue names, got {queues!r}")
    return list(dict.fromkeys(validate_queue_name(q, "queues[]") for q in queues))


def require_trace_context(value: object, name: str = "trace_context") -> str:
    """A W3C ``traceparent`` (docs/tracing.md), exactly as it will be stored: no surrounding
    whitespace, lowercase hex, neither id all zeros, version ``ff`` invalid, nothing after a
    version-00 value."""
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a W3C traceparent string, got {type(value).__name__}")
    match = _TRACEPARENT.fullmatch(value) if len(value) <= MAX_TRACE_CONTEXT_LENGTH else None
    if (
        match is None
        or match[1] == "ff"
        or (match[1] == "00" and match[4] is not None)
        or match[2] == "0" * 32
        or match[3] == "0" * 16
    ):
        shown = value if len(value) <= 80 else f"{value[:80]}…"
        raise ValueError(
            f"{name} must be a W3C traceparent such as "
            f"'00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01' (version-traceid-spanid-flags, "
            f"lowercase hex, ids not all zeros, no surrounding whitespace), got {shown!r}"
        )
    return value
