"""Workflows for application code: collect prepared jobs, then store them as one workflow.

::

    with backwave_django.workflow(name="import") as wf:
        fetch = wf.add(fetch_feed.prepare(url))
        parse = wf.add(parse_feed.prepare(url), after=[fetch])
        wf.add(notify.prepare("import done"), after=[parse])
    # stored on leaving the block (nothing if the block raised); wf.workflow_id names it

``wf.enqueue()`` stores it explicitly instead. Either way the jobs are stored in one transaction
through ``store.enqueue_workflow`` (joining the caller's ``transaction.atomic()`` when there is
one), on the real clock, and a refusal raises :class:`~backwave_django.WorkflowError` with
nothing stored. See docs/workflows.md.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from types import TracebackType

from asgiref.sync import sync_to_async

from . import clock, signals, store, tracing
from .client import announce_enqueued
from .core.frozen import copy_unchecked
from .core.ids import uuid7, workflow_id_for_key
from .core.outcomes import NewJob
from .core.states import WorkflowEnqueueResult
from .core.validation import require_str
from .core.workflows import MAX_WORKFLOW_NAME_LENGTH, WorkflowDefinition
from .exceptions import WorkflowError


@dataclass(frozen=True, slots=True)
class WorkflowReceipt:
    """What a stored workflow holds now: its id and the ids of the jobs this enqueue added, in the
    order they were added."""

    workflow_id: uuid.UUID
    job_ids: tuple[uuid.UUID, ...]


class WorkflowBuilder:
    """Collects the jobs of one workflow (see :func:`workflow`); not shared between threads."""

    def __init__(
        self,
        name: str | None,
        workflow_id: uuid.UUID,
        *,
        append: bool,
        restarted_from: uuid.UUID | None,
    ) -> None:
        self._name = name
        self._workflow_id = workflow_id
        self._append = append
        self._restarted_from = restarted_from
        self._jobs: list[NewJob] = []
        self._receipt: WorkflowReceipt | None = None

    @property
    def workflow_id(self) -> uuid.UUID:
        """The workflow's id (known before it is stored)."""
        return self._workflow_id

    @property
    def name(self) -> str | None:
        return self._name

    @property
    def jobs(self) -> tuple[NewJob, ...]:
        """The jobs added so far, in order, as they will be stored."""
        return tuple(self._jobs)

    @property
    def receipt(self) -> WorkflowReceipt | None:
        """What :meth:`enqueue` returned, or None before the workflow is stored."""
        return self._receipt

    def add(self, prepared: NewJob, *, after: Sequence[NewJob | uuid.UUID] = ()) -> NewJob:
        """Add a job (``definition.prepare(...)`` or ``definition.using(...).prepare(...)``).

        Its parents (``.using(parents=[...])`` and ``after``: jobs or job ids) must be members of
        the workflow: jobs added to this builder, or, for an append, jobs stored in the workflow
        before. Returns the job as it will be stored (with ``after`` among its parents), whose
        ``job_id`` later jobs can name.
        """
        if self._receipt is not None:
            raise RuntimeError(f"workflow {self._workflow_id} is already enqueued; start another to add jobs")
        if not isinstance(prepared, NewJob):
            raise TypeError(f"add takes a prepared job (job.prepare(...)), got {prepared!r}")
        if prepared.unique is not None:
            raise ValueError(
                f"job '{prepared.wire_name}' is a unique job; a workflow member cannot be "
                "one: give the workflow a stable workflow_id instead"
            )
        if isinstance(after, NewJob | uuid.UUID | str):
            raise TypeError("after must be a list of jobs or job ids")
        extra = []
        for index, parent in enumerate(after):
            if isinstance(parent, NewJob):
                extra.append(parent.job_id)
            elif isinstance(parent, uuid.UUID):
                extra.append(parent)
            else:
                raise TypeError(
                    f"after[{index}] must be a prepared job or a uuid.UUID, got {type(parent).__name__}"
                )
        if extra:
            parents = tuple(dict.fromkeys((*prepared.parents, *extra)))
            prepared = copy_unchecked(prepared, parents=parents)  # every parent is a checked UUID
        self._jobs.append(prepared)
        return prepared

    def enqueue(self) -> WorkflowReceipt:
        """Store the workflow: every job, or (raising :class:`~backwave_django.WorkflowError`)
        none of them. Run once."""
        if self._receipt is not None:
            raise RuntimeError(f"workflow {self._workflow_id} is already enqueued")
        now = clock.now()
        trace_context = tracing.current_traceparent() if tracing.ENABLED else None
        definition = WorkflowDefinition(
            workflow_id=self._workflow_id,
            name=self._name,
            members=tuple(job.due_at(now, trace_context) for job in self._jobs),
            is_append=self._append,
            restarted_from=self._restarted_from,
        )
        result = store.enqueue_workflow(definition, now=now)
        if result is not WorkflowEnqueueResult.OK:
            raise WorkflowError(result, store.refusal_text(definition, result))
        if signals.job_enqueued.has_listeners():
            announce_enqueued(self._jobs)
        self._receipt = WorkflowReceipt(self._workflow_id, tuple(job.job_id for job in self._jobs))
        return self._receipt

    async def aenqueue(self) -> WorkflowReceipt:
        """:meth:`enqueue` for ``async def`` code (in Django's thread for synchronous code, like
        ``aenqueue_many``)."""
        return await sync_to_async(self.enqueue, thread_sensitive=True)()

    def __enter__(self) -> WorkflowBuilder:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        # The block ended normally: store what it added (unless it enqueued already). A block
        # that raised stores nothing, and its exception goes on.
        if exc_type is None and self._receipt is None:
            self.enqueue()

    def __repr__(self) -> str:
        state = "enqueued" if self._receipt is not None else f"{len(self._jobs)} job(s) so far"
        return f"<WorkflowBuilder {self._name or self._workflow_id}: {state}>"


def workflow(
    name: str | None = None,
    *,
    workflow_id: uuid.UUID | str | None = None,
    append: bool = False,
    restarted_from: uuid.UUID | None = None,
) -> WorkflowBuilder:
    """Start a workflow: ``wf.add(...)`` its jobs, then ``wf.enqueue()`` (or leave a ``with`` block).

    ``workflow_id`` is a UUID, a string key (the same key, the same id: a second create of it is
    refused, ``DUPLICATE_WORKFLOW``), or None for a new id. ``append=True`` adds the jobs to the
    existing workflow ``workflow_id`` instead (it takes no name). ``restarted_from`` records the
    workflow this one re-runs.
    """
    if name is not None:
        require_str("name", name)
        if len(name) > MAX_WORKFLOW_NAME_LENGTH:
            raise ValueError(f"name is at most {MAX_WORKFLOW_NAME_LENGTH} characters, got {len(name)}")
    if not isinstance(append, bool):
        raise TypeError(f"append must be a bool, got {type(append).__name__}")
    if isinstance(workflow_id, str):
        resolved = workflow_id_for_key(require_str("workflow_id", workflow_id))
    elif workflow_id is None:
        if append:
            raise ValueError("append=True needs the workflow_id of the workflow to add jobs to")
        resolved = uuid7()
    elif isinstance(workflow_id, uuid.UUID):
        resolved = workflow_id
    else:
        raise TypeError(f"workflow_id must be a UUID or a str key, got {type(workflow_id).__name__}")
    if append and (name is not None or restarted_from is not None):
        raise ValueError(
            "an append adds jobs to an existing workflow: its name and restarted_from were given "
            "when it was created"
        )
    if restarted_from is not None and not isinstance(restarted_from, uuid.UUID):
        raise TypeError(f"restarted_from must be a uuid.UUID, got {type(restarted_from).__name__}")
    return WorkflowBuilder(name, resolved, append=append, restarted_from=restarted_from)
