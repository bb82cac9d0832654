"""The benchmark harness: ``make bench`` (or ``python -m benchmarks.run``). See docs/performance.md.

Importing this package must stay cheap and Django-free: ``benchmarks.raw`` runs in spawned
processes that only need psycopg.
"""
