"""An agent started on demand: a process that finds no agent on its node
starts one (`deputy agent --daemon --exit-when-unused MS`), shared by every
process of the node that attaches to the same address, and stopping by
itself once none has been attached for MS milliseconds. Several processes
may find none at once: each starts one, the agent refuses to listen where
another already does, and all of them attach to the one that won.

Which `deputy`: $DEPUTY_BIN when set, else the build tree's next to this
source tree (build/tools/deputy), else the one on $PATH."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Optional

# How long an agent started on demand outlives its last client: long
# enough for a training script's next process group (or its next run) to
# find it, short enough that nothing stays behind for long.
EXIT_WHEN_UNUSED_MS = 5000
# How long a process waits for an agent it (or a neighbour) started.
START_TIMEOUT_S = 20.0


def deputy_binary() -> str:
    if os.environ.get("DEPUTY_BIN"):
        return os.environ["DEPUTY_BIN"]
    built = Path(__file__).resolve().parent.parent.parent / "build" / "tools" / "deputy"
    if built.exists():
        return str(built)
    found = shutil.which("deputy")
    if not found:
        raise FileNotFoundError("deputy: no agent answers and no `deputy` binary to start one "
                                "(set DEPUTY_BIN, or start `deputy agent` yourself)")
    return found


def start_agent(address: Optional[str]) -> None:
    """Starts the node's agent at `address` (None: the default address,
    $DEPUTY_AGENT or the runtime directory's, as dp_init finds it). Returns
    once it listens or another process's agent does; raises with the
    agent's words otherwise."""
    command = [deputy_binary(), "agent", "--daemon",
               "--exit-when-unused", str(EXIT_WHEN_UNUSED_MS)]
    if address:
        command += ["--socket", address]
    r = subprocess.run(command, capture_output=True, text=True, timeout=START_TIMEOUT_S,
                       stdin=subprocess.DEVNULL)
    # A refusal because another agent listens there is the race lost: fine.
    if r.returncode != 0 and "another agent" not in r.stderr:
        raise RuntimeError(f"deputy: starting an agent ({' '.join(command)}) failed: "
                           f"{r.stderr.strip() or r.stdout.strip()}")


def wait_until(attach, timeout_s: float = START_TIMEOUT_S):
    """attach() until it stops raising DP_ERR_NO_AGENT (the agent a
    neighbour started may take a moment to listen)."""
    from deputy.errors import DeputyError
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return attach()
        except DeputyError as e:
            if e.name != "DP_ERR_NO_AGENT" or time.monotonic() > deadline:
                raise
            time.sleep(0.05)
