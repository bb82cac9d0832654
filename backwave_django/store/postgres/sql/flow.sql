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

-- name: FLOW_LOCK
-- Take, in this order (a select list is evaluated in order, and its subqueries when reached): the
-- shared locks of %(queue_keys)s (a flow claim that is its own transaction takes its queue's here,
-- as PIPELINED_OPEN does in sql/claims.sql; on the exact path the caller took them before and
-- passes none), then the advisory locks of the buckets of %(queue)s's lanes above 0 (FLOW_LANES),
-- in the order of their keys (PostgreSQL's hashtext of the limit name and the bucket), exclusive
-- until the transaction ends. (A flow claim that is its own transaction sends PIPELINED_SETTINGS,
-- sql/claims.sql, before it.) Returns the lanes whose buckets are now locked (the second column).
-- A statement of its own, before FLOW_USAGE, so that the counts' snapshot follows the locks.
WITH lanes AS MATERIALIZED ({FLOW_LANES}),
keys AS (
    SELECT DISTINCT hashtext((k->>0) || chr(31) || (k->>1)) AS key
    FROM lanes CROSS JOIN LATERAL jsonb_array_elements(lanes.limit_keys) AS k
)
SELECT (SELECT count(pg_advisory_xact_lock_shared({QUEUE_LOCK_CLASS}, key))
        FROM unnest(%(queue_keys)s::int[]) AS key),
       ARRAY(SELECT lane FROM lanes),
       (SELECT count(pg_advisory_xact_lock({LIMIT_LOCK_CLASS}, s.key))
        FROM (SELECT key FROM keys ORDER BY key) AS s)

-- name: FLOW_USAGE
-- After FLOW_LOCK, in the same transaction: %(queue)s's lanes above 0 with their buckets (a
-- lane FLOW_LOCK did not see is not locked: the caller leaves it for the next claim), the settings
-- row of each of their limits, and each bucket's use: its Leased count (slot rows, only for a limit
-- with a concurrency bound) and its starts inside the window of the declared period and of the
-- override's (only for a limit with a rate bound; the caller takes the count of the bounds in
-- force). A period that is not stored counts as %(default_period)s seconds. And whether the queue
-- is paused or has a concurrency limit (a flow claim that is its own transaction leaves such a
-- queue to the exact path: store/postgres/flow_claim.py). And the first due jobs of the lanes
-- %(lanes)s, up to %(takes)s each (FLOW_FETCH: the plain lane's, and those of the lanes read
-- ahead), locked, as [lane, sequence, priority, due time] in claim order within each lane. One row.
WITH lanes AS MATERIALIZED ({FLOW_LANES}),
buckets AS (
    SELECT DISTINCT k->>0 AS name, k->>1 AS bucket
    FROM lanes CROSS JOIN LATERAL jsonb_array_elements(lanes.limit_keys) AS k
),
used AS (
    SELECT b.name, b.bucket,
           json_build_array(s.declared_concurrency, s.declared_rate, s.declared_period, s.overridden,
                            s.override_concurrency, s.override_rate, s.override_period) AS settings,
           CASE WHEN s.declared_concurrency IS NOT NULL OR s.override_concurrency IS NOT NULL
                THEN (SELECT count(*) FROM {limit_leases} AS l WHERE l.name = b.name AND l.bucket = b.bucket)
                ELSE 0 END AS leased,
           w.declared, w.override
    FROM buckets AS b
    LEFT JOIN {limit_settings} AS s ON s.name = b.name
    CROSS JOIN LATERAL (
        SELECT make_interval(secs => CASE WHEN s.declared_period > 0 THEN s.declared_period
                                          ELSE %(default_period)s END) AS declared,
               make_interval(secs => CASE WHEN coalesce(s.override_period, s.declared_period) > 0
                                          THEN coalesce(s.override_period, s.declared_period)
                                          ELSE %(default_period)s END) AS override
    ) AS p
    CROSS JOIN LATERAL (
        SELECT count(*) FILTER (WHERE t.started_at > %(now)s - p.declared) AS declared,
               count(*) FILTER (WHERE t.started_at > %(now)s - p.override) AS override
        FROM {limit_starts} AS t
        WHERE (s.declared_rate IS NOT NULL OR s.override_rate IS NOT NULL)
          AND t.name = b.name AND t.bucket = b.bucket
          AND t.started_at > %(now)s - greatest(p.declared, p.override)
    ) AS w
)
SELECT (SELECT json_agg(json_build_array(lane, limit_keys)) FROM lanes),
       (SELECT json_agg(json_build_array(name, bucket, settings, leased, declared, override)) FROM used),
       EXISTS (SELECT FROM {queues} WHERE queue = %(queue)s AND (paused OR concurrency_limit IS NOT NULL)),
       (SELECT json_agg(json_build_array(f.lane, f.sequence, f.priority, f.due_time)
                        ORDER BY f.lane, f.priority DESC, f.due_time, f.sequence)
        FROM ({FLOW_FETCH}) AS f)

-- name: FLOW_FETCH
-- Up to %(takes)s[i] due jobs of each lane %(lanes)s[i] of %(queue)s (0 for the plain jobs) in claim
-- order, locked, skipping locked ones: a range scan of the claim index within each lane, so the
-- jobs of a lane not asked for (a held one) are never read.
SELECT w.lane, j.sequence, j.priority, j.due_time
FROM unnest(%(lanes)s::bigint[], %(takes)s::int[]) AS w (lane, take)
CROSS JOIN LATERAL (
    SELECT f.sequence, f.priority, f.due_time FROM {jobs} AS f
    WHERE f.queue = %(queue)s AND f.state = {SCHEDULED} AND f.lane = w.lane AND f.due_time <= %(now)s
    ORDER BY f.priority DESC, f.due_time, f.sequence
    LIMIT w.take
    FOR UPDATE SKIP LOCKED
) AS j

-- name: FLOW_LEASE
-- Lease the jobs the flow claim chose (%(picked)s, sequences, in the order taken; Scheduled rows
-- FLOW_FETCH locked in this transaction, so the update reads them by primary key alone: a test of
-- their state would let the planner read them through the claim index, every Scheduled job of the
-- table, when its statistics are stale), exactly as CLAIM leases its own: log the claims, trim logs over the cap, and return the claimed jobs with
-- their tags, in the order taken. And record what they use (store/limits.py, counted_limits): a
-- slot row per leased job and bucket of a limit in %(slot_limits)s (concurrency-bounded), a start
-- row per leased job and bucket of a limit in %(start_limits)s (rate-bounded), and drop those
-- buckets' starts that no window can count any more: older than the longest period any limit has
-- (%(default_period)s seconds when none is stored) and %(margin)s seconds.
WITH leased AS (
    UPDATE {jobs} AS j
    SET state = {LEASED}, attempt = j.attempt + 1, lease_owner = %(worker)s, lease_expiry = %(expiry)s,
        next_ordinal = j.next_ordinal + 1
    WHERE j.sequence = ANY(%(picked)s::bigint[])
    RETURNING j.sequence, j.job_id, j.wire_name, j.queue, j.payload, j.attempt, j.due_time,
              j.next_ordinal - 1 AS ordinal, j.cancel_requested, j.max_attempts, j.backoff, j.timeout,
              j.trace_context, j.limit_keys
), logged AS (
    INSERT INTO {transitions} (job_id, ordinal, recorded_at, state, attempt, failure_detail, actor)
    SELECT sequence, ordinal, %(now)s, {LEASED}, attempt, NULL, %(worker)s FROM leased WHERE %(history)s
), trimmed AS (
    DELETE FROM {transitions} AS t
    USING (SELECT sequence, ordinal FROM leased WHERE ordinal >= %(cap)s) AS l
    WHERE %(history)s AND t.job_id = l.sequence AND t.ordinal <= l.ordinal - %(cap)s
      AND t.job_id = ANY(ARRAY(SELECT sequence FROM leased WHERE ordinal >= %(cap)s))
), used AS MATERIALIZED (
    SELECT l.sequence AS job, k->>0 AS name, k->>1 AS bucket
    FROM leased AS l CROSS JOIN LATERAL jsonb_array_elements(l.limit_keys) AS k
), slots AS (
    INSERT INTO {limit_leases} (name, bucket, job, acquired_at)
    SELECT name, bucket, job, %(now)s FROM used WHERE name = ANY(%(slot_limits)s::text[])
), starts AS (
    INSERT INTO {limit_starts} (name, bucket, started_at)
    SELECT name, bucket, %(now)s FROM used WHERE name = ANY(%(start_limits)s::text[])
), expired AS (
    DELETE FROM {limit_starts} AS t
    USING (SELECT DISTINCT name, bucket FROM used WHERE name = ANY(%(start_limits)s::text[])) AS b
    WHERE t.name = b.name AND t.bucket = b.bucket
      AND t.started_at <= %(now)s - make_interval(secs => %(margin)s + (
          SELECT coalesce(greatest(max(declared_period), max(override_period)), %(default_period)s)
          FROM {limit_settings}))
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
