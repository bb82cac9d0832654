"""The store suites run through both implementations of the hot operations (store/backends.py):
on PostgreSQL once on its fast path (``[postgres]``) and once on the portable ORM path forced onto
it (``[portable]``), which proves the two alike; on SQLite and MariaDB the portable path is the
only one (``[portable]``). Through PgBouncer, and in the compatibility legs (``make
test-django52``), PostgreSQL runs its fast path only: that is the path production takes there,
the one that touches Django's connection internals (store/postgres/connection.py), while the
portable path's ORM calls are what the SQLite leg runs.

A test about the fast path itself (its statements, cursors, pipelines or plans) is marked
``fast_path`` and runs once: on the fast path on PostgreSQL (elsewhere, if it is not also marked
``postgres``, on the portable path)."""

from __future__ import annotations

import os

import pytest

from ..conftest import force_portable

DATABASE = os.environ.get("BACKWAVE_TEST_DB", "postgres")
COMPATIBILITY_LEG = os.environ.get("BACKWAVE_COMPAT_LEGS") == "1"
if DATABASE == "postgres" and not COMPATIBILITY_LEG:
    BACKENDS = ["postgres", "portable"]
elif DATABASE in ("postgres", "pgbouncer"):
    BACKENDS = ["postgres"]
else:
    BACKENDS = ["portable"]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "store_backend" not in metafunc.fixturenames:
        return
    kinds = BACKENDS
    if metafunc.definition.get_closest_marker("fast_path"):
        kinds = kinds[:1]
    metafunc.parametrize("store_backend", kinds, indirect=True)


@pytest.fixture(autouse=True)
def store_backend(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Which backend this test runs the store on: ``postgres`` (chosen as in production) or
    ``portable`` (forced)."""
    kind = str(request.param)
    if kind == "portable":
        force_portable(monkeypatch)
    return kind
