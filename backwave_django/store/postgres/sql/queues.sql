-- The per-queue advisory locks that serialize claims against operator changes to a queue's
-- settings (store/postgres/queues.py). %(queue_keys)s are the queues' lock keys, sorted, so every
-- transaction takes them in the same order.

-- name: LOCK_QUEUES_SHARED
-- A claim's locks: shared, so claims do not block each other.
SELECT count(pg_advisory_xact_lock_shared({QUEUE_LOCK_CLASS}, key))
FROM unnest(%(queue_keys)s::int[]) AS key

-- name: LOCK_QUEUES_EXCLUSIVE
-- Pause, resume and limit changes: exclusive, so they wait for the claims in flight.
SELECT count(pg_advisory_xact_lock({QUEUE_LOCK_CLASS}, key))
FROM unnest(%(queue_keys)s::int[]) AS key
