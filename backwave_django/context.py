"""What a running handler sees of its own job: identity, the cancel flag, tags, ancestors' output."""

from __future__ import annotations

import threading
import uuid
from typing import Any

from .core.ids import uuid7
from .core.tags import Tag, TagPair, normalize_tag, tag_from_pair


class JobCancelled(Exception):
    """Raised by :meth:`JobContext.raise_if_cancelled` once an operator asked the job to stop.

    A handler that ends with it after a cancel request is recorded Cancelled (``operator-cancel``);
    raised without one, it is an ordinary failure.
    """


class JobContext:
    """Passed as the first argument to handlers declared with ``takes_context=True``."""

    def __init__(self, *, job_id: uuid.UUID, attempt: int, wire_name: str, queue: str) -> None:
        self.job_id = job_id
        self.attempt = attempt
        self.wire_name = wire_name
        self.queue = queue
        self._cancel = threading.Event()
        self._lock = threading.Lock()
        self._added: list[TagPair] = []

    @classmethod
    def detached(cls, wire_name: str) -> JobContext:
        """A context for running a handler inline with ``.call()``: a fresh id, attempt 1, no cancel."""
        return cls(job_id=uuid7(), attempt=1, wire_name=wire_name, queue="default")

    @property
    def cancel_requested(self) -> bool:
        """True once an operator asked this job to stop (delivered with the lease heartbeats)."""
        return self._cancel.is_set()

    def raise_if_cancelled(self) -> None:
        """Stop here if an operator cancelled the job; the worker records it Cancelled."""
        if self._cancel.is_set():
            raise JobCancelled(f"job {self.job_id} was cancelled by an operator")

    def request_cancel(self) -> None:
        """Raise the cancel flag (the worker calls this when a heartbeat reports a cancel request)."""
        self._cancel.set()

    def add_tag(self, key: str, value: str) -> None:
        """Add a keyed tag; it is stored with this attempt's outcome (and dropped if the lease was lost)."""
        self._add(normalize_tag((key, value)))

    def add_label(self, value: str) -> None:
        """Add a label; it is stored with this attempt's outcome."""
        self._add(normalize_tag(value))

    def _add(self, pair: TagPair) -> None:
        with self._lock:
            if pair not in self._added:
                self._added.append(pair)

    @property
    def added_tags(self) -> tuple[Tag, ...]:
        """The tags added during this attempt (labels as strings, keyed tags as pairs)."""
        with self._lock:
            return tuple(tag_from_pair(p) for p in self._added)

    def parent_output(self, job_id: uuid.UUID) -> Any:
        """The stored output of another job (typically a parent), or None when it has none."""
        from . import store

        return store.job_output(job_id)

    def __repr__(self) -> str:
        return f"<JobContext {self.wire_name} {self.job_id} attempt {self.attempt}>"
