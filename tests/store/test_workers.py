"""The console's rows of running workers: registering, refreshing, removing and pruning them."""

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from backwave_django import store
from backwave_django.models import WorkerNode

from ..conftest import T0

pytestmark = pytest.mark.django_db(transaction=True)


def _register(worker_id: str, *, pid: int = 100, queues=("default",), now=T0) -> None:
    store.register_worker(
        worker_id=worker_id, hostname="host-a", pid=pid, queues=list(queues), concurrency=20, now=now
    )


def test_registering_writes_one_row_in_one_statement_and_again_overwrites_it():
    with CaptureQueriesContext(connection) as queries:
        _register("w-1")
    # One upsert (Django 5.2 wraps it in BEGIN and COMMIT; 6.x sends it alone), no SELECT or savepoint.
    statements = [q["sql"] for q in queries if q["sql"].split()[0] not in ("BEGIN", "COMMIT")]
    assert len(statements) == 1
    assert statements[0].startswith("INSERT")
    node = WorkerNode.objects.get(worker_id="w-1")
    assert (node.hostname, node.pid, node.queues, node.concurrency) == ("host-a", 100, ["default"], 20)
    assert node.started_at == node.last_seen_at == T0

    later = T0 + timedelta(minutes=5)
    _register("w-1", pid=200, queues=("a", "b"), now=later)  # a start that failed half-way, retried
    _register("w-2")
    node = WorkerNode.objects.get(worker_id="w-1")
    assert (node.pid, node.queues, node.started_at, node.last_seen_at) == (200, ["a", "b"], later, later)
    assert WorkerNode.objects.count() == 2


def test_touching_unregistering_and_pruning_workers():
    _register("w-1")
    _register("w-2")
    store.touch_worker("w-1", now=T0 + timedelta(minutes=10))
    assert store.prune_workers(seen_before=T0 + timedelta(minutes=1)) == 1
    assert list(WorkerNode.objects.values_list("worker_id", flat=True)) == ["w-1"]
    store.unregister_worker("w-1")
    assert not WorkerNode.objects.exists()


def test_registering_refuses_a_bad_worker_id_or_a_naive_time():
    with pytest.raises(ValueError, match="worker_id"):
        _register("")
    with pytest.raises(ValueError, match="now"):
        _register("w-1", now=T0.replace(tzinfo=None))
    assert not WorkerNode.objects.exists()
