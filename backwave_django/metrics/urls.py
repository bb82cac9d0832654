"""``path("metrics/", include("backwave_django.metrics.urls"))``: the metrics view at that path."""

from __future__ import annotations

from django.urls import path

from .views import metrics

app_name = "backwave_metrics"
urlpatterns = [path("", metrics, name="metrics")]
