"""Shared fixtures: the checked-in sample results and the fake benchmark binary."""

from __future__ import annotations

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


@pytest.fixture
def fake_deputy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An executable `deputy` that runs fake_deputy.py; calls are logged to calls.txt."""
    wrapper = tmp_path / "bin" / "deputy"
    wrapper.parent.mkdir()
    wrapper.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{HERE / "fake_deputy.py"}" "$@"\n')
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    monkeypatch.setenv("FAKE_DEPUTY_CALLS", str(tmp_path / "calls.txt"))
    for var in ("FAKE_DEPUTY_FAIL", "FAKE_DEPUTY_USAGE", "FAKE_DEPUTY_HANG", "FAKE_DEPUTY_NO_OUT",
                "FAKE_DEPUTY_BAD_JSON"):
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
