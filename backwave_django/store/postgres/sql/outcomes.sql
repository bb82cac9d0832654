-- Outcomes: applying each attempt's result under its fence (store/postgres/outcomes.py).

-- name: REPORT_OWN_SETTINGS
-- What an outcome batch that is its own transaction sets for that transaction only, in a
-- statement of its own ahead of the others (a setting changes how the statements after it are
-- planned): its statements run on their generic plans (left to choose, PostgreSQL may plan
-- ENDED_WITH_CHILDREN afresh at every batch, and does so again after each ANALYZE that tips its
-- estimates), planned without sequential scans where an index serves (a statement prepared on an
-- empty or small table keeps a plan that scans it whole until the table is next analyzed, and the
-- jobs table grows between analyzes), and never compiled by JIT (a scan that has no index, of a
-- small table, keeps the cost that disables it, which would otherwise call for JIT at every run).
-- docs/performance.md, "The claim's plan" and "Planned once".
SELECT set_config('plan_cache_mode', 'force_generic_plan', true), set_config('enable_seqscan', 'off', true),
       set_config('jit', 'off', true)

-- name: REPORT
-- Apply a batch of outcomes, each under its fence: lock the reported rows by job_id (the unique
-- index) in sequence order, judge the fence on the locked, current row version, write the new
-- state, log it, trim logs over the cap, add the attempts' tags, free the ended leases'
-- flow-control slots and hint the queues whose jobs it made claimable. The batch travels as one JSON
-- document (%(batch)s; %(tags)s likewise), parsed by jsonb_to_recordset. Each row's target state,
-- retry time and cause were worked out by core.outcomes.outcome_effect on the client.
WITH input AS (
    SELECT * FROM jsonb_to_recordset(%(batch)s::jsonb) AS i (
        job_id uuid, worker_id text, attempt int, state smallint, due_time timestamptz, cause text,
        output jsonb, detail text, clear_cancel bool, gives_back bool, progress jsonb
    )
), locked AS (
    SELECT j.sequence, i.*,
           (j.state = {LEASED} AND j.lease_owner = i.worker_id AND j.attempt = i.attempt
            AND j.lease_expiry > %(now)s) AS fenced_in
    FROM {jobs} AS j JOIN input AS i ON i.job_id = j.job_id
    -- The planner cannot see how many rows the JSON holds (it guesses 100) and would scan the
    -- whole table for the join; naming the ids as an array makes it probe the unique index.
    WHERE j.job_id = ANY(ARRAY(SELECT job_id FROM input))
    ORDER BY j.sequence
    FOR UPDATE OF j
), applied AS (
    UPDATE {jobs} AS j SET
        state = f.state,
        lease_owner = NULL,
        lease_expiry = NULL,
        due_time = CASE WHEN f.state = {SCHEDULED} THEN f.due_time ELSE j.due_time END,
        terminal_at = CASE WHEN f.state IN {TERMINAL} THEN %(now)s ELSE j.terminal_at END,
        terminal_cause = CASE WHEN f.state IN {TERMINAL} THEN f.cause ELSE j.terminal_cause END,
        output = CASE WHEN f.state = {SUCCEEDED} THEN f.output ELSE j.output END,
        cancel_requested = j.cancel_requested AND NOT f.clear_cancel,
        max_attempts = CASE WHEN f.gives_back THEN coalesce(j.max_attempts, %(default_max_attempts)s) + 1
                            ELSE j.max_attempts END,
        progress = coalesce(f.progress, j.progress),
        next_ordinal = j.next_ordinal + 1
    FROM locked AS f
    WHERE j.sequence = f.sequence AND f.fenced_in
    RETURNING j.sequence, j.job_id, j.state, j.attempt, j.next_ordinal - 1 AS ordinal, f.detail, f.worker_id,
              j.lane, j.queue, j.due_time
), hinted AS (
    -- The idle workers of a queue are told (on commit) when this batch made one of its jobs
    -- claimable at once: an attempt given back due now (a retry or snooze without delay), with
    -- the earliest such due time (a worker whose claim floors are past it lowers them), or any
    -- lease of a queue with a concurrency limit (it no longer counts against the limit). Read by
    -- the final SELECT, so that it runs. (Freed flow-control slots hint below.)
    SELECT pg_notify(%(hint_channel)s, {HINT_PAYLOAD})
    FROM (SELECT a.queue, min(a.due_time) FILTER (WHERE a.state = {SCHEDULED} AND a.due_time <= %(now)s) AS due
          FROM applied AS a
          WHERE (a.state = {SCHEDULED} AND a.due_time <= %(now)s)
             OR a.queue IN (SELECT s.queue FROM {queues} AS s WHERE s.concurrency_limit IS NOT NULL)
          GROUP BY a.queue) AS h
), freed AS (
    -- The lease ended: the job's concurrency slots are free (flow control; docs/store.md, "The flow
    -- claim"), and the idle workers of its queue are told (on commit). Plain jobs (lane 0) have no
    -- slot: for them the array is empty and nothing is read.
    -- Found by the slot rows' job index alone (no join, which a plan made while the table was
    -- small would run as a scan of it per job); one hint per queue (the same notification twice in
    -- a transaction is sent once).
    DELETE FROM {limit_leases} AS s
    WHERE s.job = ANY(ARRAY(SELECT sequence FROM applied WHERE lane <> 0))
    RETURNING pg_notify(%(hint_channel)s, (SELECT a.queue FROM applied AS a WHERE a.sequence = s.job))
), logged AS (
    INSERT INTO {transitions} (job_id, ordinal, recorded_at, state, attempt, failure_detail, actor)
    SELECT sequence, ordinal, %(now)s, state, attempt, detail, worker_id FROM applied WHERE %(history)s
), trimmed AS (
    DELETE FROM {transitions} AS t
    USING (SELECT sequence, ordinal FROM applied WHERE ordinal >= %(cap)s) AS a
    WHERE %(history)s AND t.job_id = a.sequence AND t.ordinal <= a.ordinal - %(cap)s
      AND t.job_id = ANY(ARRAY(SELECT sequence FROM applied WHERE ordinal >= %(cap)s))
), tagged AS (
    INSERT INTO {tags} (job_id, key, value)
    SELECT a.sequence, x.key, x.value
    FROM applied AS a
    JOIN jsonb_to_recordset(%(tags)s::jsonb) AS x (job_id uuid, key text, value text) ON x.job_id = a.job_id
    ON CONFLICT (job_id, key, value) DO NOTHING
)
SELECT a.job_id, a.sequence, a.state FROM applied AS a
WHERE (SELECT count(*) FROM hinted) >= 0

-- name: PARENTS_WITH_CHILDREN
-- Which of the jobs that just ended (%(ended)s, sequences) have waiting children. A statement of
-- its own, on purpose: REPORT may have waited for a parent's row lock held by an enqueue that then
-- committed a new edge to it; that statement's snapshot predates the edge, a new statement's does
-- not (and the parent's row lock, held until commit, keeps any later enqueue from adding one).
SELECT DISTINCT parent_id FROM {edges} WHERE parent_id = ANY(%(ended)s)

-- name: ENDED_WITH_CHILDREN
-- The pipelined batch's check for waiting children: whether any reported job (%(ids)s) that this
-- transaction (top level, no savepoints) just ended is a parent. A statement of its own, after
-- REPORT, for the reason given at PARENTS_WITH_CHILDREN. The reported rows are read first, by id
-- (materialized): with the state condition beside the ids the planner would walk the terminal
-- jobs' partial index instead, reading every retained one (tests/store/test_plans.py).
WITH reported AS MATERIALIZED (
    SELECT sequence, state, xmin FROM {jobs} WHERE job_id = ANY(%(ids)s::uuid[])
)
SELECT 1 FROM reported AS j
WHERE j.state IN {TERMINAL} AND j.xmin = pg_current_xact_id_if_assigned()::xid
  AND EXISTS (SELECT 1 FROM {edges} AS d WHERE d.parent_id = j.sequence)
LIMIT 1
