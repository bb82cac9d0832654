"""The choice of the store's backend (store/backends.py)."""

from __future__ import annotations

import pytest
from django.db import connection

from backwave_django.store import backends
from backwave_django.store.postgres.connection import uses_postgres_statements


def test_the_store_runs_on_the_backend_the_test_asks_for(store_backend: str) -> None:
    assert backends.store_backend("default").name == store_backend


def test_the_backend_is_chosen_once_per_alias_from_its_driver(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(backends, "CHOSEN", {})  # whatever the test's own backend is
    chosen = backends.store_backend("default")
    assert chosen.name == ("postgres" if uses_postgres_statements("default") else "portable")
    assert backends.store_backend("default") is chosen
    assert {"default": chosen} == backends.CHOSEN
    if connection.vendor != "postgresql":
        assert chosen is backends.portable_backend()
