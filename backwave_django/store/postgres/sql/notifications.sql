-- Wake-up hints and cancel requests to the workers (store/postgres/notifications.py).

-- name: NOTIFY
-- Send %(payload)s on %(channel)s; inside a transaction it is delivered on commit.
SELECT pg_notify(%(channel)s, %(payload)s)
