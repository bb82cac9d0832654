"""``--processes N``: run N worker processes and restart any that crashes.

Each child is this same command without ``--processes``. The first SIGTERM/SIGINT is passed on
to every child (each drains for its ``--shutdown-timeout``); a second one kills them and exits 1.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from types import FrameType

logger = logging.getLogger("backwave_django.worker")

RESTART_BACKOFF_SECONDS = (1.0, 2.0, 5.0, 10.0)
#: A child that ran at least this long before crashing restarts without backoff.
HEALTHY_RUN_SECONDS = 60.0


class Supervisor:
    """Keeps ``processes`` children running.

    A child that dies is restarted (after a backoff while it keeps dying young). A child that
    exits 0 is restarted only when ``restart_clean_exits`` (``--max-jobs`` process recycling);
    under ``--burst`` a clean exit means its work is done, and the supervisor exits 0 once every
    child has.
    """

    def __init__(self, command: Sequence[str], processes: int, *, restart_clean_exits: bool) -> None:
        self.command = list(command)
        self.processes = processes
        self.restart_clean_exits = restart_clean_exits
        self.children: dict[int, tuple[subprocess.Popen[bytes], float]] = {}
        self.restart_at: dict[int, float] = {}
        self.crashes: dict[int, int] = {}
        self.stopping = False
        self.signals = 0

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        self.signals += 1
        self.stopping = True
        self.restart_at.clear()
        for child, _ in self.children.values():
            if child.poll() is None:
                child.send_signal(signal.SIGKILL if self.signals > 1 else signum)

    def _spawn(self, slot: int) -> None:
        child = subprocess.Popen(self.command, env={**os.environ, "BACKWAVE_WORKER_SLOT": str(slot)})
        self.children[slot] = (child, time.monotonic())
        logger.info("Supervisor started worker process %d (pid %d)", slot, child.pid)

    def _reap(self, slot: int, child: subprocess.Popen[bytes], started: float, code: int) -> None:
        del self.children[slot]
        if self.stopping:
            return
        if code == 0 and not self.restart_clean_exits:
            logger.info("Worker process %d (pid %d) finished", slot, child.pid)
            return
        ran = time.monotonic() - started
        crashes = 0 if code == 0 or ran >= HEALTHY_RUN_SECONDS else self.crashes.get(slot, 0) + 1
        self.crashes[slot] = crashes
        if code == 0:
            logger.info("Worker process %d (pid %d) exited; starting a fresh one", slot, child.pid)
        else:
            logger.warning(
                "Worker process %d (pid %d) died with exit code %s; restarting it", slot, child.pid, code
            )
        delay = RESTART_BACKOFF_SECONDS[min(crashes, len(RESTART_BACKOFF_SECONDS)) - 1] if crashes else 0.0
        self.restart_at[slot] = time.monotonic() + delay

    def run(self) -> int:
        signal.signal(signal.SIGTERM, self._on_signal)
        signal.signal(signal.SIGINT, self._on_signal)
        logger.info("Supervisor (pid %d) running %d worker processes", os.getpid(), self.processes)
        for slot in range(self.processes):
            self._spawn(slot)
        while self.children or self.restart_at:
            time.sleep(0.1)
            for slot, (child, started) in list(self.children.items()):
                code = child.poll()
                if code is not None:
                    self._reap(slot, child, started, code)
            now = time.monotonic()
            for slot, at in list(self.restart_at.items()):
                if at <= now and not self.stopping:
                    del self.restart_at[slot]
                    self._spawn(slot)
        return 1 if self.signals > 1 else 0


def child_command(orig_argv: Sequence[str]) -> list[str]:
    """This process's command line (``sys.orig_argv``: it keeps ``-m django`` and interpreter
    flags) with ``--processes`` removed: what each child runs."""
    args: list[str] = []
    skip = False
    for arg in orig_argv[1:]:
        if skip:
            skip = False
            continue
        if arg == "--processes":
            skip = True
            continue
        if arg.startswith("--processes="):
            continue
        args.append(arg)
    return [sys.executable, *args]
