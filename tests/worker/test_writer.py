"""The outcome writer's connection: opened as its thread starts, not by the first outcome write.

A worker's first job is done when its outcome is written, and the writer's thread has a
connection of its own (docs/worker.md, "What a worker does"). Opening it while the pump runs
its first maintenance and claim takes the connection set-up off the first write. A database
that refuses the connection then must not stop the writer: the write that needs the
connection meets the error and reports it, as any write does.
"""

from __future__ import annotations

import queue
from collections.abc import Callable, Iterator

import pytest
from django.db import connection

from backwave_django.worker.writer import OutcomeWriter, WriteDone
from tests.worker.conftest import allow_connections, wait_for

pytestmark = [pytest.mark.postgres, pytest.mark.session_bound, pytest.mark.django_db(transaction=True)]


def _sessions() -> int:
    """Client sessions on the test database, this test's own included."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity "
            "WHERE datname = current_database() AND backend_type = 'client backend'"
        )
        return int(cursor.fetchone()[0])


@pytest.fixture
def answers() -> queue.SimpleQueue[WriteDone]:
    return queue.SimpleQueue()


@pytest.fixture
def start_writer(answers: queue.SimpleQueue[WriteDone]) -> Iterator[Callable[[], OutcomeWriter]]:
    started: list[OutcomeWriter] = []

    def start() -> OutcomeWriter:
        writer = OutcomeWriter("default", "tests:1:writer", answers.put)
        started.append(writer)
        return writer

    yield start
    for writer in started:
        writer.stop()


def test_the_writer_opens_its_connection_before_its_first_batch(start_writer, answers):
    before = _sessions()
    writer = start_writer()
    wait_for(lambda: _sessions() == before + 1, what="the writer's own session")
    writer.submit([])
    done = answers.get(timeout=20)
    assert (done.results, done.error) == ([], None)
    writer.stop()
    wait_for(lambda: _sessions() == before, what="the writer's session to close when it stops")


def test_a_writer_that_cannot_connect_at_start_still_serves_its_batches(start_writer, answers):
    before = _sessions()
    allow_connections(False)
    try:
        writer = start_writer()
        writer.submit([])  # served once its connection attempt has failed
        done = answers.get(timeout=20)
    finally:
        allow_connections(True)
    assert (done.results, done.error) == ([], None)
    assert writer.thread.is_alive()
    assert _sessions() == before
