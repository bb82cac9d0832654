"""Fixtures for the example project's tests.

``pytest_plugins`` turns on backwave_django's test harness: the ``backwave`` fixture runs the shop's
jobs on a virtual clock, without a worker (see docs/testing.md and tests/test_jobs.py). pytest reads
``pytest_plugins`` only in the top-level ``conftest.py``, which this is.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from backwave_django import conf

pytest_plugins = ["backwave_django.testing.pytest_plugin"]


@pytest.fixture(autouse=True)
def _fresh_settings() -> Iterator[None]:
    """Each test reads ``settings.BACKWAVE`` afresh (tests that load the settings file change it)."""
    conf.reset()
    yield
    conf.reset()


@pytest.fixture(autouse=True)
def _fast_password_hashing(settings: Any) -> None:
    """The seed creates an admin user; a deliberately slow hash buys nothing in tests."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
