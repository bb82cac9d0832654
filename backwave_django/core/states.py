"""The job model's enumerations and its legal-edge table.

Integer values are persisted: never reorder or renumber them.
"""

from __future__ import annotations

import enum

from django.db.models.enums import IntegerChoices, TextChoices


class JobState(IntegerChoices):
    SCHEDULED = 0, "Scheduled"
    AWAITING_PARENT = 1, "Awaiting Parent"
    LEASED = 2, "Leased"
    SUCCEEDED = 3, "Succeeded"
    CANCELLED = 4, "Cancelled"
    DEAD_LETTERED = 5, "Dead-Lettered"
    QUARANTINED = 6, "Quarantined"

    @property
    def is_terminal(self) -> bool:
        return self.value >= 3

    @property
    def pascal(self) -> str:
        """The seed name (``DeadLettered``), used inside recorded causes."""
        return self.name.title().replace("_", "")


TERMINAL_STATES: frozenset[JobState] = frozenset(s for s in JobState if s.is_terminal)
LIVE_STATES: frozenset[JobState] = frozenset(s for s in JobState if not s.is_terminal)


class DependencyMode(IntegerChoices):
    ON_SUCCESS = 0, "On success"
    ON_ANY_TERMINAL = 1, "On any terminal"


class TerminalStateClass(IntegerChoices):
    SUCCEEDED_OR_CANCELLED = 0, "Succeeded or Cancelled"
    DEAD_LETTERED_OR_QUARANTINED = 1, "Dead-Lettered or Quarantined"

    @property
    def states(self) -> tuple[JobState, JobState]:
        if self is TerminalStateClass.SUCCEEDED_OR_CANCELLED:
            return (JobState.SUCCEEDED, JobState.CANCELLED)
        return (JobState.DEAD_LETTERED, JobState.QUARANTINED)


class CatchUp(IntegerChoices):
    SKIP = 0, "Skip"
    COALESCE = 1, "Coalesce"


class HistoryPolicy(IntegerChoices):
    OFF = 0, "Off"
    TRANSITIONS = 1, "Transitions"
    TRANSITIONS_AND_FAILURE_DETAIL = 2, "Transitions and failure detail"


class OperatorAction(TextChoices):
    CANCEL = "cancel", "Cancel"
    REQUEUE = "requeue", "Requeue"
    TRIGGER_SCHEDULE = "trigger_schedule", "Trigger schedule"
    PAUSE_QUEUE = "pause_queue", "Pause queue"
    RESUME_QUEUE = "resume_queue", "Resume queue"
    SET_CONCURRENCY_LIMIT = "set_concurrency_limit", "Set concurrency limit"
    SAVE_SCHEDULE = "save_schedule", "Save schedule"
    REMOVE_SCHEDULE = "remove_schedule", "Remove schedule"
    RETRY_NOW = "retry_now", "Retry now"
    PURGE = "purge", "Purge by retention"
    REMOVE_QUEUE = "remove_queue", "Remove queue settings"
    SET_LIMIT = "set_limit", "Override limit"
    CLEAR_LIMIT = "clear_limit", "Clear limit override"


class EnqueueResult(enum.Enum):
    OK = "Ok"
    DUPLICATE = "Duplicate"
    PAYLOAD_TOO_LARGE = "PayloadTooLarge"
    WIRE_NAME_TOO_LONG = "WireNameTooLong"
    UNKNOWN_PARENT = "UnknownParent"
    TOO_MANY_PARENTS = "TooManyParents"


class WorkflowEnqueueResult(enum.Enum):
    """What ``store.enqueue_workflow`` did; anything but ``OK`` wrote nothing (docs/workflows.md)."""

    OK = "Ok"
    DUPLICATE_WORKFLOW = "DuplicateWorkflow"
    WORKFLOW_NOT_FOUND = "WorkflowNotFound"
    DUPLICATE_MEMBER = "DuplicateMember"
    CONTAINMENT_VIOLATION = "ContainmentViolation"
    EMPTY_WORKFLOW = "EmptyWorkflow"
    PAYLOAD_TOO_LARGE = "PayloadTooLarge"
    WIRE_NAME_TOO_LONG = "WireNameTooLong"
    TOO_MANY_PARENTS = "TooManyParents"


class WorkflowStatus(enum.Enum):
    """A workflow's status: never stored, always projected from its members' states."""

    RUNNING = "Running"
    FAILED = "Failed"
    CANCELLED = "Cancelled"
    SUCCEEDED = "Succeeded"


class CancelResult(enum.Enum):
    CANCELLED_IMMEDIATELY = "CancelledImmediately"
    CANCELLATION_REQUESTED = "CancellationRequested"
    NOT_CANCELLABLE = "NotCancellable"


class RequeueResult(enum.Enum):
    REQUEUED = "Requeued"
    NOT_REQUEUEABLE = "NotRequeueable"


class OutcomeResult(enum.Enum):
    APPLIED = "Applied"
    STALE_LEASE = "StaleLease"


class RetryNowResult(enum.Enum):
    RETRIED_NOW = "RetriedNow"
    NOT_RETRYING = "NotRetrying"


class TriggerScheduleResult(enum.Enum):
    TRIGGERED = "Triggered"
    SCHEDULE_NOT_FOUND = "ScheduleNotFound"


class RemoveQueueResult(enum.Enum):
    """What removing a queue's settings row did; only ``REMOVED`` changed (and audited) anything."""

    REMOVED = "Removed"
    #: The queue has no settings row: nothing to remove.
    NO_SETTINGS = "NoSettings"
    #: The queue holds jobs (in any state): its settings stay.
    HOLDS_JOBS = "HoldsJobs"


class ClearLimitResult(enum.Enum):
    """What clearing a limit's override did; only ``CLEARED`` changed (and audited) anything."""

    CLEARED = "Cleared"
    #: The limit is declared but no override is set: nothing to clear.
    NOT_OVERRIDDEN = "NotOverridden"
    #: No worker declares the limit and no override names it: a typo, most of the time.
    UNKNOWN_LIMIT = "UnknownLimit"


_S = JobState

#: Every legal (from, to) edge of the state machine; ``None`` is "no row yet".
#: A heartbeat (Leased → Leased) is not a transition and is not listed.
LEGAL_EDGES: frozenset[tuple[JobState | None, JobState]] = frozenset(
    {
        (None, _S.SCHEDULED),
        (None, _S.AWAITING_PARENT),
        (None, _S.CANCELLED),
        (_S.AWAITING_PARENT, _S.SCHEDULED),
        (_S.AWAITING_PARENT, _S.CANCELLED),
        (_S.SCHEDULED, _S.LEASED),
        (_S.LEASED, _S.SUCCEEDED),
        (_S.LEASED, _S.SCHEDULED),
        (_S.LEASED, _S.DEAD_LETTERED),
        (_S.LEASED, _S.CANCELLED),
        (_S.LEASED, _S.QUARANTINED),
        (_S.SCHEDULED, _S.CANCELLED),
        (_S.DEAD_LETTERED, _S.SCHEDULED),
        (_S.QUARANTINED, _S.SCHEDULED),
    }
)


def is_legal_edge(before: JobState | None, after: JobState) -> bool:
    return (before, after) in LEGAL_EDGES
