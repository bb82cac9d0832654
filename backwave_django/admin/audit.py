"""The Operator audit page: who did what to which job, queue or schedule, and when.

Rows are written by the store, one per operator action that acted (through
:mod:`backwave_django.operator`), and are append-only: here they are only listed, newest first.
"""

from __future__ import annotations

from .console import ReadOnlyAdmin


class OperatorAuditAdmin(ReadOnlyAdmin):
    """The audit log, newest first, filterable by action and searchable by target and actor."""

    list_display = ("recorded_at", "actor", "action", "target")
    list_filter = ("action",)
    search_fields = ("target", "actor")
    ordering = ("-id",)
