"""The job list's actions on selected jobs, each through ``operator`` (one audit row per job that
acted), and the words their result messages use."""

from __future__ import annotations

from .. import operator
from .console import bulk_operator_action

CANCEL_LABELS = {
    "CANCELLED_IMMEDIATELY": "cancelled immediately",
    "CANCELLATION_REQUESTED": "cancellation requested",
    "NOT_CANCELLABLE": "not cancellable",
}
REQUEUE_LABELS = {"REQUEUED": "requeued", "NOT_REQUEUEABLE": "not requeueable"}
RETRY_NOW_LABELS = {"RETRIED_NOW": "retried now", "NOT_RETRYING": "not waiting for a retry"}

cancel_jobs = bulk_operator_action(
    description="Cancel selected jobs",
    permission="cancel",
    run=lambda job, actor: operator.cancel(job.job_id, actor=actor),
    labels=CANCEL_LABELS,
)
requeue_jobs = bulk_operator_action(
    description="Requeue selected jobs",
    permission="requeue",
    run=lambda job, actor: operator.requeue(job.job_id, actor=actor),
    labels=REQUEUE_LABELS,
)
retry_now_jobs = bulk_operator_action(
    description="Retry selected jobs now",
    permission="requeue",
    run=lambda job, actor: operator.retry_now(job.job_id, actor=actor),
    labels=RETRY_NOW_LABELS,
)
