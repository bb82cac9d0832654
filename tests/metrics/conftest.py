"""Helpers for the metrics tests: scraping and parsing Prometheus' text format."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from prometheus_client.parser import text_string_to_metric_families

from backwave_django.metrics.collector import shared_cache

TOKEN = "s3cret-metrics-token-0123456789"


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of a scrape: (name, sorted labels) -> value."""
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def value(found: dict, name: str, **labels: str) -> float | None:
    return found.get((name, tuple(sorted(labels.items()))))


@pytest.fixture(autouse=True)
def fresh_counts() -> Iterator[None]:
    """Each test starts without cached counts (the cache is per process)."""
    shared_cache.clear()
    yield
    shared_cache.clear()


@pytest.fixture
def metrics_settings(settings):
    settings.BACKWAVE = {"METRICS_TOKEN": TOKEN, "METRICS_COUNT_INTERVAL": 3600}
    return settings
