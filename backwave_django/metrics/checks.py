"""``backwave.W005``: the metrics view is routed, but prometheus_client is not installed."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from django.apps import AppConfig
from django.core.checks import CheckMessage, Tags, Warning, register
from django.urls import URLPattern, URLResolver, get_resolver

from . import MISSING_MESSAGE, prometheus_available


def _routes_metrics_view(patterns: Iterable[Any]) -> bool:
    from .views import metrics

    for pattern in patterns:
        if isinstance(pattern, URLResolver) and _routes_metrics_view(pattern.url_patterns):
            return True
        if isinstance(pattern, URLPattern) and pattern.callback is metrics:
            return True
    return False


@register(Tags.urls)
def check_metrics_view(
    app_configs: Sequence[AppConfig] | None = None, databases: Sequence[str] | None = None, **kwargs: Any
) -> list[CheckMessage]:
    if prometheus_available():
        return []
    try:
        routed = _routes_metrics_view(get_resolver().url_patterns)
    except Exception:  # a broken URLconf is Django's own check to report (urls.E…)
        return []
    if not routed:
        return []
    return [
        Warning(
            "The URLconf routes backwave_django.metrics.views.metrics, but prometheus_client is not "
            "installed: the view answers 503 to every authorised scrape.",
            hint=MISSING_MESSAGE,
            obj="backwave_django.metrics.views.metrics",
            id="backwave.W005",
        )
    ]
