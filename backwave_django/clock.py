"""The one real clock.

The store never reads a clock (every operation takes ``now``). Application-side code (enqueues in
``client``, actions in ``operator``) and the worker read the time here, as ``clock.now()``.
``backwave_django.testing`` swaps :data:`now` for its virtual clock while a harness is active, so
that ``.enqueue()`` in the code under test stamps jobs with virtual time. Nothing else assigns it.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from django.utils import timezone

#: Returns the current instant (timezone-aware, UTC).
now: Callable[[], datetime] = timezone.now
