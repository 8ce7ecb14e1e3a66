"""Shared fixtures: the checked-in sample results and the fake benchmark binary."""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path
from typing import Callable

import pytest

HERE = Path(__file__).resolve().parent


@pytest.fixture
def data() -> Path:
    """Real `deputy bench ... --out` documents, checked in (see data/README.md)."""
    return HERE / "data"


# Runs the command after `mpirun`'s own options once: specs launch `deputy bench coll` under
# mpirun, and the fake benchmark stands for all ranks (rank 0 writes --out).
FAKE_MPIRUN = """#!/bin/sh
while [ $# -gt 0 ]; do
  case "$1" in
    -np|-n|--host|--map-by|--bind-to|--cpu-set) shift 2 ;;
    --mca) shift 3 ;;
    -*) shift ;;
    *) break ;;
  esac
done
[ -n "$FAKE_MPIRUN_CALLS" ] && echo "mpirun" >> "$FAKE_MPIRUN_CALLS"
exec "$@"
"""


# `taskset -c LIST command...`: logs LIST to $FAKE_TASKSET_CALLS and runs the command
# unpinned (the CPUs a test names need not exist where the tests run).
FAKE_TASKSET = """#!/bin/sh
[ "$1" = "-c" ] || { echo "fake taskset: expected -c LIST" >&2; exit 2; }
[ -n "$FAKE_TASKSET_CALLS" ] && echo "taskset:$2" >> "$FAKE_TASKSET_CALLS"
shift 2
exec "$@"
"""


def _executable(path: Path, text: str) -> Path:
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


@pytest.fixture
def fake_deputy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An executable `deputy` that runs fake_deputy.py; calls are logged to calls.txt.
    A fake `mpirun` comes first on PATH (launches are logged to mpirun.txt), and a fake
    `taskset` (its CPU lists logged to taskset.txt)."""
    wrapper = tmp_path / "bin" / "deputy"
    wrapper.parent.mkdir()
    _executable(wrapper, f'#!/bin/sh\nexec "{sys.executable}" "{HERE / "fake_deputy.py"}" "$@"\n')
    _executable(tmp_path / "bin" / "mpirun", FAKE_MPIRUN)
    _executable(tmp_path / "bin" / "taskset", FAKE_TASKSET)
    monkeypatch.setenv("PATH", f"{wrapper.parent}{os.pathsep}{os.environ.get('PATH', '')}")
    monkeypatch.setenv("FAKE_DEPUTY_CALLS", str(tmp_path / "calls.txt"))
    monkeypatch.setenv("FAKE_MPIRUN_CALLS", str(tmp_path / "mpirun.txt"))
    monkeypatch.setenv("FAKE_TASKSET_CALLS", str(tmp_path / "taskset.txt"))
    for var in ("FAKE_DEPUTY_FAIL", "FAKE_DEPUTY_USAGE", "FAKE_DEPUTY_HANG", "FAKE_DEPUTY_NO_OUT",
                "FAKE_DEPUTY_BAD_JSON", "FAKE_DEPUTY_AGENT_FAIL", "FAKE_DEPUTY_INFO_UNPINNED",
                "DEPUTY_AGENT"):
        monkeypatch.delenv(var, raising=False)
    return wrapper


@pytest.fixture
def calls(tmp_path: Path) -> Callable[[], list[str]]:
    """What the fake benchmark has been run for so far (size or rails), in order."""
    def read() -> list[str]:
        log = tmp_path / "calls.txt"
        return log.read_text().split() if log.exists() else []
    return read


@pytest.fixture(autouse=True)
def _hermetic(monkeypatch: pytest.MonkeyPatch) -> None:
    """No live progress bar, and no real deputy from the caller's DEPUTY_BIN: these
    tests run the fake; tests/bench/ runs the real one."""
    monkeypatch.setattr(sys.stderr, "isatty", lambda: False, raising=False)
    monkeypatch.delenv("DEPUTY_BIN", raising=False)
