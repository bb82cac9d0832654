"""The jobs a PostgreSQL claim statement returned (``CLAIM``, ``FLOW_LEASE``), as :class:`ClaimedJob`."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from ...core.frozen import frozen_builder
from ...core.outcomes import ClaimedJob
from ...core.tags import tag_from_pair

#: Builds a :class:`ClaimedJob` in a fifth of the time its frozen ``__init__`` takes (see
#: :func:`core.frozen.frozen_builder`): a claim builds one per job.
_build_claimed = frozen_builder(ClaimedJob)


def claimed_jobs(rows: list[tuple[Any, ...]], worker_id: str, expiry: datetime) -> list[ClaimedJob]:
    """The claim statement's rows, in their order, as jobs leased to ``worker_id`` until ``expiry``
    (columns after the twelfth are left to the caller)."""
    return [
        _build_claimed(
            job_id=job_id,
            wire_name=wire_name,
            queue=queue_name,
            payload=json.loads(payload) if isinstance(payload, str) else payload,
            attempt=attempt,
            due_time=due_time,
            lease_owner=worker_id,
            lease_expiry=expiry,
            tags=tuple(tag_from_pair((k, v)) for k, v in _json(tags)) if tags else (),
            cancel_requested=cancel_requested,
            max_attempts=max_attempts,
            backoff=None if backoff is None else tuple(_json(backoff)),
            timeout=timeout,
            trace_context=trace_context,
        )
        for (
            job_id,
            wire_name,
            queue_name,
            payload,
            attempt,
            due_time,
            tags,
            cancel_requested,
            max_attempts,
            backoff,
            timeout,
            trace_context,
            *_,  # CLAIM's priority, for the worker's floors (store/postgres/claims.py)
        ) in rows
    ]


def _json(value: Any) -> Any:
    return json.loads(value) if isinstance(value, str) else value
