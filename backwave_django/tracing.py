"""OpenTelemetry tracing, when the optional extra ``backwave-django[otel]`` is installed.

Two duties, described in docs/tracing.md:

* at enqueue, :func:`current_traceparent` reads the W3C ``traceparent`` of the caller's current
  span (None outside one), which ``client`` stores with the job (``JobRecord.trace_context``);
* in the worker, each attempt runs in a CONSUMER span (:func:`start_attempt`), a child of that
  stored context (a root span when there is none), ended with the attempt's outcome by
  :func:`end_attempt`.

This is the only module that imports OpenTelemetry, once, when it is imported. Without the
package :data:`ENABLED` is False and the callers check it before calling anything here, so a job
costs one flag check. With the API but no SDK configured the tracer is OpenTelemetry's no-op one:
the spans record nothing, and the attributes are not even built (:func:`start_attempt`).
"""

from __future__ import annotations

from contextlib import nullcontext
from typing import TYPE_CHECKING

from .core.outcomes import ClaimedJob, Failure, Outcome, Unroutable, outcome_name

try:
    from opentelemetry import trace
    from opentelemetry.context import Context
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
except ImportError:  # the extra is not installed: nothing here is called
    ENABLED = False
else:
    ENABLED = True
    _TRACER = trace.get_tracer("backwave_django")
    _PROPAGATOR = TraceContextTextMapPropagator()

if TYPE_CHECKING:
    from contextlib import AbstractContextManager

    from opentelemetry.trace import Span

_NOTHING = nullcontext()

#: The span attributes of an attempt (docs/tracing.md).
JOB_ID = "backwave.job.id"
WIRE_NAME = "backwave.job.wire_name"
QUEUE = "backwave.job.queue"
ATTEMPT = "backwave.job.attempt"
OUTCOME = "backwave.job.outcome"


def current_traceparent() -> str | None:
    """The ``traceparent`` of the current span, or None when no valid span is current."""
    if not trace.get_current_span().get_span_context().is_valid:
        return None
    carrier: dict[str, str] = {}
    _PROPAGATOR.inject(carrier)  # traceparent only: the stored context keeps no tracestate
    return carrier.get("traceparent")


def start_attempt(claimed: ClaimedJob) -> Span:
    """Start the CONSUMER span ``backwave.run {wire name}`` of one attempt: a child of the job's
    stored trace context, or the root of a new trace when it has none. Not made current here."""
    parent = Context()  # never the worker's own context: a job without a stored context is a root
    if claimed.trace_context is not None:
        parent = _PROPAGATOR.extract({"traceparent": claimed.trace_context}, parent)
    span = _TRACER.start_span(f"backwave.run {claimed.wire_name}", parent, trace.SpanKind.CONSUMER)
    if span.is_recording():
        span.set_attributes(
            {
                JOB_ID: str(claimed.job_id),
                WIRE_NAME: claimed.wire_name,
                QUEUE: claimed.queue,
                ATTEMPT: claimed.attempt,
            }
        )
    return span


def current(span: Span) -> AbstractContextManager[object]:
    """Make ``span`` the current one while the block runs (it is not ended on leaving).

    The no-op tracer's span of a job without a stored context has no valid context to pass on to
    the handler's own spans, so it is not made current at all.
    """
    if not span.get_span_context().is_valid:
        return _NOTHING
    return trace.use_span(span, end_on_exit=False, record_exception=False, set_status_on_exception=False)


def end_attempt(span: Span, outcome: Outcome, exception: BaseException | None) -> None:
    """End an attempt's span with its outcome: a failure (a timeout too) records the exception and
    sets the status to ERROR, as does quarantine; the other outcomes leave the status unset."""
    if span.is_recording():
        span.set_attribute(OUTCOME, outcome_name(outcome))
        if isinstance(outcome, Failure | Unroutable):
            if exception is not None:
                span.record_exception(exception)
            description = outcome.error if isinstance(outcome, Failure) else outcome.reason
            span.set_status(trace.StatusCode.ERROR, description)
    span.end()

