"""Test your own jobs without a worker: virtual time, a synchronous pump, snapshots and assertions.

::

    from backwave_django.testing import BackWaveHarness

    with BackWaveHarness() as bw:
        send_invoice.enqueue("o-1")
        bw.run_until_idle()
        bw.assert_enqueued(send_invoice, args=["o-1"], state=JobState.SUCCEEDED)

With pytest, enable the ``backwave`` fixture with
``pytest_plugins = ["backwave_django.testing.pytest_plugin"]`` in your top-level ``conftest.py``.
See ``docs/testing.md``. Importing this package does not touch models; names load on first use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .harness import (
        DEFAULT_START as DEFAULT_START,
        WORKER_ID as WORKER_ID,
        BackWaveHarness as BackWaveHarness,
        HarnessLimitExceeded as HarnessLimitExceeded,
        RunSummary as RunSummary,
    )
    from .snapshots import (
        JobSnapshot as JobSnapshot,
        ScheduleSnapshot as ScheduleSnapshot,
        TransitionSnapshot as TransitionSnapshot,
    )

_EXPORTS: dict[str, str] = {
    **dict.fromkeys(
        ["BackWaveHarness", "DEFAULT_START", "HarnessLimitExceeded", "RunSummary", "WORKER_ID"],
        "backwave_django.testing.harness",
    ),
    **dict.fromkeys(
        ["JobSnapshot", "ScheduleSnapshot", "TransitionSnapshot"], "backwave_django.testing.snapshots"
    ),
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        value = getattr(importlib.import_module(_EXPORTS[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'backwave_django.testing' has no attribute {name!r}")


def __dir__() -> list[str]:
    return __all__
