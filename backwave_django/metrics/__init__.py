"""Prometheus metrics: job counts, outcomes, run times, latency, worker liveness, observer lag.

An optional extra, ``prometheus``, which brings prometheus_client (from a clone of this repository:
``pip install -e '.[prometheus]'``).
Nothing here imports prometheus_client at module level, so importing the package costs nothing
when the extra is not installed; :func:`prometheus_available` tells whether it is, and
:data:`MISSING_MESSAGE` says clearly what is missing.

- :mod:`.names`: every exported metric, its type, labels and help text (the one list the docs,
  the alert rules and the dashboard are checked against);
- :mod:`.counts`: the periodic count of jobs, workers and observer positions (read by
  ``monitor/counts.py``), cached for ``BACKWAVE["METRICS_COUNT_INTERVAL"]``;
- :mod:`.collector`: those counts as Prometheus gauges;
- :mod:`.recorder`: a worker's outcome counters and histograms, fed once per written batch;
- :mod:`.health`: when a worker process counts as healthy (``/healthz``);
- :mod:`.server`: ``backwave_worker --metrics-port``'s HTTP endpoint;
- :mod:`.views` and :mod:`.urls`: the Django view (staff session or bearer token).

docs/operations.md ("Metrics") describes each metric and what its reads cost.
"""

from __future__ import annotations

import importlib.util

#: What to do when prometheus_client is missing.
MISSING_MESSAGE = (
    "backwave_django's metrics need prometheus_client, which is not installed. "
    "Install it: pip install 'prometheus_client>=0.20' (or, from a clone of this repository, "
    "pip install -e '.[prometheus]')."
)


def prometheus_available() -> bool:
    """Whether prometheus_client can be imported (without importing it)."""
    return importlib.util.find_spec("prometheus_client") is not None
