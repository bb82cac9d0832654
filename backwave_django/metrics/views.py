"""The metrics view: the count gauges in Prometheus' text format, for staff or a bearer token.

Include it in a URLconf (``path("metrics/", include("backwave_django.metrics.urls"))``, or the
view itself). A request is let in when it comes from an active staff user's session, or carries
``Authorization: Bearer <BACKWAVE["METRICS_TOKEN"]>`` (compared in constant time). Anything else
gets ``401`` with an empty body and ``WWW-Authenticate: Bearer``: nothing about the jobs, and no
hint about why.
"""

from __future__ import annotations

import functools
import hmac
from typing import TYPE_CHECKING

from django.http import HttpRequest, HttpResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from ..conf import get_settings
from . import MISSING_MESSAGE, prometheus_available

if TYPE_CHECKING:
    from prometheus_client.registry import CollectorRegistry

BEARER = "bearer "


def allowed(request: HttpRequest) -> bool:
    """An active staff user's session, or the right bearer token."""
    user = getattr(request, "user", None)
    if user is not None and user.is_active and user.is_staff:
        return True
    token = get_settings().metrics_token
    header = request.headers.get("Authorization", "")
    if token is None or header[: len(BEARER)].lower() != BEARER:
        return False
    offered = header[len(BEARER) :].strip().encode()
    return hmac.compare_digest(offered, token.encode())


def unauthorized() -> HttpResponse:
    response = HttpResponse(b"", status=401, content_type="text/plain")
    response["WWW-Authenticate"] = "Bearer"
    return response


@functools.cache
def _registry() -> CollectorRegistry:
    from .collector import count_registry

    return count_registry()


@never_cache
@require_GET
def metrics(request: HttpRequest) -> HttpResponse:
    """The count gauges (docs/operations.md, "Metrics"), read at most once per count interval."""
    if not allowed(request):
        return unauthorized()
    if not prometheus_available():
        return HttpResponse(MISSING_MESSAGE, status=503, content_type="text/plain")
    from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest

    return HttpResponse(generate_latest(_registry()), content_type=CONTENT_TYPE_LATEST)
