"""PostgreSQL's wing of the store: the fast path of the hot operations (claim, enqueue, report).

The portable ORM path beside the contract (``store/*.py``) is the reference; this package does the
same work in fewer statements and round trips on PostgreSQL with psycopg 3, and the same suites
prove the two alike (tests/store run on PostgreSQL through both, see ``store/backends.py``).

* ``sql/*.sql``: the statements, named, one file per concern; ``statements.py`` reads them once.
* ``connection.py``: the cursors and pipelined transactions, the one place that touches Django's
  connection internals.
* one module per operation family: ``claims``, ``outcomes``, ``enqueue/`` (``inserts``: the insert
  statements; ``unique``, ``batches``: what runs them), plus ``queues`` (advisory locks) and
  ``notifications`` (``NOTIFY``).

See docs/store.md, "Where the code is".
"""
