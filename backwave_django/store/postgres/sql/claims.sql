-- The claim: leasing due jobs of one queue to a worker (store/postgres/claims.py runs them).

-- name: CLAIM
-- Lease up to %(take)s due jobs of one queue, log the claims, trim logs over the cap, and return
-- the claimed jobs with their tags.
--
-- The batch size (gate) is worked out here: nothing from a queue holding a Scheduled job under
-- limits or a partition (lane above 0: a probe of the claim index past lane 0, empty when no job
-- uses flow control; the flow claim serves such a queue, store/flow.py) or after one in %(before)s
-- (as after a limited queue: the exact path serves the rest, in order), nothing from a paused
-- queue, and nothing when a queue in %(through)s (this one or an earlier one of the same claim) has
-- a concurrency limit: such queues are served on the exact path, whose caller passes empty
-- %(before)s and %(through)s because it has gated the claim itself. What earlier queues of the same
-- transaction leased (rows whose version this transaction wrote: xmin) is taken off %(take)s.
--
-- Order: priority (highest first), then due time, then sequence. The claim index holds (queue,
-- lane, priority DESC, due_time, sequence); the jobs this statement claims are plain (lane 0: it
-- serves only queues without flow jobs), and it walks their range one priority at a time
-- (priorities, a loose index scan: one probe per priority in use), taking the due jobs of each by a
-- range scan that stops at the first job not yet due. So jobs due later, at any priority, are never
-- read, and SKIP LOCKED skips rows other claimers hold before LIMIT counts, as a single range scan
-- would. The walk stops as soon as the batch is full.
--
-- The lane probes are LIMIT 1 in lane order, in the select list: the planner can serve them only
-- from the claim index (an EXISTS may become a join, and where most Scheduled jobs are under flow
-- control a bare LIMIT 1 may become a table scan). ANY(ARRAY(...)) rather than a join, here and
-- below: a prepared statement's generic plan guesses the LIMIT at a tenth of the table and would
-- hash-join a full scan; an array probes the primary key. tests/store/test_plans.py and
-- tests/store/test_flow_plans.py pin the plans.
WITH RECURSIVE gate AS (
    SELECT CASE
        WHEN (SELECT true FROM {jobs} AS f
              WHERE f.queue = %(queue)s AND f.state = {SCHEDULED} AND f.lane > 0 ORDER BY f.lane LIMIT 1)
          OR (SELECT bool_or((SELECT true FROM {jobs} AS f
                              WHERE f.queue = b AND f.state = {SCHEDULED} AND f.lane > 0
                              ORDER BY f.lane LIMIT 1))
              FROM unnest(%(before)s::text[]) AS b) THEN 0
        WHEN coalesce(bool_or(s.paused) FILTER (WHERE s.queue = %(queue)s), false) THEN 0
        WHEN coalesce(bool_or(s.concurrency_limit IS NOT NULL AND NOT s.paused), false) THEN 0
        ELSE greatest(%(take)s - (
            SELECT count(*) FROM {jobs} AS e
            WHERE e.state = {LEASED} AND e.queue = ANY(%(before)s) AND e.lease_expiry = %(expiry)s
              AND e.lease_owner = %(worker)s AND e.xmin = pg_current_xact_id_if_assigned()::xid
        ), 0)
    END AS take
    FROM {queues} AS s WHERE s.queue = ANY(%(through)s)
), priorities AS (
    -- The levels in use, highest first, each with where its range scan starts (its floor). A level
    -- in %(levels)s is taken without a probe, with its floor from %(floors)s; the gap between one
    -- level and the next known one below (all of the range when none is known) is probed for a
    -- level in use, which is scanned from its head. The first row (32768, above every smallint) is
    -- where the walk starts.
    SELECT 32768 AS priority, NULL::timestamptz AS floor
    UNION ALL
    SELECT n.priority,
           (SELECT f.due FROM unnest(%(levels)s::int[], %(floors)s::timestamptz[]) AS f(level, due)
            WHERE f.level = n.priority)
    FROM priorities AS p
    CROSS JOIN LATERAL (
        SELECT max(level) AS below FROM unnest(%(levels)s::int[]) AS level WHERE level < p.priority
    ) AS k
    CROSS JOIN LATERAL (
        SELECT coalesce((SELECT j.priority FROM {jobs} AS j
                         WHERE j.queue = %(queue)s AND j.state = {SCHEDULED} AND j.lane = 0
                           AND j.priority < p.priority AND j.priority > coalesce(k.below, -32769)
                         ORDER BY j.priority DESC LIMIT 1), k.below) AS priority
    ) AS n
    WHERE p.priority IS NOT NULL
), picked AS (
    SELECT due.sequence
    FROM priorities AS p
    CROSS JOIN LATERAL (
        SELECT j.sequence FROM {jobs} AS j
        WHERE j.queue = %(queue)s AND j.state = {SCHEDULED} AND j.lane = 0 AND j.priority = p.priority
          AND j.due_time >= coalesce(p.floor, '-infinity') AND j.due_time <= %(now)s
        ORDER BY j.due_time, j.sequence
        LIMIT (SELECT take FROM gate)
        FOR UPDATE SKIP LOCKED
    ) AS due
    WHERE p.priority < 32768
    LIMIT (SELECT take FROM gate)
), leased AS (
    UPDATE {jobs} AS j
    SET state = {LEASED}, attempt = j.attempt + 1, lease_owner = %(worker)s, lease_expiry = %(expiry)s,
        next_ordinal = j.next_ordinal + 1
    WHERE j.sequence = ANY(ARRAY(SELECT sequence FROM picked))
    RETURNING j.sequence, j.job_id, j.wire_name, j.queue, j.payload, j.attempt, j.due_time, j.priority,
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
       l.cancel_requested, l.max_attempts, l.backoff, l.timeout, l.trace_context, l.priority
FROM leased AS l
ORDER BY l.priority DESC, l.due_time, l.sequence

-- name: READ_QUEUE_SETTINGS
-- The served queues' settings (paused, concurrency limit), read after their shared locks
-- (LOCK_QUEUES_SHARED, in the same round trip) so that the snapshot follows the locks.
SELECT queue, paused, concurrency_limit FROM {queues} WHERE queue = ANY(%(queues)s)

-- name: CLAIM_OWN_SETTINGS
-- What a claim that is its own transaction sets for that transaction only: its commit does not
-- wait for the WAL flush, and CLAIM runs on its generic plan, made without sequential scans where
-- an index serves and never compiled by JIT (sql/outcomes.sql, REPORT_OWN_SETTINGS, says why;
-- docs/performance.md, "The claim's plan"; store/postgres/claims.py says why each is safe).
-- Four statements.
SET LOCAL synchronous_commit = off; SET LOCAL plan_cache_mode = force_generic_plan;
SET LOCAL enable_seqscan = off; SET LOCAL jit = off;

-- name: PIPELINED_SETTINGS
-- The first statement of a pipelined claim: the asynchronous commit, and the generic plan made
-- without sequential scans and JIT (as CLAIM_OWN_SETTINGS says), for the statements after it. A
-- statement of its own, with no parameters (so it is never planned again once prepared), ahead
-- of PIPELINED_OPEN: a setting changes how the statements after it are planned, not the one that
-- makes it, and PIPELINED_OPEN, planned under the default plan_cache_mode, got a custom plan at
-- every call (docs/performance.md, "Planned once").
SELECT set_config('synchronous_commit', 'off', true),
       set_config('plan_cache_mode', 'force_generic_plan', true),
       set_config('enable_seqscan', 'off', true),
       set_config('jit', 'off', true)

-- name: PIPELINED_OPEN
-- The second statement of a pipelined claim: the queues' shared locks (as LOCK_QUEUES_SHARED
-- takes them), which of the queues are limited, and which hold jobs under flow control (a probe
-- of the claim index past lane 0 each) (read beside the locks: this snapshot may predate a change
-- the locks waited for, so it only picks the path; the claim statements' own, later reads decide).
SELECT (SELECT count(pg_advisory_xact_lock_shared({QUEUE_LOCK_CLASS}, key))
        FROM unnest(%(queue_keys)s::int[]) AS key),
       ARRAY(SELECT queue FROM {queues}
             WHERE queue = ANY(%(queues)s) AND concurrency_limit IS NOT NULL AND NOT paused),
       ARRAY(SELECT q FROM unnest(%(queues)s::text[]) AS q
             WHERE (SELECT true FROM {jobs} AS f
                    WHERE f.queue = q AND f.state = {SCHEDULED} AND f.lane > 0 ORDER BY f.lane LIMIT 1))
