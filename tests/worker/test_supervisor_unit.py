import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

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
