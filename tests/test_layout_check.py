"""scripts/check_layout.py: each rule, fed small sources, names what breaks it and where."""

from __future__ import annotations

import importlib.util
import sys
import textwrap
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "check_layout.py"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("check_layout", SCRIPT)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["check_layout"] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


layout = _load()

MODULES = {
    "backwave_django",
    "backwave_django.clock",
    "backwave_django.models",
    "backwave_django.operator",
    "backwave_django.core",
    "backwave_django.core.states",
    "backwave_django.store",
    "backwave_django.store._schema",
    "backwave_django.store._tx",
    "backwave_django.store.leases",
    "backwave_django.worker",
    "backwave_django.worker.maintenance",
    "backwave_django.monitor",
    "backwave_django.monitor.dashboard",
    "backwave_django.metrics",
    "backwave_django.metrics.counts",
    "backwave_django.admin",
    "backwave_django.admin.queues",
}


def module(name: str, source: str) -> Any:
    path = name.replace(".", "/") + ".py"
    return layout.Module(name, path, textwrap.dedent(source))


def problems(name: str, source: str) -> list[str]:
    checked = module(name, source)
    imports = layout.module_imports(checked, MODULES)
    found = [
        *layout.private_import_problems(checked, imports),
        *layout.dependency_problems(checked, imports),
        *layout.connection_internals(checked),
        *layout.clock_problems(checked),
        *layout.size_problems(checked),
    ]
    return [str(problem) for problem in found]


# --- Private modules ----------------------------------------------------------------------------


def test_a_private_module_of_another_package_is_named_with_its_line() -> None:
    found = problems("backwave_django.metrics.counts", "import os\nfrom ..store._schema import JOBS\n")
    assert found == [
        "backwave_django/metrics/counts.py:2: imports backwave_django.store._schema, private to "
        "backwave_django.store: use what backwave_django.store exports (or move the shared piece to a "
        "public module)"
    ]


def test_a_sealed_rooms_module_is_private_to_it_but_its_package_is_not() -> None:
    assert problems("backwave_django.operator", "from .store.leases import heartbeat\n") == [
        "backwave_django/operator.py:1: imports backwave_django.store.leases, private to "
        "backwave_django.store: use what backwave_django.store exports (or move the shared piece to a "
        "public module)"
    ]
    assert problems("backwave_django.operator", "from . import store\nfrom .store import heartbeat\n") == []


def test_a_package_may_import_its_own_private_modules() -> None:
    assert problems("backwave_django.store.leases", "from ._tx import atomic_retrying\n") == []


@pytest.mark.parametrize(
    ("target", "owner"),
    [
        ("backwave_django.store._tx", "backwave_django.store"),
        ("backwave_django.store.claims", "backwave_django.store"),
        ("backwave_django.monitor._sql", "backwave_django.monitor"),
        ("backwave_django.worker.maintenance", None),
        ("backwave_django.store", None),
        ("backwave_django.__init__", None),
    ],
)
def test_the_owner_of_a_private_module(target: str, owner: str | None) -> None:
    assert layout.private_owner(target) == owner


# --- Room dependencies --------------------------------------------------------------------------


def test_the_read_side_never_imports_the_worker() -> None:
    found = problems("backwave_django.monitor.dashboard", "from ..worker.maintenance import STALE\n")
    assert found == [
        "backwave_django/monitor/dashboard.py:1: imports backwave_django.worker.maintenance: "
        "backwave_django.monitor may import only conf, core, database, models, registry"
    ]


def test_core_imports_nothing_outside_core_even_for_types() -> None:
    source = """\
        from typing import TYPE_CHECKING
        from .states import JobState
        if TYPE_CHECKING:
            from ..models import JobRecord
    """
    assert problems("backwave_django.core.planner", source) == [
        "backwave_django/core/planner.py:4: imports backwave_django.models: backwave_django.core may "
        "import only nothing outside it"
    ]


def test_the_admin_acts_through_operator_never_the_store() -> None:
    assert problems("backwave_django.admin.queues", "from .. import operator\n") == []
    assert problems("backwave_django.admin.queues", "from .. import store\n") == [
        "backwave_django/admin/queues.py:1: imports backwave_django.store: backwave_django.admin never "
        "imports backwave_django.store"
    ]


# --- Django's connection internals ---------------------------------------------------------------


def test_connection_internals_are_named_outside_the_connection_module() -> None:
    source = """\
        import psycopg
        from django.db import connections, transaction

        def f(using):
            connection = connections[using]
            raw = connection.connection
            flag = connection.in_atomic_block
            cursor = psycopg.Cursor(raw)
            with raw.pipeline():
                pass
            return transaction.get_autocommit(using), connection.vendor
    """
    assert problems("backwave_django.poolers", source) == [
        "backwave_django/poolers.py:6: takes the driver's connection from Django's (.connection): "
        "Django's connection internals belong in backwave_django.store.postgres.connection",
        "backwave_django/poolers.py:7: touches the connection's in_atomic_block: Django's connection "
        "internals belong in backwave_django.store.postgres.connection",
        "backwave_django/poolers.py:8: creates a raw psycopg.Cursor: Django's connection internals "
        "belong in backwave_django.store.postgres.connection",
        "backwave_django/poolers.py:9: opens the driver's pipeline: Django's connection internals "
        "belong in backwave_django.store.postgres.connection",
    ]
    assert problems(layout.CONNECTION_MODULE, source) == []


def test_a_pipeline_that_is_not_a_connections_is_not_an_internal() -> None:
    assert problems("backwave_django.store.leases", "def f(self):\n    self.pipeline.close()\n") == []


# --- The clock -----------------------------------------------------------------------------------


def test_an_instant_read_outside_the_clock_module_is_named() -> None:
    source = """\
        from datetime import datetime
        from django.utils import timezone

        def f():
            return timezone.now(), datetime.now()
    """
    assert problems("backwave_django.admin.queues", source) == [
        "backwave_django/admin/queues.py:5: reads the clock as timezone.now: read the current instant "
        "as clock.now()",
        "backwave_django/admin/queues.py:5: reads the clock as datetime.now: read the current instant "
        "as clock.now()",
    ]
    assert problems("backwave_django.clock", "from django.utils import timezone\nnow = timezone.now\n") == []


def test_a_shell_reads_the_instant_through_clock_now() -> None:
    assert problems("backwave_django.admin.queues", "from .. import clock\nnow = clock.now()\n") == []


def test_the_clockless_rooms_read_no_clock_at_all() -> None:
    assert problems("backwave_django.store.leases", "from .. import clock\nnow = clock.now()\n") == [
        "backwave_django/store/leases.py:1: imports backwave_django.clock: backwave_django.store may "
        "import only conf, core, database, exceptions, models",
        "backwave_django/store/leases.py:2: reads the clock (clock.now): backwave_django.store reads "
        "no clock; take `now` as an argument",
    ]
    assert problems("backwave_django.monitor.dashboard", "import time\nt = time.monotonic()\n") == [
        "backwave_django/monitor/dashboard.py:2: reads the clock (time.monotonic): backwave_django.monitor "
        "reads no clock; take `now` as an argument"
    ]
    assert problems("backwave_django.core.ids", "import time\nt = time.time_ns()\n") == []


def test_time_time_is_for_the_worker_and_the_metrics() -> None:
    source = "import time\nstarted = time.time()\nelapsed = time.monotonic()\n"
    assert problems("backwave_django.worker.execution", source) == []
    assert problems("backwave_django.admin.queues", source) == [
        "backwave_django/admin/queues.py:2: reads the wall clock as time.time(): read the current "
        "instant as clock.now() (time.time() is for worker/ and metrics/ measurements)"
    ]


# --- Size ----------------------------------------------------------------------------------------


def _function(lines: int) -> str:
    return "def long():\n" + "    x = 1\n" * (lines - 1)


def test_a_function_over_the_limit_is_named_and_one_at_the_limit_is_not() -> None:
    limit = layout.MAX_FUNCTION_LINES
    assert problems("backwave_django.operator", _function(limit)) == []
    assert problems("backwave_django.operator", "\n" + _function(limit + 1)) == [
        f"backwave_django/operator.py:2: function long has {limit + 1} lines (at most {limit}): "
        "split it into named steps"
    ]


def test_a_module_over_the_limit_is_named() -> None:
    source = "x = 1\n" * (layout.MAX_LINES + 1)
    assert problems("backwave_django.operator", source) == [
        f"backwave_django/operator.py:1: module has {layout.MAX_LINES + 1} lines (at most "
        f"{layout.MAX_LINES}): split it"
    ]


# --- The whole check ----------------------------------------------------------------------------


def test_a_cycle_is_printed_as_the_chain_that_closes_it() -> None:
    modules = [
        module("backwave_django.store", "from . import leases\n"),
        module("backwave_django.store.leases", "from ..store import _tx\n"),
        module("backwave_django.store._tx", "from . import leases\n"),
    ]
    modules[0].is_package = True
    printed, _ = layout.check(modules)
    assert printed == [
        "import cycle: backwave_django.store._tx -> backwave_django.store.leases -> backwave_django.store._tx"
    ]


def test_the_package_as_it_is_breaks_only_the_rules_named_here() -> None:
    """Every module of the package parses and is checked; what it prints is all ``path:line: …``."""
    printed, edges = layout.check(layout.load_package())
    assert edges > 100
    assert all(line.startswith(("backwave_django/", "import cycle: ")) for line in printed)
