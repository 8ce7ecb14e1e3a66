"""Which deputy a sweep runs: --deputy, then DEPUTY_BIN, then PATH."""

from __future__ import annotations

from pathlib import Path

import pytest

from deputy_tools.binary import DeputyNotFound, find_deputy


def executable(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n")
    path.chmod(0o755)
    return path


def test_precedence(tmp_path: Path) -> None:
    explicit = executable(tmp_path / "a" / "deputy")
    from_env = executable(tmp_path / "b" / "deputy")
    on_path = executable(tmp_path / "c" / "deputy")
    env = {"DEPUTY_BIN": str(from_env), "PATH": str(on_path.parent)}
    assert find_deputy(str(explicit), env) == explicit.resolve()
    assert find_deputy(None, env) == from_env.resolve()
    assert find_deputy(None, {"PATH": str(on_path.parent)}) == on_path


def test_errors_say_where_the_path_came_from(tmp_path: Path) -> None:
    with pytest.raises(DeputyNotFound, match="--deputy .*: no such file"):
        find_deputy(str(tmp_path / "none"), {})
    plain = tmp_path / "plain"
    plain.write_text("")
    plain.chmod(0o644)
    with pytest.raises(DeputyNotFound, match="DEPUTY_BIN .*: not executable"):
        find_deputy(None, {"DEPUTY_BIN": str(plain)})
    with pytest.raises(DeputyNotFound, match="pass --deputy PATH, set DEPUTY_BIN"):
        find_deputy(None, {"PATH": str(tmp_path)})
