"""Whether a process the tests started (a private agent) is still running."""

from __future__ import annotations

import os
from pathlib import Path


def alive(pid: int) -> bool:
    """True while `pid` runs; a zombie (exited, not yet reaped) counts as gone."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return not stat.exists() or stat.read_text().split(")")[-1].split()[0] != "Z"
