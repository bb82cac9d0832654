-- The flow claim's reads and its lease on PostgreSQL (store/postgres/flow.py; store/flow.py says
-- how the claim goes). Every statement here runs only for a queue holding a job whose lane is
-- above 0.

-- name: FLOW_LANES
-- The lanes above 0 with a Scheduled job in %(queue)s, each with the buckets of its first job
-- (every job of a lane has the same ones). A loose index scan of the claim index, starting after
-- lane 0: one probe per lane, however many jobs each holds (each step is a LIMIT 1 in lane order,
-- which the planner can only serve from the index).
WITH RECURSIVE lanes AS (
    (SELECT lane, limit_keys FROM {jobs}
     WHERE queue = %(queue)s AND state = {SCHEDULED} AND lane > 0
     ORDER BY lane LIMIT 1)
    UNION ALL
    SELECT n.lane, n.limit_keys
    FROM lanes AS l
    CROSS JOIN LATERAL (
        SELECT j.lane, j.limit_keys FROM {jobs} AS j
        WHERE j.queue = %(queue)s AND j.state = {SCHEDULED} AND j.lane > 0 AND j.lane > l.lane
        ORDER BY j.lane LIMIT 1
    ) AS n
)
SELECT lane, limit_keys FROM lanes

-- name: LOCK_BUCKETS
-- Take the buckets' advisory locks (%(bucket_keys)s, sorted), exclusive until the transaction
-- ends. A statement of its own, before the counting one, so that the counts' snapshot follows
-- the locks.
SELECT count(pg_advisory_xact_lock({LIMIT_LOCK_CLASS}, key))
FROM unnest(%(bucket_keys)s::int[]) AS key

-- name: FLOW_FETCH_LANE
-- Up to %(take)s due jobs of one lane (above 0) in claim order, locked, skipping locked ones: a
-- range scan of the claim index within that lane.
SELECT sequence, priority, due_time FROM {jobs}
WHERE queue = %(queue)s AND state = {SCHEDULED} AND lane = %(lane)s
  AND due_time <= %(now)s
ORDER BY priority DESC, due_time, sequence
LIMIT %(take)s
FOR UPDATE SKIP LOCKED

-- name: FLOW_FETCH_PLAIN
-- Up to %(take)s due plain jobs (lane 0) of a flow queue in claim order, locked, skipping locked
-- ones: a range scan of the claim index within lane 0, so held jobs of other lanes are never read.
SELECT sequence, priority, due_time FROM {jobs}
WHERE queue = %(queue)s AND state = {SCHEDULED} AND lane = 0 AND due_time <= %(now)s
ORDER BY priority DESC, due_time, sequence
LIMIT %(take)s
FOR UPDATE SKIP LOCKED

-- name: FLOW_LEASE
-- Lease the jobs the flow claim chose (%(picked)s, sequences, in the order taken), exactly as
-- CLAIM leases its own: log the claims, trim logs over the cap, and return the claimed jobs with
-- their tags, in the order taken.
WITH leased AS (
    UPDATE {jobs} AS j
    SET state = {LEASED}, attempt = j.attempt + 1, lease_owner = %(worker)s, lease_expiry = %(expiry)s,
        next_ordinal = j.next_ordinal + 1
    WHERE j.sequence = ANY(%(picked)s::bigint[]) AND j.state = {SCHEDULED}
    RETURNING j.sequence, j.job_id, j.wire_name, j.queue, j.payload, j.attempt, j.due_time,
              j.next_ordinal - 1 AS ordinal, j.cancel_requested, j.max_attempts, j.backoff, j.timeout,
              j.trace_context
), logged AS (
    INSERT INTO {transitions} (job_id, ordinal, recorded_at, state, attempt, failure_detail, actor)
    SELECT sequence, ordinal, %(now)s, {LEASED}, attempt, NULL, %(worker)s FROM leased WHERE %(history)s
), trimmed AS (
    DELETE FROM {transitions} AS t
    USING (SELECT sequence, ordinal FROM leased WHERE ordinal >= %(cap)s) AS l
    WHERE %(history)s AND t.job_id = l.sequence AND t.ordinal <= l.ordinal - %(cap)s
      AND t.job_id = ANY(ARRAY(SELECT sequence FROM leased WHERE ordinal >= %(cap)s))
)
SELECT l.job_id, l.wire_name, l.queue, l.payload, l.attempt, l.due_time,
       (SELECT json_agg(json_build_array(t.key, t.value) ORDER BY t.id) FROM {tags} AS t
        WHERE t.job_id = l.sequence),
       l.cancel_requested, l.max_attempts, l.backoff, l.timeout, l.trace_context
FROM leased AS l
ORDER BY array_position(%(picked)s::bigint[], l.sequence)

-- name: HAS_FLOW_JOBS
-- Which of %(queues)s hold a Scheduled job of a lane above 0: a probe of the claim index past lane
-- 0 each (a LIMIT 1 in lane order, which only the claim index serves; see CLAIM in sql/claims.sql).
SELECT ARRAY(SELECT q FROM unnest(%(queues)s::text[]) AS q
             WHERE (SELECT true FROM {jobs} AS j
                    WHERE j.queue = q AND j.state = {SCHEDULED} AND j.lane > 0 ORDER BY j.lane LIMIT 1))
