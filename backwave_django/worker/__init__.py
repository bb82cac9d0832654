"""The worker shell: the pump (claim → run → report), execution, hints and the supervisor."""

from .options import WorkerOptions
from .pump import Worker

__all__ = ["Worker", "WorkerOptions"]
