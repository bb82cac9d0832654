"""The torture suite: real workers and clients hammer PostgreSQL under chaos, then an audit.

Run it with ``python -m tests.torture`` (``make torture`` / ``make torture-short``); see
docs/reliability.md.
"""
