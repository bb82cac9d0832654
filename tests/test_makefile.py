"""The Makefile's virtualenv stamps: ``make venv`` notices a libmariadb installed after the venv was made.

Each case is a dry run (``make -n``) against a stand-in virtualenv folder whose base stamp is up to
date, with a ``pkg-config`` on ``PATH`` that says whether libmariadb is installed: make only prints
what it would run, so nothing is installed.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")


def dry_run(tmp_path: Path, target: str, *, libmariadb: bool) -> str:
    """``make -n <target>`` with the virtualenv at ``tmp_path/venv`` and a pkg-config stand-in."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    fake = bin_dir / "pkg-config"
    fake.write_text(f"#!/bin/sh\nexit {0 if libmariadb else 1}\n")
    fake.chmod(0o755)
    result = subprocess.run(
        ["make", "-n", "-C", str(REPO), target, f"VENV={tmp_path / 'venv'}"],
        env={**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return result.stdout


@pytest.fixture
def venv(tmp_path: Path) -> Path:
    """A virtualenv folder made before libmariadb was installed: its base stamp is up to date."""
    folder = tmp_path / "venv"
    folder.mkdir()
    (folder / ".stamp").touch()
    (folder / ".mariadb-missing").touch()
    return folder


def test_make_venv_installs_the_driver_once_libmariadb_appears(tmp_path: Path, venv: Path) -> None:
    assert "mysqlclient" not in dry_run(tmp_path, "venv", libmariadb=False)
    commands = dry_run(tmp_path, "venv", libmariadb=True)
    assert f"{venv}/bin/python -m pip install -qq 'mysqlclient>=2.2.1'" in commands
    assert "-e '.[postgres,dev]'" not in commands  # the rest of the virtualenv is left as it is
    (venv / ".mariadb-found").touch()
    assert "mysqlclient" not in dry_run(tmp_path, "venv", libmariadb=True)


def test_make_demo_neither_installs_nor_mentions_the_mariadb_driver(tmp_path: Path) -> None:
    # A first run: the virtualenv is created, and only what the demo needs goes into it.
    for libmariadb in (False, True):
        commands = dry_run(tmp_path, "demo", libmariadb=libmariadb)
        assert "-e '.[postgres,dev]'" in commands
        assert "mysqlclient" not in commands
        assert "MariaDB" not in commands
        assert "scripts/demo.sh" in commands


def test_make_bench_installs_the_peer_queues_once(tmp_path: Path, venv: Path) -> None:
    # The peers' extra goes into the existing virtualenv on the first `make bench`, and not again.
    commands = dry_run(tmp_path, "bench", libmariadb=False)
    assert f"{venv}/bin/python -m pip install -qq -e '.[postgres,dev,bench]'" in commands
    assert f"{venv}/bin/python -m benchmarks.run" in commands
    (venv / ".bench-stamp").touch()
    commands = dry_run(tmp_path, "bench", libmariadb=False)
    assert "bench]'" not in commands
    assert f"{venv}/bin/python -m benchmarks.run" in commands
