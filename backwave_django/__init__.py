"""backwave_django: durable background jobs in your Django project's own database.

Importing this package never touches models or settings; names are loaded on first use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from . import operator as operator, store as store
    from .client import (
        EnqueueReceipt as EnqueueReceipt,
        PreparedJob as PreparedJob,
        aenqueue_many as aenqueue_many,
        enqueue_many as enqueue_many,
    )
    from .context import JobCancelled as JobCancelled, JobContext as JobContext, current_job as current_job
    from .core.limits import Limit as Limit
    from .core.observing import (
        ObserverDisposition as ObserverDisposition,
        TransitionEvent as TransitionEvent,
    )
    from .core.outcomes import (
        Cancelled as Cancelled,
        ClaimedJob as ClaimedJob,
        Failure as Failure,
        HeartbeatResult as HeartbeatResult,
        NewJob as NewJob,
        OutcomeReport as OutcomeReport,
        ScheduleSpec as ScheduleSpec,
        Snoozed as Snoozed,
        Success as Success,
        Unroutable as Unroutable,
    )
    from .core.retry import RetryPolicy as RetryPolicy
    from .core.states import (
        CancelResult as CancelResult,
        CatchUp as CatchUp,
        DependencyMode as DependencyMode,
        EnqueueResult as EnqueueResult,
        HistoryPolicy as HistoryPolicy,
        JobState as JobState,
        OutcomeResult as OutcomeResult,
        RemoveQueueResult as RemoveQueueResult,
        RequeueResult as RequeueResult,
        RetryNowResult as RetryNowResult,
        TerminalStateClass as TerminalStateClass,
        TriggerScheduleResult as TriggerScheduleResult,
        WorkflowEnqueueResult as WorkflowEnqueueResult,
        WorkflowStatus as WorkflowStatus,
    )
    from .core.unique import Unique as Unique
    from .core.workflows import WorkflowDefinition as WorkflowDefinition
    from .exceptions import (
        Discard as Discard,
        EnqueueError as EnqueueError,
        JobTimeout as JobTimeout,
        OutputTooLarge as OutputTooLarge,
        Snooze as Snooze,
        WorkflowError as WorkflowError,
    )
    from .observers import observer as observer
    from .registry import JobDefinition as JobDefinition, job as job
    from .results import (
        JobSnapshot as JobSnapshot,
        await_job as await_job,
        get_job as get_job,
        wait_for as wait_for,
    )
    from .workflows import WorkflowReceipt as WorkflowReceipt, workflow as workflow

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
            "RetryNowResult",
            "RemoveQueueResult",
            "OutcomeResult",
            "TriggerScheduleResult",
            "WorkflowEnqueueResult",
            "WorkflowStatus",
        ],
        "backwave_django.core.states",
    ),
    **dict.fromkeys(
        [
            "NewJob",
            "OutcomeReport",
            "Success",
            "Failure",
            "Snoozed",
            "Cancelled",
            "Unroutable",
            "ClaimedJob",
            "HeartbeatResult",
            "ScheduleSpec",
        ],
        "backwave_django.core.outcomes",
    ),
    "RetryPolicy": "backwave_django.core.retry",
    "Limit": "backwave_django.core.limits",
    **dict.fromkeys(
        ["EnqueueError", "WorkflowError", "OutputTooLarge", "Snooze", "Discard", "JobTimeout"],
        "backwave_django.exceptions",
    ),
    "job": "backwave_django.registry",
    "JobDefinition": "backwave_django.registry",
    "JobContext": "backwave_django.context",
    "JobCancelled": "backwave_django.context",
    "current_job": "backwave_django.context",
    "PreparedJob": "backwave_django.client",
    "EnqueueReceipt": "backwave_django.client",
    "enqueue_many": "backwave_django.client",
    "aenqueue_many": "backwave_django.client",
    "Unique": "backwave_django.core.unique",
    "TransitionEvent": "backwave_django.core.observing",
    "ObserverDisposition": "backwave_django.core.observing",
    "observer": "backwave_django.observers",
    **dict.fromkeys(["JobSnapshot", "get_job", "wait_for", "await_job"], "backwave_django.results"),
    "WorkflowDefinition": "backwave_django.core.workflows",
    **dict.fromkeys(["workflow", "WorkflowReceipt"], "backwave_django.workflows"),
}
_MODULES = frozenset({"store", "operator"})

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
