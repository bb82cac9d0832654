"""Flow-controlled jobs for the worker's end-to-end flow tests (tests/worker/test_flow_e2e.py).

Imported by ``tests/jobsapp/jobs.py`` only in processes started with ``BACKWAVE_TEST_FLOW=1`` (the
workers those tests start), so the limits declared here exist only where those tests need them.
The tests enqueue with ``store.enqueue_many``, giving each job the buckets and partition these
declarations give it.
"""

from __future__ import annotations

import time
from pathlib import Path

from backwave_django import Limit, job

#: How long the first job of a key waits for a job of another key to be running at the same time.
MEET_TIMEOUT = 15.0


@job("flow.per-key", queue="flow-key", limits=[Limit("e2e-per-key", concurrency=1, key="key")])
def per_key(key: str, meet_dir: str | None = None, hold: float = 0.05) -> None:
    """Holds its key's slot for ``hold`` s. With ``meet_dir``, it first marks its key as started
    there and waits until a job of another key has started too: it gets past that only while a job
    of another key runs at the same time, which a limit that serialised unrelated keys would never
    allow (it then fails after :data:`MEET_TIMEOUT`)."""
    if meet_dir:
        folder = Path(meet_dir)
        (folder / key).touch()
        deadline = time.monotonic() + MEET_TIMEOUT
        while not any(entry.name != key for entry in folder.iterdir()):
            if time.monotonic() > deadline:
                raise RuntimeError(f"no job of another key started while key {key}'s first job ran")
            time.sleep(0.02)
    time.sleep(hold)


@job("flow.rated", queue="flow-rate", limits=[Limit("e2e-rate", rate=10, period=1.0)])
def rated(index: int) -> int:
    return index


@job("flow.tenant", queue="flow-fair", partition="tenant")
def tenant_work(tenant: str, index: int) -> int:
    return index
