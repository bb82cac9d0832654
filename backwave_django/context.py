"""What a running handler sees of its own job: identity, the cancel flag, tags, progress,
ancestors' output; and :func:`current_job`, which finds it from anywhere inside the handler."""

from __future__ import annotations

import contextvars
import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC
from typing import Any

from . import clock
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
        self._progress: dict[str, Any] | None = None
        self._progress_unsaved = False
        #: Told (without arguments) whenever progress changes; the worker uses it to schedule a write.
        self.on_progress: Callable[[], None] | None = None

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

    def set_progress(self, done: float, total: float | None = None, note: str = "") -> None:
        """Record how far this attempt has got, e.g. ``ctx.set_progress(40, 200, "rows")``.

        Never blocks: the worker writes the latest value at most once a second per job (and the
        last one with the outcome); it is dropped if the lease is lost. It stays on the job after
        the attempt ends, and the admin shows it.
        """
        for name, value in (("done", done), ("total", total)):
            if value is None and name == "total":
                continue
            if isinstance(value, bool) or not isinstance(value, int | float) or value < 0 or value != value:
                raise ValueError(f"set_progress: {name} must be a number >= 0, got {value!r}")
        if not isinstance(note, str):
            raise TypeError(f"set_progress: note must be a str, got {type(note).__name__}")
        if len(note) > MAX_PROGRESS_NOTE_LENGTH:
            raise ValueError(
                f"set_progress: note is at most {MAX_PROGRESS_NOTE_LENGTH} characters, got {len(note)}"
            )
        at = clock.now().astimezone(UTC).isoformat().replace("+00:00", "Z")
        with self._lock:
            self._progress = {"done": done, "total": total, "note": note, "at": at}
            self._progress_unsaved = True
        if self.on_progress is not None:
            self.on_progress()

    @property
    def progress(self) -> dict[str, Any] | None:
        """The last progress this attempt recorded (``{"done", "total", "note", "at"}``), or None."""
        with self._lock:
            return None if self._progress is None else dict(self._progress)

    def take_unsaved_progress(self) -> dict[str, Any] | None:
        """The last progress if it changed since the previous call (for the worker's writes)."""
        with self._lock:
            if not self._progress_unsaved:
                return None
            self._progress_unsaved = False
            return dict(self._progress) if self._progress is not None else None

    def parent_output(self, job_id: uuid.UUID) -> Any:
        """The stored output of another job (typically a parent), or None when it has none."""
        from . import store

        return store.job_output(job_id)

    def __repr__(self) -> str:
        return f"<JobContext {self.wire_name} {self.job_id} attempt {self.attempt}>"


#: The longest ``note`` :meth:`JobContext.set_progress` accepts.
MAX_PROGRESS_NOTE_LENGTH = 500

_current: contextvars.ContextVar[JobContext | None] = contextvars.ContextVar(
    "backwave_current_job", default=None
)


def current_job() -> JobContext | None:
    """The running attempt's :class:`JobContext`, from anywhere inside a handler (sync or
    ``async def``, with or without ``takes_context``); None outside a job."""
    return _current.get()


@contextmanager
def running_as(context: JobContext) -> Iterator[None]:
    """Make ``context`` what :func:`current_job` returns while the block runs (worker and harness)."""
    token = _current.set(context)
    try:
        yield
    finally:
        _current.reset(token)
