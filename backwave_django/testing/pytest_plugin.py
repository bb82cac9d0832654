"""pytest fixtures for testing your own jobs: ``backwave`` (a started harness) and ``backwave_start``.

Enable them in your top-level ``conftest.py``::

    pytest_plugins = ["backwave_django.testing.pytest_plugin"]

or import the fixtures into any ``conftest.py``. ``backwave`` needs pytest-django: it requests the
``db`` fixture, so it also works in tests that use ``transactional_db`` or
``@pytest.mark.django_db(transaction=True)``. Override ``backwave_start`` to begin elsewhere in time.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from .harness import BackWaveHarness


@pytest.fixture
def backwave_start() -> datetime:
    """Where the ``backwave`` fixture's virtual clock starts: 2026-01-01T00:00:00Z unless overridden."""
    from .harness import DEFAULT_START

    return DEFAULT_START


@pytest.fixture
def backwave(db: None, backwave_start: datetime) -> Iterator[BackWaveHarness]:
    """A started :class:`~backwave_django.testing.BackWaveHarness`; the real clock comes back after."""
    from .harness import BackWaveHarness

    with BackWaveHarness(start=backwave_start) as harness:
        yield harness
