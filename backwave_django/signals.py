"""Django signals for jobs, sent in-process by the process that caused the event.

* ``job_enqueued(sender=JobDefinition, job_id=…, wire_name=…, queue=…)``: after the enqueue's
  transaction commits (at once outside one), by the process that enqueued it (a workflow's
  members too); not for duplicates.
* ``job_started(sender=Worker, job_id=…, wire_name=…, queue=…, attempt=…)``: by the worker, as it
  hands a claimed job to its handler.
* ``job_finished(sender=Worker, job_id=…, wire_name=…, queue=…, attempt=…, state=JobState)``: by
  the worker, once the attempt's outcome is written (``state`` is the state it led to).

They are conveniences for code in the same process (metrics, logging). A process that crashes
sends nothing; the durable, at-least-once way to react to transitions is an observer (see
docs/observers.md). A receiver's error is logged and never affects the job.
"""

from __future__ import annotations

import logging
from typing import Any

from django.dispatch import Signal

logger = logging.getLogger("backwave_django.signals")

job_enqueued = Signal()
job_started = Signal()
job_finished = Signal()


def send(signal: Signal, sender: Any, **named: Any) -> None:
    """Send ``signal`` if anyone listens; receivers' errors are logged, never raised."""
    if not signal.has_listeners(sender):
        return
    for receiver, result in signal.send_robust(sender, **named):
        if isinstance(result, Exception):
            logger.error("A %s receiver (%r) failed", _name(signal), receiver, exc_info=result)


def _name(signal: Signal) -> str:
    for name in ("job_enqueued", "job_started", "job_finished"):
        if globals()[name] is signal:
            return name
    return "signal"
