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
    -np|-n|--host|--map-by|--bind-to) shift 2 ;;
    -*) shift ;;
    *) break ;;
  esac
done
[ -n "$FAKE_MPIRUN_CALLS" ] && echo "mpirun" >> "$FAKE_MPIRUN_CALLS"
exec "$@"
"""


def _executable(path: Path, text: str) -> Path:
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


@pytest.fixture
def fake_deputy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An executable `deputy` that runs fake_deputy.py; calls are logged to calls.txt.
    A fake `mpirun` comes first on PATH (launches are logged to mpirun.txt)."""
    wrapper = tmp_path / "bin" / "deputy"
    wrapper.parent.mkdir()
    _executable(wrapper, f'#!/bin/sh\nexec "{sys.executable}" "{HERE / "fake_deputy.py"}" "$@"\n')
    _executable(tmp_path / "bin" / "mpirun", FAKE_MPIRUN)
    monkeypatch.setenv("PATH", f"{wrapper.parent}{os.pathsep}{os.environ.get('PATH', '')}")
    monkeypatch.setenv("FAKE_DEPUTY_CALLS", str(tmp_path / "calls.txt"))
    monkeypatch.setenv("FAKE_MPIRUN_CALLS", str(tmp_path / "mpirun.txt"))
    for var in ("FAKE_DEPUTY_FAIL", "FAKE_DEPUTY_USAGE", "FAKE_DEPUTY_HANG", "FAKE_DEPUTY_NO_OUT",
                "FAKE_DEPUTY_BAD_JSON", "FAKE_DEPUTY_AGENT_FAIL", "DEPUTY_AGENT"):
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
