-- Wake-up hints and cancel requests to the workers (store/postgres/notifications.py).

-- name: HINT_PAYLOAD
-- A wake-up hint's payload, an expression of two columns, queue and due: the queue, and when due
-- is known, '=' and the earliest due time the hint's transaction made claimable there, in epoch
-- seconds (HINT_CHANNEL and read_hint in store/postgres/notifications.py; a worker lowers its
-- claim floors to it, core/claim_floors.py).
queue || coalesce('=' || to_char(extract(epoch FROM due), 'FM9999999999990.000000'), '')

-- name: NOTIFY
-- Send %(payload)s on %(channel)s; inside a transaction it is delivered on commit.
SELECT pg_notify(%(channel)s, %(payload)s)
