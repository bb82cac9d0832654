"""The storage contract: every state change of a job, one transaction each, at an explicit ``now``.

This package is the only code that writes job, edge, tag, transition, schedule and audit rows. It
never reads a clock: every function takes ``now``, which is what lets tests drive weeks of
virtual time in milliseconds. Each function runs in one ``transaction.atomic()`` block, so it
joins the caller's transaction when there is one (enqueue inside ``atomic()`` commits or rolls
back with the caller's writes) and is all-or-nothing otherwise.

One module per family of operations: ``enqueueing`` (and ``batches``: many batches of it),
``claims`` (and ``flow``, ``limits``: flow control), ``leases``, ``outcomes``, ``actions``
(operator actions; ``limit_overrides``, those on flow-control limits), ``schedules``,
``workflows``, ``housekeeping`` and ``observers``. The hot ones (claim, enqueue, report) have two
implementations behind one interface each (``backends``): the portable ORM path beside the
contract here, the reference, and PostgreSQL's fast path in ``postgres/`` (its SQL files, its
cursors and pipelined transactions); the same tests run against both, and they are put together
below. ``_tx`` holds transactions, retries, hints and audit rows; ``_rows`` the locked rows, the
unit of work and the dependency cascade. See docs/architecture.md and docs/store.md.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

from .actions import (
    cancel_job,
    pause_queue,
    remove_queue_settings,
    requeue,
    resume_queue,
    retry_now,
    set_concurrency_limit,
)
from .backends import StoreBackend, install
from .batches import PortableBatchWriter, enqueue_batches
from .claims import PortableClaims, claim
from .enqueueing import PortableInserts, check_bounds, enqueue, enqueue_batch, enqueue_many, missing_jobs
from .flow import held_until
from .housekeeping import (
    count_purgeable,
    prune_workers,
    purge_terminal,
    record_purge,
    register_worker,
    touch_worker,
    unregister_worker,
)
from .job_inserts import Enqueued
from .leases import (
    ExpiredLeases,
    expire_leases,
    heartbeat,
    record_progress,
    release_leases,
    sweep_expired_leases,
)
from .limit_overrides import KEEP, Keep, clear_limit, set_limit
from .limits import declare_limits
from .observers import claim_observer_deliveries, report_observer_deliveries, sequence_log
from .outcomes import PortableOutcomes, job_output, report_outcome, report_outcomes
from .postgres.claims import PostgresClaims
from .postgres.connection import connect, on_raw_connection, own_connection_params
from .postgres.enqueue.batches import PostgresBatchWriter
from .postgres.enqueue.one_batch import PostgresInserts
from .postgres.notifications import CANCEL_CHANNEL, HINT_CHANNEL, read_hint
from .postgres.outcomes import PostgresOutcomes
from .schedules import (
    mint_due,
    prune_settings_schedules,
    remove_schedule,
    resolve_schedule,
    trigger_schedule,
    upsert_schedule,
)
from .workflows import enqueue_workflow, refusal_text

# The two implementations of the hot operations (store/backends.py), put together here, once.
install(
    portable=StoreBackend(
        "portable", PortableClaims(), PortableInserts(), PortableBatchWriter(), PortableOutcomes()
    ),
    postgres=StoreBackend(
        "postgres", PostgresClaims(), PostgresInserts(), PostgresBatchWriter(), PostgresOutcomes()
    ),
)

__all__ = [
    "CANCEL_CHANNEL",
    "HINT_CHANNEL",
    "KEEP",
    "Enqueued",
    "ExpiredLeases",
    "Keep",
    "cancel_job",
    "check_bounds",
    "claim",
    "claim_observer_deliveries",
    "clear_limit",
    "connect",
    "count_purgeable",
    "declare_limits",
    "enqueue",
    "enqueue_batch",
    "enqueue_batches",
    "enqueue_many",
    "enqueue_workflow",
    "expire_leases",
    "heartbeat",
    "held_until",
    "job_output",
    "list_workflows",
    "mint_due",
    "missing_jobs",
    "observer_cursor",
    "observer_dead_letters",
    "observer_lag",
    "on_raw_connection",
    "own_connection_params",
    "pause_queue",
    "prune_settings_schedules",
    "prune_workers",
    "purge_terminal",
    "read_hint",
    "record_progress",
    "record_purge",
    "refusal_text",
    "register_worker",
    "release_leases",
    "remove_queue_settings",
    "remove_schedule",
    "report_observer_deliveries",
    "report_outcome",
    "report_outcomes",
    "requeue",
    "resolve_schedule",
    "resume_queue",
    "retry_now",
    "sequence_log",
    "set_concurrency_limit",
    "set_limit",
    "sweep_expired_leases",
    "touch_worker",
    "transition_event",
    "trigger_schedule",
    "unregister_worker",
    "upsert_schedule",
    "workflow_graph",
    "workflow_status",
]


#: The reads the store's interface named before the monitor became the one read path
#: (docs/store.md, docs/upgrading.md). They are the monitor's functions, found when first asked
#: for: the store itself never reads through the monitor, and importing it does not load the
#: monitor.
MONITOR_READS = frozenset(
    {
        "list_workflows",
        "observer_cursor",
        "observer_dead_letters",
        "observer_lag",
        "transition_event",
        "workflow_graph",
        "workflow_status",
    }
)


def __getattr__(name: str) -> Any:
    if name in MONITOR_READS:
        return getattr(import_module("backwave_django.monitor"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
