"""The inserts of new jobs without parents on PostgreSQL: the statement for a batch, its
parameters, and what its rows say.

A batch of jobs without parents is one statement, put together from the parts of
``sql/inserts.sql``: :data:`ENQUEUE` (two JSON documents unpacked on the server) or, for one job,
:data:`ENQUEUE_ONE`; each also writes the jobs' first transitions and tags and sends the wake-up
hints. ``one_batch`` and ``batches`` run them; docs/store.md explains the choice of statement.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Collection
from datetime import datetime
from typing import Any

from ....conf import BackWaveSettings
from ....core import actors
from ....core.limits import flow_columns
from ....core.outcomes import NewJob
from ....core.policy import policy_columns
from ....core.states import EnqueueResult, HistoryPolicy
from ..notifications import HINT_CHANNEL
from ..statements import statement as named


def _insert(rows: str, *, skip_stored: bool, tagged: bool, returning: str) -> str:
    """An insert statement: ``rows`` (ENQUEUE_ROWS or ENQUEUE_ONE_ROWS), with ``ON CONFLICT``
    when ``skip_stored``, its transitions, its tags when ``tagged`` (a batch without tags goes
    without that part) and its hints, returning ``returning``."""
    parts = [named(rows)]
    if skip_stored:
        parts.append(named("SKIP_STORED"))
    parts += [named("INSERTED"), named("LOG_INSERTED")]
    if tagged:
        parts.append(named("TAG_INSERTED"))
    parts += [named("HINT_INSERTED"), named(returning)]
    return "\n".join(parts)


def _with_and_without_tags(rows: str, *, skip_stored: bool, returning: str) -> tuple[str, str]:
    return (
        _insert(rows, skip_stored=skip_stored, tagged=True, returning=returning),
        _insert(rows, skip_stored=skip_stored, tagged=False, returning=returning),
    )


#: Insert a batch of jobs without parents (``ENQUEUE_ROWS``), then their transitions, tags and hints;
#: returns each stored job's id. Of two equal ids only the first is sent (the other is a DUPLICATE).
ENQUEUE, _ENQUEUE_UNTAGGED = _with_and_without_tags("ENQUEUE_ROWS", skip_stored=True, returning="RETURN_IDS")
#: The same for one job, with plain values (``ENQUEUE_ONE_ROWS``).
ENQUEUE_ONE, _ENQUEUE_ONE_UNTAGGED = _with_and_without_tags(
    "ENQUEUE_ONE_ROWS", skip_stored=True, returning="RETURN_IDS"
)
#: :data:`ENQUEUE` and :data:`ENQUEUE_ONE` for jobs whose ids are all new (``NewJob.id_is_new``):
#: without ``ON CONFLICT``, whose look-up of each id in the unique index before the insert was
#: about a tenth of the statement's time. Such a statement stores every job it sends, or, if one
#: of them was sent before, fails with a unique violation (the server logs it); the caller then
#: sends the batch again as ENQUEUE. Used only in a transaction of the store's own, which that
#: error cannot spoil.
ENQUEUE_NEW, _ENQUEUE_NEW_UNTAGGED = _with_and_without_tags(
    "ENQUEUE_ROWS", skip_stored=False, returning="RETURN_COUNT"
)
ENQUEUE_ONE_NEW, _ENQUEUE_ONE_NEW_UNTAGGED = _with_and_without_tags(
    "ENQUEUE_ONE_ROWS", skip_stored=False, returning="RETURN_COUNT"
)
_UNTAGGED = {
    ENQUEUE: _ENQUEUE_UNTAGGED,
    ENQUEUE_ONE: _ENQUEUE_ONE_UNTAGGED,
    ENQUEUE_NEW: _ENQUEUE_NEW_UNTAGGED,
    ENQUEUE_ONE_NEW: _ENQUEUE_ONE_NEW_UNTAGGED,
}


def _flow_forms() -> dict[str, str]:
    """Each statement above in its form for a batch with a job under flow control: the same parts
    with ``ENQUEUE_FLOW_ROWS`` / ``ENQUEUE_ONE_FLOW_ROWS``, which also write the jobs' partition,
    buckets and lane. A batch of plain jobs never uses them (its rows keep the columns' defaults)."""
    forms = {}
    pairs = (("ENQUEUE_ROWS", "ENQUEUE_FLOW_ROWS"), ("ENQUEUE_ONE_ROWS", "ENQUEUE_ONE_FLOW_ROWS"))
    for rows, flow_rows in pairs:
        for skip_stored, returning in ((True, "RETURN_IDS"), (False, "RETURN_COUNT")):
            for tagged in (True, False):
                plain = _insert(rows, skip_stored=skip_stored, tagged=tagged, returning=returning)
                forms[plain] = _insert(flow_rows, skip_stored=skip_stored, tagged=tagged, returning=returning)
    return forms


#: Statement → its flow-control form (see :func:`_flow_forms`).
_FLOW = _flow_forms()


#: The encoder of :func:`_documents` (one for every call: ``json.dumps`` with options builds one each time).
_ROW_ENCODER = json.JSONEncoder(ensure_ascii=False, allow_nan=False)


def _documents(accepted: list[NewJob], settings: BackWaveSettings, flow: bool) -> tuple[str, str]:
    """:data:`ENQUEUE`'s two documents. A shape is ``[wire_name, queue, due_time, mode,
    max_attempts, backoff, timeout, priority, trace_context]`` with the policy as stored
    (:func:`core.policy.policy_columns`); a job is ``[job_id, shape number (from 1), payload]``, its payload's
    stored JSON spliced in as it is (it was encoded once, when the job was built), and a unique
    job's key after it. With ``flow`` (:data:`_FLOW`'s statements), every job is ``[job_id, shape
    number, payload, unique key, partition, limit_keys, lane]``. The job id is written as 32 hex
    digits, without hyphens."""
    numbers: dict[tuple[Any, ...], int] = {}
    shapes: list[list[Any]] = []
    parts: list[str] = []
    for new_job in accepted:
        key = (
            new_job.wire_name,
            new_job.queue,
            new_job.due_time,
            new_job.mode,
            new_job.max_attempts,
            new_job.backoff,
            new_job.timeout,
            new_job.priority,
            new_job.trace_context,
        )
        number = numbers.get(key)
        if number is None:
            policy = policy_columns(new_job.max_attempts, new_job.backoff, new_job.timeout, settings)
            shapes.append(
                [
                    new_job.wire_name,
                    new_job.queue,
                    new_job.due_time.isoformat(),
                    int(new_job.mode),
                    policy["max_attempts"],
                    policy["backoff"],
                    policy["timeout"],
                    new_job.priority,
                    new_job.trace_context,
                ]
            )
            number = numbers[key] = len(shapes)
        payload = new_job.payload_json.decode()
        # The id as its 32 hex digits, which the server reads as a uuid too: a quarter of the
        # time of str(job_id), which puts in the hyphens.
        job_id = f"{new_job.job_id.int:032x}"
        if flow:
            unique_key = None if new_job.unique is None else new_job.unique.key
            columns = flow_columns(new_job.partition, new_job.limit_keys)
            extra = [unique_key, columns["partition"], columns["limit_keys"], columns["lane"]]
            parts.append(f'["{job_id}",{number},{payload},{_ROW_ENCODER.encode(extra)[1:-1]}]')
        elif new_job.unique is None:
            parts.append(f'["{job_id}",{number},{payload}]')
        else:
            parts.append(f'["{job_id}",{number},{payload},{_ROW_ENCODER.encode(new_job.unique.key)}]')
    return _ROW_ENCODER.encode(shapes), f"[{','.join(parts)}]"


def insert_statement(
    jobs: list[NewJob],
    results: list[EnqueueResult | None],
    now: datetime,
    settings: BackWaveSettings,
    *,
    new_ids_allowed: bool = False,
) -> tuple[str, dict[str, Any], dict[uuid.UUID, int]]:
    """The insert of the jobs still to be judged (``results[i] is None``): :data:`ENQUEUE_ONE`
    or :data:`ENQUEUE` with its parameters, and the position of each id's first occurrence
    (empty when there is nothing to insert). With ``new_ids_allowed`` (a transaction of the
    store's own), :data:`ENQUEUE_ONE_NEW` or :data:`ENQUEUE_NEW` when every id is new. When no
    job to insert has tags, the chosen statement's form without the tags' insert; when one has a
    partition or buckets, its flow-control form (plain batches never pay for those columns)."""
    first: dict[uuid.UUID, int] = {}
    accepted: list[NewJob] = []
    tags: list[dict[str, str]] = []
    flow = False
    for i, (new_job, result) in enumerate(zip(jobs, results, strict=True)):
        if result is not None or first.setdefault(new_job.job_id, i) != i:
            continue
        accepted.append(new_job)
        if new_job.partition is not None or new_job.limit_keys:
            flow = True
        if new_job.tag_pairs:
            job_id = str(new_job.job_id)
            tags.extend({"job_id": job_id, "key": key, "value": value} for key, value in new_job.tag_pairs)
    params: dict[str, Any] = {
        "now": now,
        "actor": actors.ENQUEUE,
        "history": settings.history is not HistoryPolicy.OFF,
        "channel": HINT_CHANNEL,
    }
    if len(accepted) == 1:  # one job: plain values instead of a document of one row
        new_job = accepted[0]
        policy = policy_columns(new_job.max_attempts, new_job.backoff, new_job.timeout, settings)
        params.update(
            job_id=new_job.job_id,
            wire_name=new_job.wire_name,
            queue=new_job.queue,
            payload=new_job.payload_json.decode(),
            due_time=new_job.due_time,
            mode=int(new_job.mode),
            max_attempts=policy["max_attempts"],
            backoff=None if policy["backoff"] is None else json.dumps(policy["backoff"]),
            timeout=policy["timeout"],
            priority=new_job.priority,
            trace_context=new_job.trace_context,
            unique_key=None if new_job.unique is None else new_job.unique.key,
        )
        if flow:
            columns = flow_columns(new_job.partition, new_job.limit_keys)
            keys = columns["limit_keys"]
            params.update(columns, limit_keys=None if keys is None else json.dumps(keys))
    else:
        params["shapes"], params["jobs"] = _documents(accepted, settings, flow)
    new = new_ids_allowed and all(j.id_is_new for j in accepted)
    if len(accepted) == 1:
        statement = ENQUEUE_ONE_NEW if new else ENQUEUE_ONE
    else:
        statement = ENQUEUE_NEW if new else ENQUEUE
    if tags:
        params["tags"] = json.dumps(tags)
    else:
        statement = _UNTAGGED[statement]
    return (_FLOW[statement] if flow else statement), params, first


def stored_ids(
    statement: str, first: dict[uuid.UUID, int], rows: list[tuple[Any, ...]]
) -> Collection[uuid.UUID]:
    """The ids that ``statement`` (of :func:`insert_statement`) stored, from its ``rows``: those
    it returned, or, for a statement of new ids that succeeded, every one it sent."""
    if statement in _WITH_ON_CONFLICT:
        return first.keys()
    return [row[0] for row in rows]


def with_on_conflict(statement: str) -> str | None:
    """For a statement of new ids (:data:`ENQUEUE_NEW`), the same insert with ``ON CONFLICT``,
    which takes the same parameters: what to send when it met a job stored before. None for a
    statement that has it already."""
    return _WITH_ON_CONFLICT.get(statement)


_WITH_ON_CONFLICT = {
    ENQUEUE_NEW: ENQUEUE,
    ENQUEUE_ONE_NEW: ENQUEUE_ONE,
    _ENQUEUE_NEW_UNTAGGED: _ENQUEUE_UNTAGGED,
    _ENQUEUE_ONE_NEW_UNTAGGED: _ENQUEUE_ONE_UNTAGGED,
}
_WITH_ON_CONFLICT.update({_FLOW[new]: _FLOW[stored] for new, stored in list(_WITH_ON_CONFLICT.items())})
