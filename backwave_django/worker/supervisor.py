"""``--processes N``: run N worker processes and restart any that crashes.

On Linux each child is forked from the supervisor after Django has started, so it begins work at
once instead of importing and configuring Django again, and shares the loaded code copy-on-write.
Elsewhere (no safe ``fork``) each child is this same command without ``--processes``. The first
SIGTERM/SIGINT is passed on to every child (each drains for its ``--shutdown-timeout``); a second
one kills them and exits 1. A child that gave up on the database (``faults.EXIT_GAVE_UP``) is not
restarted, and the supervisor then exits with that status once every child has exited. Between
events the supervisor sleeps until a child exits or a signal arrives (:class:`ChildExits`): it
does not poll.
"""

from __future__ import annotations

import logging
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from types import FrameType
from typing import Protocol

from .faults import EXIT_GAVE_UP

logger = logging.getLogger("backwave_django.worker")

RESTART_BACKOFF_SECONDS = (1.0, 2.0, 5.0, 10.0)
#: A child that ran at least this long before crashing restarts without backoff.
HEALTHY_RUN_SECONDS = 60.0
#: The longest the supervisor sleeps between two looks at its children when their exits wake it.
LONGEST_SLEEP_SECONDS = 5.0
#: How often it looks where nothing can wake it (no ``SIGCHLD``, or not on the main thread).
POLL_SECONDS = 0.1


class Child(Protocol):
    """A running worker process, as the supervisor sees it (``subprocess.Popen`` is one)."""

    pid: int

    def poll(self) -> int | None: ...

    def send_signal(self, sig: int) -> None: ...


class ForkedChild:
    """A worker process forked from the supervisor; ``run`` is the worker's whole life in it.

    The child never returns into the supervisor's code: it exits with ``run``'s code (1 if it
    raised). Its exit code reads like ``Popen.returncode`` (minus the signal that killed it).
    """

    def __init__(self, run: Callable[[], int], slot: int) -> None:
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:  # pragma: no cover (runs in the child; the end-to-end tests exercise it)
            os._exit(_child_main(run, slot))
        self.pid = pid
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.returncode is None:
            os.kill(self.pid, sig)


def _child_main(run: Callable[[], int], slot: int) -> int:  # pragma: no cover (in the child)
    code = 1
    try:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        ChildExits.forget_in_child()
        os.environ["BACKWAVE_WORKER_SLOT"] = str(slot)
        code = run()
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 0 if exc.code is None else 1
    except BaseException:
        logger.exception("Worker process %d failed", slot)
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        logging.shutdown()
    return code


class ChildExits:
    """The supervisor's sleep, which a child's exit or any signal ends at once.

    On POSIX, ``SIGCHLD`` gets a handler that does nothing, and Python's wakeup fd (to which the
    interpreter writes a byte for every signal that has a Python handler: ``SIGCHLD``, and the
    supervisor's ``SIGTERM`` and ``SIGINT``) is a pipe that :meth:`wait` selects on. A child that
    exits while the supervisor is busy leaves its byte in the pipe, so no exit is missed between
    two looks. Where that cannot be set up (no ``SIGCHLD``, or not on the main thread), :meth:`wait`
    sleeps :data:`POLL_SECONDS` at most. Use it as a context manager; leaving restores the handler
    and the wakeup fd it replaced.
    """

    #: The pipe of the one in use in this process, which a forked child closes.
    _open: tuple[int, int] | None = None

    def __init__(self) -> None:
        self._pipe: tuple[int, int] | None = None
        self._previous_fd = -1
        self._previous_handler: signal.Handlers | Callable[[int, FrameType | None], object] | int | None = (
            None
        )

    def __enter__(self) -> ChildExits:
        sigchld = getattr(signal, "SIGCHLD", None)
        if sigchld is None:
            return self
        read, write = os.pipe()
        os.set_blocking(read, False)
        os.set_blocking(write, False)
        try:
            self._previous_fd = signal.set_wakeup_fd(write, warn_on_full_buffer=False)
        except ValueError:  # not the main thread
            os.close(read)
            os.close(write)
            return self
        self._previous_handler = signal.signal(sigchld, _ignore_signal)
        self._pipe = ChildExits._open = (read, write)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._pipe is None:
            return
        previous = self._previous_handler
        signal.signal(signal.SIGCHLD, signal.SIG_DFL if previous is None else previous)
        signal.set_wakeup_fd(self._previous_fd)
        for fd in self._pipe:
            os.close(fd)
        self._pipe = ChildExits._open = None

    def wait(self, timeout: float) -> None:
        """Sleep up to ``timeout`` seconds, less if a child exits or a signal arrives."""
        if self._pipe is None:
            time.sleep(max(min(timeout, POLL_SECONDS), 0.0))
            return
        read = self._pipe[0]
        ready, _, _ = select.select([read], [], [], max(min(timeout, LONGEST_SLEEP_SECONDS), 0.0))
        if ready:
            try:
                while os.read(read, 512):
                    pass
            except BlockingIOError:
                pass

    @classmethod
    def forget_in_child(cls) -> None:
        """In a forked child: drop the supervisor's handler, wakeup fd and pipe."""
        if cls._open is None:
            return
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        signal.set_wakeup_fd(-1)
        for fd in cls._open:
            os.close(fd)
        cls._open = None


def _ignore_signal(signum: int, frame: FrameType | None) -> None:
    """The ``SIGCHLD`` handler: its only use is the byte the interpreter writes to the wakeup fd."""


def can_fork() -> bool:
    """Fork children only where it is safe and usual: Linux (macOS forbids it for many libraries)."""
    return sys.platform.startswith("linux") and hasattr(os, "fork")


def spawn_command(command: Sequence[str]) -> Callable[[int], Child]:
    """Children that run ``command`` (this command without ``--processes``) as new processes."""

    def start(slot: int) -> Child:
        return subprocess.Popen(list(command), env={**os.environ, "BACKWAVE_WORKER_SLOT": str(slot)})

    return start


def fork_worker(run: Callable[[], int]) -> Callable[[int], Child]:
    """Children forked from this process, each running ``run``."""
    return lambda slot: ForkedChild(run, slot)


class Supervisor:
    """Keeps ``processes`` children running.

    A child that dies is restarted (after a backoff while it keeps dying young). A child that
    exits 0 is restarted only when ``restart_clean_exits`` (``--max-jobs`` process recycling);
    under ``--burst`` a clean exit means its work is done, and the supervisor exits 0 once every
    child has.
    """

    def __init__(
        self, start_child: Callable[[int], Child], processes: int, *, restart_clean_exits: bool
    ) -> None:
        self.start_child = start_child
        self.processes = processes
        self.restart_clean_exits = restart_clean_exits
        self.children: dict[int, tuple[Child, float]] = {}
        self.restart_at: dict[int, float] = {}
        self.crashes: dict[int, int] = {}
        self.stopping = False
        self.signals = 0
        self.gave_up = False

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        self.signals += 1
        self.stopping = True
        self.restart_at.clear()
        for child, _ in self.children.values():
            if child.poll() is None:
                child.send_signal(signal.SIGKILL if self.signals > 1 else signum)

    def _spawn(self, slot: int) -> None:
        child = self.start_child(slot)
        self.children[slot] = (child, time.monotonic())
        logger.info("Supervisor started worker process %d (pid %d)", slot, child.pid)

    def _reap(self, slot: int, child: Child, started: float, code: int) -> None:
        del self.children[slot]
        if self.stopping:
            return
        if code == 0 and not self.restart_clean_exits:
            logger.info("Worker process %d (pid %d) finished", slot, child.pid)
            return
        if code == EXIT_GAVE_UP:  # the database kept failing: a fresh process would meet the same
            self.gave_up = True
            logger.error("Worker process %d (pid %d) gave up on the database; not restarted", slot, child.pid)
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
        with ChildExits() as exits:
            for slot in range(self.processes):
                self._spawn(slot)
            while True:
                for slot, (child, started) in list(self.children.items()):
                    code = child.poll()
                    if code is not None:
                        self._reap(slot, child, started, code)
                now = time.monotonic()
                for slot, at in list(self.restart_at.items()):
                    if at <= now and not self.stopping:
                        del self.restart_at[slot]
                        self._spawn(slot)
                if not (self.children or self.restart_at):
                    break
                exits.wait(min((at - now for at in self.restart_at.values()), default=LONGEST_SLEEP_SECONDS))
        return 1 if self.signals > 1 else EXIT_GAVE_UP if self.gave_up else 0


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
