"""The one real clock.

``core/``, ``store/`` and ``monitor/`` never read a clock: every operation takes ``now``. Every
other room (``client``, ``operator``, ``workflows``, ``context``, ``tasks``, ``worker/``,
``admin/``, ``cli/``, ``metrics/``) reads the current instant here, as ``clock.now()``, and never
through ``timezone.now()``, ``datetime.now()`` or their kin (``scripts/check_layout.py`` enforces
both halves). ``backwave_django.testing`` swaps :data:`now` for its virtual clock while a harness
is active, so that ``.enqueue()`` in the code under test stamps jobs with virtual time. Nothing
else assigns it. Elapsed time (``time.monotonic()``) is not an instant and is not read here.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from django.utils import timezone

#: Returns the current instant (timezone-aware, UTC).
now: Callable[[], datetime] = timezone.now
