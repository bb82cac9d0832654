"""The worker shell: the pump (claim → run → report), execution, hints and the supervisor."""

from .pump import Worker, WorkerOptions

__all__ = ["Worker", "WorkerOptions"]
