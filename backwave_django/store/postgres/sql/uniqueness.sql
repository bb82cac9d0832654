-- Unique jobs at enqueue (store/uniqueness.py judges what these read).

-- name: LOCK_UNIQUE_KEYS
-- Take the advisory locks of unique keys (their unique_lock_key), in key order, until the
-- transaction ends: enqueues of one key are serialized.
SELECT count(pg_advisory_xact_lock({UNIQUE_LOCK_CLASS}, key))
FROM unnest(%(unique_keys)s::int[]) AS key

-- name: LOOK_UP_UNIQUE
-- After LOCK_UNIQUE_KEYS, as a statement of its own (so that its snapshot sees every job committed
-- by the key's previous holder of the lock): the jobs that hold these keys, in the order
-- uniqueness.first_holders reads them, and those of these ids that already exist.
SELECT unique_key, job_id, state, enqueued_at
FROM {jobs}
WHERE unique_key = ANY(%(keys)s::text[]) OR job_id = ANY(%(job_ids)s::uuid[])
ORDER BY unique_key, enqueued_at, sequence
