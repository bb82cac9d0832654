"""A real OpenTelemetry SDK for the tracing tests: a tracer provider set once for the session, its
finished spans kept in an ``InMemorySpanExporter`` while a test asks for them (``spans``)."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from backwave_django.core.dispatch import StrictDispatch
from backwave_django.worker import Worker, WorkerOptions


class Capture(SpanProcessor):
    """Exports finished spans only while a test captures them, so the rest of the suite (which runs
    with this provider installed too) records into nothing."""

    def __init__(self, exporter: InMemorySpanExporter) -> None:
        self.inner = SimpleSpanProcessor(exporter)
        self.active = threading.Event()

    def on_end(self, span: ReadableSpan) -> None:
        if self.active.is_set():
            self.inner.on_end(span)


@pytest.fixture(scope="session")
def captured() -> tuple[InMemorySpanExporter, Capture]:
    exporter = InMemorySpanExporter()
    capture = Capture(exporter)
    provider = TracerProvider()
    provider.add_span_processor(capture)
    trace.set_tracer_provider(provider)
    assert trace.get_tracer_provider() is provider, "another tracer provider was installed first"
    return exporter, capture


@pytest.fixture
def spans(captured: tuple[InMemorySpanExporter, Capture]) -> Iterator[InMemorySpanExporter]:
    """The finished spans of this test (``spans.get_finished_spans()``)."""
    exporter, capture = captured
    exporter.clear()
    capture.active.set()
    yield exporter
    capture.active.clear()
    exporter.clear()


@pytest.fixture
def tracer(captured: tuple[InMemorySpanExporter, Capture]) -> trace.Tracer:
    """A tracer of the session's provider, for the enqueuer's own spans."""
    return trace.get_tracer("tests.tracing")


def run_worker(*queues: str) -> None:
    """Drain these queues with the worker's own loop (``backwave_worker --burst``), in this process."""
    worker = Worker(WorkerOptions(dispatch=StrictDispatch(list(queues)), concurrency=2, burst=True))
    assert worker.run() == 0
