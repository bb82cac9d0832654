"""The harness's own pytest fixtures, imported as a project's conftest.py would (see docs/testing.md)."""

from backwave_django.testing.pytest_plugin import backwave, backwave_start

__all__ = ["backwave", "backwave_start"]
