import sys

from backwave_django.worker.supervisor import child_command


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
