-- The inserts of new jobs without parents (store/postgres/enqueue/inserts.py puts a statement
-- together from these parts): the rows (ENQUEUE_ROWS or ENQUEUE_ONE_ROWS; their FLOW forms for
-- jobs under flow control), ON CONFLICT or not,
-- the end of the insert (INSERTED), what follows it (LOG_INSERTED, TAG_INSERTED, HINT_INSERTED)
-- and what the statement returns (RETURN_IDS or RETURN_COUNT).

-- name: ENQUEUE_ROWS
-- A batch of jobs as two JSON documents: %(shapes)s, one array per distinct set of the columns
-- jobs share ([wire_name, queue, due_time, mode, max_attempts, backoff, timeout, priority,
-- trace_context]), and %(jobs)s, one [job_id, shape number, payload] per job (a unique job's key
-- after its payload; the id as 32 hex digits, without hyphens). Both are encoded in C on the
-- client and parsed once here, far cheaper than ten parameter arrays dumped value by value; the
-- shared columns are cast once per shape, not once per job. Rows are inserted in the batch's order, so their sequences (the claim order of jobs due
-- at the same time) follow it.
WITH shapes AS MATERIALIZED (
    SELECT s.number, s.shape->>0 AS wire_name, s.shape->>1 AS queue,
           (s.shape->>2)::timestamptz AS due_time, (s.shape->>3)::smallint AS mode,
           (s.shape->>4)::int AS max_attempts, nullif(s.shape->5, 'null'::jsonb) AS backoff,
           (s.shape->>6)::float8 AS timeout, (s.shape->>7)::smallint AS priority,
           s.shape->>8 AS trace_context
    FROM jsonb_array_elements(%(shapes)s::jsonb) WITH ORDINALITY AS s (shape, number)
), inserted AS (
    INSERT INTO {jobs} (job_id, wire_name, queue, payload, due_time, mode, state, attempt,
                        cancel_requested, parents_remaining, enqueued_at, next_ordinal,
                        max_attempts, backoff, timeout, priority, trace_context, unique_key)
    SELECT (n.job->>0)::uuid, s.wire_name, s.queue, n.job->2, s.due_time, s.mode, {SCHEDULED}, 0,
           false, 0, %(now)s, 1, s.max_attempts, s.backoff, s.timeout, s.priority, s.trace_context,
           n.job->>3
    FROM jsonb_array_elements(%(jobs)s::jsonb) WITH ORDINALITY AS n (job, position)
    JOIN shapes AS s ON s.number = (n.job->>1)::bigint
    ORDER BY n.position

-- name: ENQUEUE_ONE_ROWS
-- One job, with plain values: the shape of a single .enqueue(), planned more cheaply than a
-- document of one row.
WITH inserted AS (
    INSERT INTO {jobs} (job_id, wire_name, queue, payload, due_time, mode, state, attempt,
                        cancel_requested, parents_remaining, enqueued_at, next_ordinal,
                        max_attempts, backoff, timeout, priority, trace_context, unique_key)
    VALUES (%(job_id)s, %(wire_name)s, %(queue)s, %(payload)s::jsonb, %(due_time)s, %(mode)s,
            {SCHEDULED}, 0, false, 0, %(now)s, 1,
            %(max_attempts)s, %(backoff)s::jsonb, %(timeout)s, %(priority)s, %(trace_context)s,
            %(unique_key)s)

-- name: ENQUEUE_FLOW_ROWS
-- ENQUEUE_ROWS for a batch with at least one job under flow control (docs/flow-control.md): each
-- job is [job_id, shape number, payload, unique key, partition, limit_keys, lane]. A batch of
-- plain jobs goes without these columns (they keep their defaults) and pays nothing for them.
WITH shapes AS MATERIALIZED (
    SELECT s.number, s.shape->>0 AS wire_name, s.shape->>1 AS queue,
           (s.shape->>2)::timestamptz AS due_time, (s.shape->>3)::smallint AS mode,
           (s.shape->>4)::int AS max_attempts, nullif(s.shape->5, 'null'::jsonb) AS backoff,
           (s.shape->>6)::float8 AS timeout, (s.shape->>7)::smallint AS priority,
           s.shape->>8 AS trace_context
    FROM jsonb_array_elements(%(shapes)s::jsonb) WITH ORDINALITY AS s (shape, number)
), inserted AS (
    INSERT INTO {jobs} (job_id, wire_name, queue, payload, due_time, mode, state, attempt,
                        cancel_requested, parents_remaining, enqueued_at, next_ordinal,
                        max_attempts, backoff, timeout, priority, trace_context, unique_key,
                        partition, limit_keys, lane)
    SELECT (n.job->>0)::uuid, s.wire_name, s.queue, n.job->2, s.due_time, s.mode, {SCHEDULED}, 0,
           false, 0, %(now)s, 1, s.max_attempts, s.backoff, s.timeout, s.priority, s.trace_context,
           n.job->>3, n.job->>4, nullif(n.job->5, 'null'::jsonb), (n.job->>6)::bigint
    FROM jsonb_array_elements(%(jobs)s::jsonb) WITH ORDINALITY AS n (job, position)
    JOIN shapes AS s ON s.number = (n.job->>1)::bigint
    ORDER BY n.position

-- name: ENQUEUE_ONE_FLOW_ROWS
-- ENQUEUE_ONE_ROWS for one job under flow control.
WITH inserted AS (
    INSERT INTO {jobs} (job_id, wire_name, queue, payload, due_time, mode, state, attempt,
                        cancel_requested, parents_remaining, enqueued_at, next_ordinal,
                        max_attempts, backoff, timeout, priority, trace_context, unique_key,
                        partition, limit_keys, lane)
    VALUES (%(job_id)s, %(wire_name)s, %(queue)s, %(payload)s::jsonb, %(due_time)s, %(mode)s,
            {SCHEDULED}, 0, false, 0, %(now)s, 1,
            %(max_attempts)s, %(backoff)s::jsonb, %(timeout)s, %(priority)s, %(trace_context)s,
            %(unique_key)s, %(partition)s, %(limit_keys)s::jsonb, %(lane)s)

-- name: SKIP_STORED
-- An id already stored is not inserted again (the caller reports it DUPLICATE). Left out for
-- ids that are all new: the look-up of each id in the unique index was about a tenth of the
-- statement's time.
ON CONFLICT (job_id) DO NOTHING

-- name: INSERTED
-- The end of the insert: what the parts after it read of each stored row.
    RETURNING sequence, job_id, queue, due_time
)

-- name: LOG_INSERTED
-- The stored jobs' first transition.
, logged AS (
    INSERT INTO {transitions} (job_id, ordinal, recorded_at, state, attempt, failure_detail, actor)
    SELECT sequence, 0, %(now)s, {SCHEDULED}, 0, NULL, %(actor)s FROM inserted WHERE %(history)s
)

-- name: TAG_INSERTED
-- The stored jobs' tags, as one JSON document (%(tags)s; cheaper to send than three arrays). A
-- batch without tags goes without this part: even with nothing to insert, it cost the server about
-- 7 % of a single enqueue's CPU (docs/performance.md, "Enqueue without tags").
, tagged AS (
    INSERT INTO {tags} (job_id, key, value)
    SELECT i.sequence, t.key, t.value
    FROM inserted AS i
    JOIN jsonb_to_recordset(%(tags)s::jsonb) AS t (job_id uuid, key text, value text)
      ON t.job_id = i.job_id
)

-- name: HINT_INSERTED
-- The wake-up hints of the queues that got a job due now, each with the earliest due time of its
-- jobs (store/postgres/notifications.py, HINT_CHANNEL: a worker reads the queue from there).
, hinted AS (
    SELECT pg_notify(%(channel)s, {HINT_PAYLOAD})
    FROM (SELECT queue, min(due_time) AS due FROM inserted WHERE due_time <= %(now)s GROUP BY queue) AS due
)

-- name: RETURN_IDS
-- Each stored job's id, and the count of hints (which makes the server send them).
SELECT job_id, (SELECT count(*) FROM hinted) FROM inserted

-- name: RETURN_COUNT
-- For jobs whose ids are all new: the count of hints alone (every job sent was stored).
SELECT count(*) FROM hinted
