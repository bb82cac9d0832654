"""backwave_django: durable background jobs in your Django project's own database.

Importing this package never touches models or settings; names are loaded on first use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from . import store as store
    from .core.outcomes import (
        Cancelled as Cancelled,
    )
    from .core.outcomes import (
        ClaimedJob as ClaimedJob,
    )
    from .core.outcomes import (
        Failure as Failure,
    )
    from .core.outcomes import (
        HeartbeatResult as HeartbeatResult,
    )
    from .core.outcomes import (
        NewJob as NewJob,
    )
    from .core.outcomes import (
        OutcomeReport as OutcomeReport,
    )
    from .core.outcomes import (
        Success as Success,
    )
    from .core.outcomes import (
        Unroutable as Unroutable,
    )
    from .core.retry import RetryPolicy as RetryPolicy
    from .core.states import (
        CancelResult as CancelResult,
    )
    from .core.states import (
        CatchUp as CatchUp,
    )
    from .core.states import (
        DependencyMode as DependencyMode,
    )
    from .core.states import (
        EnqueueResult as EnqueueResult,
    )
    from .core.states import (
        HistoryPolicy as HistoryPolicy,
    )
    from .core.states import (
        JobState as JobState,
    )
    from .core.states import (
        OutcomeResult as OutcomeResult,
    )
    from .core.states import (
        RequeueResult as RequeueResult,
    )
    from .core.states import (
        TerminalStateClass as TerminalStateClass,
    )
    from .core.states import (
        TriggerScheduleResult as TriggerScheduleResult,
    )
    from .exceptions import EnqueueError as EnqueueError
    from .exceptions import OutputTooLarge as OutputTooLarge

_EXPORTS: dict[str, str] = {
    **dict.fromkeys(
        [
            "JobState",
            "DependencyMode",
            "TerminalStateClass",
            "CatchUp",
            "HistoryPolicy",
            "EnqueueResult",
            "CancelResult",
            "RequeueResult",
            "OutcomeResult",
            "TriggerScheduleResult",
        ],
        "backwave_django.core.states",
    ),
    **dict.fromkeys(
        [
            "NewJob",
            "OutcomeReport",
            "Success",
            "Failure",
            "Cancelled",
            "Unroutable",
            "ClaimedJob",
            "HeartbeatResult",
        ],
        "backwave_django.core.outcomes",
    ),
    "RetryPolicy": "backwave_django.core.retry",
    "EnqueueError": "backwave_django.exceptions",
    "OutputTooLarge": "backwave_django.exceptions",
}
_MODULES = frozenset({"store"})

__all__ = sorted([*_EXPORTS, *_MODULES])


def __getattr__(name: str) -> Any:
    if name in _MODULES:
        return importlib.import_module(f"backwave_django.{name}")
    if name in _EXPORTS:
        value = getattr(importlib.import_module(_EXPORTS[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'backwave_django' has no attribute {name!r}")


def __dir__() -> list[str]:
    return __all__
