"""The inserts of new jobs on PostgreSQL: the statements, their parameters, and what their rows say.

A batch of jobs without parents is one statement: :data:`ENQUEUE` (a JSON document unpacked on
the server) or, for one job, :data:`ENQUEUE_ONE`; each also writes the jobs' first transitions and
tags and sends the wake-up hints. ``enqueueing`` and ``batches`` run them; docs/store.md explains
the choice of statement.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ..conf import BackWaveSettings
from ..core import actors
from ..core.outcomes import NewJob
from ..core.policy import policy_columns
from ..core.states import EnqueueResult, HistoryPolicy
from ._schema import JOBS, SCHEDULED, TAGS, TRANSITIONS
from ._tx import HINT_CHANNEL


@dataclass(frozen=True, slots=True)
class Enqueued:
    """How one job of a batch was judged, and the id that now stands for it: its own, or for a
    ``DUPLICATE`` the job that already exists (the same id, or the unique job it conflicts with)."""

    result: EnqueueResult
    job_id: uuid.UUID


#: What follows the insert of jobs without parents, in every statement below: their first
#: transition, their tags (:data:`_TAGGED`, only in the statements for batches that have tags),
#: and the wake-up hints of the queues that got a job due now.
_LOGGED = f"""
, logged AS (
    INSERT INTO {TRANSITIONS} (job_id, ordinal, recorded_at, state, attempt, failure_detail, actor)
    SELECT sequence, 0, %(now)s, {SCHEDULED}, 0, NULL, %(actor)s FROM inserted WHERE %(history)s
)"""
#: The tags of a batch travel as one JSON document (cheaper to send than three arrays). A batch
#: without tags goes without this part: even with nothing to insert, it cost the server about
#: 7 % of a single enqueue's CPU (docs/performance.md, "Enqueue without tags").
_TAGGED = f"""
, tagged AS (
    INSERT INTO {TAGS} (job_id, key, value)
    SELECT i.sequence, t.key, t.value
    FROM inserted AS i
    JOIN jsonb_to_recordset(%(tags)s::jsonb) AS t (job_id uuid, key text, value text)
      ON t.job_id = i.job_id
)"""
_HINTED = """
, hinted AS (
    SELECT pg_notify(%(channel)s, queue)
    FROM (SELECT DISTINCT queue FROM inserted WHERE due_time <= %(now)s) AS due
)
"""
#: What the statements return: each stored job's id (and the count of hints, which makes the
#: server send them), or, for jobs whose ids are all new, the count alone.
_RETURN_IDS = "SELECT job_id, (SELECT count(*) FROM hinted) FROM inserted"
_RETURN_COUNT = "SELECT count(*) FROM hinted"
_ON_CONFLICT = "ON CONFLICT (job_id) DO NOTHING"

_JOB_COLUMNS = """job_id, wire_name, queue, payload, due_time, mode, state, attempt, cancel_requested,
                        parents_remaining, enqueued_at, next_ordinal, max_attempts, backoff, timeout,
                        priority, trace_context, unique_key"""

#: Insert a batch of jobs without parents, then their transitions, tags and hints (:data:`ENQUEUE` below).
#: The batch travels as two JSON documents (:func:`_documents`): ``shapes``, one array per
#: distinct set of the columns jobs share (wire name, queue, due time, policy, …), and ``jobs``,
#: one ``[job_id, shape number, payload]`` per job (a unique job's key after its payload). Both
#: are encoded in C on the client and parsed once on the server, far cheaper than ten parameter
#: arrays dumped value by value; the shared columns are encoded and cast once per shape, not once
#: per job. Of two equal ids only the first is sent (the other is a DUPLICATE); rows are inserted
#: in the batch's order, so their sequences (the claim order of jobs due at the same time) follow
#: it.
_ENQUEUE = f"""
WITH shapes AS MATERIALIZED (
    SELECT s.number, s.shape->>0 AS wire_name, s.shape->>1 AS queue,
           (s.shape->>2)::timestamptz AS due_time, (s.shape->>3)::smallint AS mode,
           (s.shape->>4)::int AS max_attempts, nullif(s.shape->5, 'null'::jsonb) AS backoff,
           (s.shape->>6)::float8 AS timeout, (s.shape->>7)::smallint AS priority,
           s.shape->>8 AS trace_context
    FROM jsonb_array_elements(%(shapes)s::jsonb) WITH ORDINALITY AS s (shape, number)
), inserted AS (
    INSERT INTO {JOBS} ({_JOB_COLUMNS})
    SELECT (n.job->>0)::uuid, s.wire_name, s.queue, n.job->2, s.due_time, s.mode, {SCHEDULED}, 0,
           false, 0, %(now)s, 1, s.max_attempts, s.backoff, s.timeout, s.priority, s.trace_context,
           n.job->>3
    FROM jsonb_array_elements(%(jobs)s::jsonb) WITH ORDINALITY AS n (job, position)
    JOIN shapes AS s ON s.number = (n.job->>1)::bigint
    ORDER BY n.position
    {{conflict}}
    RETURNING sequence, job_id, queue, due_time
){{after}}{{returning}}"""

#: The same for one job, with plain values: the shape of a single ``.enqueue()``, planned more
#: cheaply than a document of one row.
_ENQUEUE_ONE = f"""
WITH inserted AS (
    INSERT INTO {JOBS} ({_JOB_COLUMNS})
    VALUES (%(job_id)s, %(wire_name)s, %(queue)s, %(payload)s::jsonb, %(due_time)s, %(mode)s,
            {SCHEDULED}, 0, false, 0, %(now)s, 1,
            %(max_attempts)s, %(backoff)s::jsonb, %(timeout)s, %(priority)s, %(trace_context)s,
            %(unique_key)s)
    {{conflict}}
    RETURNING sequence, job_id, queue, due_time
){{after}}{{returning}}"""


def _with_and_without_tags(template: str, conflict: str, returning: str) -> tuple[str, str]:
    """A statement of ``template``, and its form without the tags' insert (for a batch in which
    no job has tags)."""
    return (
        template.format(conflict=conflict, after=_LOGGED + _TAGGED + _HINTED, returning=returning),
        template.format(conflict=conflict, after=_LOGGED + _HINTED, returning=returning),
    )


ENQUEUE, _ENQUEUE_UNTAGGED = _with_and_without_tags(_ENQUEUE, _ON_CONFLICT, _RETURN_IDS)
ENQUEUE_ONE, _ENQUEUE_ONE_UNTAGGED = _with_and_without_tags(_ENQUEUE_ONE, _ON_CONFLICT, _RETURN_IDS)
#: :data:`ENQUEUE` and :data:`ENQUEUE_ONE` for jobs whose ids are all new (``NewJob.id_is_new``):
#: without ``ON CONFLICT``, whose look-up of each id in the unique index before the insert was
#: about a tenth of the statement's time. Such a statement stores every job it sends, or, if one
#: of them was sent before, fails with a unique violation (the server logs it); the caller then
#: sends the batch again as ENQUEUE. Used only in a transaction of the store's own, which that
#: error cannot spoil.
ENQUEUE_NEW, _ENQUEUE_NEW_UNTAGGED = _with_and_without_tags(_ENQUEUE, "", _RETURN_COUNT)
ENQUEUE_ONE_NEW, _ENQUEUE_ONE_NEW_UNTAGGED = _with_and_without_tags(_ENQUEUE_ONE, "", _RETURN_COUNT)
_UNTAGGED = {
    ENQUEUE: _ENQUEUE_UNTAGGED,
    ENQUEUE_ONE: _ENQUEUE_ONE_UNTAGGED,
    ENQUEUE_NEW: _ENQUEUE_NEW_UNTAGGED,
    ENQUEUE_ONE_NEW: _ENQUEUE_ONE_NEW_UNTAGGED,
}


#: The encoder of :func:`_documents` (one for every call: ``json.dumps`` with options builds one each time).
_ROW_ENCODER = json.JSONEncoder(ensure_ascii=False, allow_nan=False)


def _documents(accepted: list[NewJob], settings: BackWaveSettings) -> tuple[str, str]:
    """:data:`ENQUEUE`'s two documents. A shape is ``[wire_name, queue, due_time, mode,
    max_attempts, backoff, timeout, priority, trace_context]`` with the policy as stored
    (:func:`core.policy.policy_columns`); a job is ``[job_id, shape number (from 1), payload]``, its payload's
    stored JSON spliced in as it is (it was encoded once, when the job was built), and a unique
    job's key after it."""
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
        if new_job.unique is None:
            parts.append(f'["{new_job.job_id}",{number},{payload}]')
        else:
            parts.append(f'["{new_job.job_id}",{number},{payload},{_ROW_ENCODER.encode(new_job.unique.key)}]')
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
    job to insert has tags, the chosen statement's form without the tags' insert."""
    first: dict[uuid.UUID, int] = {}
    accepted: list[NewJob] = []
    tags: list[dict[str, str]] = []
    for i, (new_job, result) in enumerate(zip(jobs, results, strict=True)):
        if result is not None or first.setdefault(new_job.job_id, i) != i:
            continue
        accepted.append(new_job)
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
    else:
        params["shapes"], params["jobs"] = _documents(accepted, settings)
    new = new_ids_allowed and all(j.id_is_new for j in accepted)
    if len(accepted) == 1:
        statement = ENQUEUE_ONE_NEW if new else ENQUEUE_ONE
    else:
        statement = ENQUEUE_NEW if new else ENQUEUE
    if not tags:
        return _UNTAGGED[statement], params, first
    params["tags"] = json.dumps(tags)
    return statement, params, first


def enqueued_entries(
    jobs: list[NewJob],
    results: list[EnqueueResult | None],
    first: dict[uuid.UUID, int],
    stored_ids: Collection[uuid.UUID],
) -> list[Enqueued]:
    """Each job's result: as judged, else OK at the first position of an id the insert stored
    (:func:`stored_ids`), else DUPLICATE (an id already stored, or repeated earlier in the batch)."""
    stored = {first[job_id] for job_id in stored_ids}
    ok, duplicate = EnqueueResult.OK, EnqueueResult.DUPLICATE
    return [
        Enqueued(
            result if result is not None else ok if i in stored else duplicate,
            new_job.job_id,
        )
        for i, (new_job, result) in enumerate(zip(jobs, results, strict=True))
    ]


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
