"""``backwave_worker --metrics-port``: a small HTTP endpoint in the worker process.

``GET /metrics`` answers the worker's own metrics (:mod:`.recorder`) and the count gauges
(:mod:`.collector`); ``GET /healthz`` answers ``200`` or ``503`` by :mod:`.health`, without
touching the database. The server runs on daemon threads beside the worker; each request's
database connection (the count gauges, at most once per count interval) is closed when the
request ends.

Imports prometheus_client: import this module only once
:func:`~backwave_django.metrics.prometheus_available` says it is installed.
"""

from __future__ import annotations

import logging
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING

from django.db import connections
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.registry import CollectorRegistry

from .collector import CountCollector
from .health import WorkerHealth
from .recorder import WorkerMetrics

if TYPE_CHECKING:
    from ..worker.pump import Worker

logger = logging.getLogger("backwave_django.worker")


class MetricsServer(ThreadingHTTPServer):
    """Serves ``/metrics`` from ``registry`` and ``/healthz`` from ``health`` (once it is set)."""

    daemon_threads = True

    def __init__(self, host: str, port: int, registry: CollectorRegistry) -> None:
        super().__init__((host, port), _Handler)
        self.registry = registry
        self.health: WorkerHealth | None = None


class _Handler(BaseHTTPRequestHandler):
    server: MetricsServer
    timeout = 30

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]
        try:
            if path == "/metrics":
                self._answer(200, generate_latest(self.server.registry), CONTENT_TYPE_LATEST)
            elif path == "/healthz":
                health = self.server.health
                if health is None:
                    self._answer(503, b"unhealthy: the worker has not started\n")
                else:
                    verdict = health.check(time.time())
                    self._answer(200 if verdict.healthy else 503, verdict.detail.encode() + b"\n")
            else:
                self._answer(404, b"not found: try /metrics or /healthz\n")
        except Exception:
            logger.exception("The metrics endpoint failed to answer %s", path)
            self._answer(500, b"error: see the worker's log\n")
        finally:
            connections.close_all()  # this request thread's connections

    def _answer(self, status: int, body: bytes, content_type: str = "text/plain; charset=utf-8") -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        logger.debug("Metrics endpoint: " + format, *args)


class WorkerEndpoint:
    """The endpoint of one worker process: bound at once (so a taken port fails before any work
    starts), serving once :meth:`start` is given the worker."""

    def __init__(self, host: str, port: int) -> None:
        self.metrics = WorkerMetrics()
        self.metrics.registry.register(CountCollector())
        self.server = MetricsServer(host, port, self.metrics.registry)
        self.thread: threading.Thread | None = None

    @property
    def address(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host!s}:{port}"

    def start(self, worker: Worker) -> None:
        self.metrics.watch(
            running=lambda: len(worker.running),
            slots=worker.options.concurrency,
            last_heartbeat=lambda: worker.heartbeat_at,
        )
        self.server.health = WorkerHealth(
            heartbeat_interval=worker.settings.heartbeat_interval.total_seconds(),
            last_heartbeat=lambda: worker.heartbeat_at,
            started_at=time.time(),
        )
        self.thread = threading.Thread(target=self.server.serve_forever, name="backwave-metrics", daemon=True)
        self.thread.start()
        logger.info("Worker metrics at %s/metrics, health at %s/healthz", self.address, self.address)

    def stop(self) -> None:
        if self.thread is not None:
            self.server.shutdown()
        self.server.server_close()
