"""The store suites run through both implementations of the hot operations (store/backends.py):
on PostgreSQL (and through PgBouncer) once on its fast path (``[postgres]``) and once on the
portable ORM path forced onto it (``[portable]``), which proves the two alike; on SQLite and
MariaDB the portable path is the only one (``[portable]``).

A test about the fast path itself (its statements, cursors, pipelines or plans) is marked
``fast_path`` and runs once: on the fast path on PostgreSQL (elsewhere, if it is not also marked
``postgres``, on the portable path)."""

from __future__ import annotations

import os

import pytest

from ..conftest import force_portable

ON_POSTGRES = os.environ.get("BACKWAVE_TEST_DB", "postgres") in ("postgres", "pgbouncer")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "store_backend" not in metafunc.fixturenames:
        return
    kinds = ["postgres", "portable"] if ON_POSTGRES else ["portable"]
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
