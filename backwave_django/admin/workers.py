"""The Workers page: every worker process that has reported in, with its liveness.

Rows are written by the workers' heartbeats and only viewed here. A worker not seen for five
heartbeat intervals shows as stale, the same rule the worker uses to prune rows
(``docs/admin.md``, "Workers and operator audit").
"""

from __future__ import annotations

from django.contrib import admin
from django.utils import timezone

from .. import monitor
from ..models import WorkerNode
from .console import CLAIMING_TONE, STALE_TONE, ReadOnlyAdmin, format_instant, tone_badge


class WorkerNodeAdmin(ReadOnlyAdmin):
    """The workers, most recently seen first: host, pid, queues, concurrency and alive/stale."""

    list_display = (
        "worker_id",
        "hostname",
        "pid",
        "queue_list",
        "concurrency",
        "started",
        "last_seen",
        "status",
    )
    ordering = ("-last_seen_at",)

    @admin.display(description="queues")
    def queue_list(self, row: WorkerNode) -> str:
        return ", ".join(str(queue) for queue in row.queues)

    @admin.display(description="started", ordering="started_at")
    def started(self, row: WorkerNode) -> str:
        return format_instant(row.started_at)

    @admin.display(description="last seen", ordering="last_seen_at")
    def last_seen(self, row: WorkerNode) -> str:
        return format_instant(row.last_seen_at)

    @admin.display(description="alive", boolean=True)
    def alive(self, row: WorkerNode) -> bool:
        return monitor.is_worker_live(row.last_seen_at, now=timezone.now())

    @admin.display(description="status")
    def status(self, row: WorkerNode) -> str:
        if self.alive(row):
            return tone_badge("alive", CLAIMING_TONE)
        return tone_badge("stale", STALE_TONE)
