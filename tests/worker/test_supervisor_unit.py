import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from backwave_django.worker import supervisor
from backwave_django.worker.supervisor import Supervisor, child_command, spawn_command

ROOT = Path(__file__).resolve().parents[2]


def test_children_run_the_same_command_without_processes():
    argv = [
        "python3",
        "-m",
        "django",
        "backwave_worker",
        "--processes",
        "2",
        "--queues",
        "a",
        "--processes=3",
    ]
    assert child_command(argv) == [sys.executable, "-m", "django", "backwave_worker", "--queues", "a"]


def _run_python(code: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in a fresh interpreter (forking the test process itself would copy its threads)."""
    setup = "import django\ndjango.setup()\n"
    return subprocess.run(
        [sys.executable, "-c", setup + textwrap.dedent(code)],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT), "DJANGO_SETTINGS_MODULE": "tests.settings"},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_spawned_children_run_the_command_with_their_slot(tmp_path: Path) -> None:
    script = "import os, pathlib; pathlib.Path(f\"slot-{os.environ['BACKWAVE_WORKER_SLOT']}\").touch()"
    start = spawn_command([sys.executable, "-c", script])
    old = os.getcwd()
    os.chdir(tmp_path)
    try:
        assert Supervisor(start, 2, restart_clean_exits=False).run() == 0
    finally:
        os.chdir(old)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["slot-0", "slot-1"]


def test_a_child_that_gave_up_on_the_database_is_not_restarted_and_the_supervisor_exits_4(
    tmp_path: Path,
) -> None:
    """Not even by a long-running supervisor, which restarts children that exit: a fresh child
    would meet the same database."""
    script = (
        "import os, pathlib, sys; slot = os.environ['BACKWAVE_WORKER_SLOT']\n"
        "pathlib.Path(f'ran-{slot}-{os.getpid()}').touch(); sys.exit(4)"
    )
    old = os.getcwd()
    os.chdir(tmp_path)
    try:
        assert (
            Supervisor(spawn_command([sys.executable, "-c", script]), 2, restart_clean_exits=True).run() == 4
        )
    finally:
        os.chdir(old)
    assert sorted(p.name.split("-")[1] for p in tmp_path.iterdir()) == ["0", "1"]


def test_forked_children_run_in_their_own_process_and_one_that_raises_is_restarted(tmp_path: Path) -> None:
    result = _run_python(
        """
        import os, pathlib
        from backwave_django.worker import supervisor

        supervisor.RESTART_BACKOFF_SECONDS = (0.1,)

        def run():
            slot = os.environ["BACKWAVE_WORKER_SLOT"]
            marker = pathlib.Path(f"raised-{slot}")
            if slot == "1" and not marker.exists():
                marker.touch()
                raise RuntimeError("boom")
            pathlib.Path(f"ran-{slot}-{os.getpid()}").touch()
            return 0

        code = supervisor.Supervisor(supervisor.fork_worker(run), 2, restart_clean_exits=False).run()
        print("supervisor", os.getpid(), "exit", code)
        """,
        tmp_path,
    )
    assert result.returncode == 0, result.stderr
    ran = sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("ran-"))
    assert [name.split("-")[1] for name in ran] == ["0", "1"]
    supervisor_pid = result.stdout.split()[1]
    assert all(name.split("-")[2] != supervisor_pid for name in ran)  # each ran in a child
    assert "RuntimeError: boom" in result.stderr  # logged by the child that raised
    assert "exit 0" in result.stdout


def test_a_forked_child_reports_its_exit_code_and_the_signal_that_killed_it(tmp_path: Path) -> None:
    result = _run_python(
        """
        import os, signal, time
        from backwave_django.worker.supervisor import ForkedChild

        done = ForkedChild(lambda: 3, 0)
        while done.poll() is None:
            time.sleep(0.01)
        stuck = ForkedChild(lambda: time.sleep(60) or 0, 1)
        stuck.send_signal(signal.SIGKILL)
        while stuck.poll() is None:
            time.sleep(0.01)
        print(done.returncode, stuck.returncode)
        """,
        tmp_path,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["3", str(-signal.SIGKILL)]


def test_the_supervisors_sleep_ends_when_a_child_exits(monkeypatch: pytest.MonkeyPatch) -> None:
    """A child's exit ends the wait at once, also one that exited before the wait began (its
    byte waits in the pipe); without that the wait would last the full 60 s."""
    monkeypatch.setattr(supervisor, "LONGEST_SLEEP_SECONDS", 60.0)
    with supervisor.ChildExits() as exits:
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(0.2)"])
        started = time.monotonic()
        exits.wait(60.0)
        assert child.wait(timeout=10) == 0
        assert time.monotonic() - started < 30.0

        gone = subprocess.Popen([sys.executable, "-c", "pass"])
        gone.wait(timeout=10)
        started = time.monotonic()
        exits.wait(60.0)  # woken by the byte the exit left
        assert time.monotonic() - started < 30.0


def test_the_supervisors_sleep_is_woken_by_a_signal_and_restores_what_it_replaced(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(supervisor, "LONGEST_SLEEP_SECONDS", 60.0)
    received: list[int] = []
    previous = signal.signal(signal.SIGUSR1, lambda signum, frame: received.append(signum))
    try:
        before_chld = signal.getsignal(signal.SIGCHLD)
        with supervisor.ChildExits() as exits:
            assert signal.getsignal(signal.SIGCHLD) is not before_chld
            threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGUSR1)).start()
            started = time.monotonic()
            exits.wait(60.0)
            assert time.monotonic() - started < 30.0
        assert received == [signal.SIGUSR1]
        assert signal.getsignal(signal.SIGCHLD) is before_chld
        assert signal.set_wakeup_fd(-1) == -1  # the wakeup fd it set is gone again
    finally:
        signal.signal(signal.SIGUSR1, previous)


def test_off_the_main_thread_the_supervisor_polls_instead(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(supervisor, "POLL_SECONDS", 0.01)
    monkeypatch.setattr(supervisor, "LONGEST_SLEEP_SECONDS", 60.0)
    took: list[float] = []

    def sleep_once() -> None:
        with supervisor.ChildExits() as exits:
            started = time.monotonic()
            exits.wait(60.0)
            took.append(time.monotonic() - started)

    thread = threading.Thread(target=sleep_once)
    thread.start()
    thread.join(timeout=30)
    assert len(took) == 1
    assert took[0] < 30.0  # a sleep of POLL_SECONDS, not a wait for an exit that never comes
    assert supervisor.ChildExits._open is None


def test_a_forked_child_leaves_the_supervisors_sleep_behind(tmp_path: Path) -> None:
    """Its SIGCHLD handler is the default again and no wakeup fd is set, so the child's own
    subprocesses do not write into the supervisor's pipe."""
    result = _run_python(
        """
        import signal
        from backwave_django.worker import supervisor

        def run():
            default = signal.getsignal(signal.SIGCHLD) == signal.SIG_DFL
            no_fd = signal.set_wakeup_fd(-1) == -1
            return 0 if default and no_fd and supervisor.ChildExits._open is None else 7

        code = supervisor.Supervisor(supervisor.fork_worker(run), 2, restart_clean_exits=False).run()
        print("exit", code, supervisor.ChildExits._open, signal.getsignal(signal.SIGCHLD) == signal.SIG_DFL)
        """,
        tmp_path,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["exit", "0", "None", "True"]
