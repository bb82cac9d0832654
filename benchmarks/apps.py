from __future__ import annotations

from django.apps import AppConfig


class BenchmarksConfig(AppConfig):
    """Holds ``benchmarks/jobs.py`` (discovered like any app's jobs.py); no models."""

    name = "benchmarks"
    verbose_name = "backwave_django benchmarks"
