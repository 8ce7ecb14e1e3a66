"""Finding the `deputy` executable a sweep runs.

An explicit --deputy wins, then DEPUTY_BIN (what scripts/test.sh and CI set
to the binary they just built), then PATH (an installed deputy). Resolving
once, up front, turns "binary missing" into one clear error instead of one
failure per point.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Mapping


class DeputyNotFound(RuntimeError):
    pass


def find_deputy(explicit: str | None = None, env: Mapping[str, str] | None = None) -> Path:
    environ = os.environ if env is None else env
    if explicit:
        return _check(Path(explicit), "--deputy")
    if environ.get("DEPUTY_BIN"):
        return _check(Path(environ["DEPUTY_BIN"]), "DEPUTY_BIN")
    found = shutil.which("deputy", path=environ.get("PATH"))
    if found:
        return Path(found)
    raise DeputyNotFound("no deputy binary: pass --deputy PATH, set DEPUTY_BIN, or put deputy "
                         "on PATH (built at build/tools/deputy)")


def _check(path: Path, source: str) -> Path:
    if not path.is_file():
        raise DeputyNotFound(f"{source} {path}: no such file")
    if not os.access(path, os.X_OK):
        raise DeputyNotFound(f"{source} {path}: not executable")
    return path.resolve()
