"""A private `deputy agent` for the duration of a sweep.

Benchmarks of offloaded work (`deputy bench coll`) need an agent. A sweep
whose spec says `"agent": {...}` starts its own, on a socket in a fresh
0700 directory, hands it to every point as DEPUTY_AGENT, and stops it when
the sweep ends, fails or is interrupted: the results then depend on the
spec alone (its agent config, e.g. a larger max_pool_bytes) and not on
whatever agent the user happens to run, and nothing is left running.

Where the agent runs is part of an experiment (`--agent-cores last`: its
threads on the last core, the ranks on the others), so a spec can add
`deputy agent` words, and the sweep asks the started agent which CPUs it
left to the ranks (`deputy info --format json`: "placement"), so a launcher
can put them there on any machine instead of a CPU list written for one.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence


class AgentError(RuntimeError):
    """The agent did not start; says why and where its log is."""


def agent_command(deputy: str, directory: Path, config: Mapping[str, Any] | None,
                  log: Path, args: Sequence[str] = ()) -> list[str]:
    """`deputy agent --daemon` on <directory>/agent.sock; the spec's `args` come last."""
    argv = [deputy, "agent", "--daemon", "--socket", str(directory / "agent.sock"),
            "--pidfile", str(directory / "agent.pid"), "--log-file", str(log)]
    if config:
        argv += ["--config", str(directory / "agent.json")]
    return argv + list(args)


@contextmanager
def private_agent(deputy: str, config: Mapping[str, Any] | None, log: Path,
                  env: Mapping[str, str] | None = None, timeout_s: float = 120.0,
                  args: Sequence[str] = ()) -> Iterator[Path]:
    """Starts `deputy agent --daemon` on a private socket; yields the socket; stops it."""
    directory = Path(tempfile.mkdtemp(prefix="deputy-sweep-agent-"))  # mode 0700
    try:
        if config:
            (directory / "agent.json").write_text(json.dumps(config), encoding="utf-8")
        argv = agent_command(deputy, directory, config, log, args)
        try:
            done = subprocess.run(argv, capture_output=True, text=True, errors="replace",
                                  stdin=subprocess.DEVNULL, timeout=timeout_s,
                                  env=dict(env) if env is not None else None)
        except subprocess.TimeoutExpired as e:
            raise AgentError(f"`deputy agent --daemon` did not return within {timeout_s:g} s "
                             f"(log: {log})") from e
        except OSError as e:
            raise AgentError(f"cannot start {deputy}: {e.strerror}") from e
        pid = _read_pid(directory / "agent.pid")
        if done.returncode != 0 or pid is None:
            why = (done.stderr.strip() or done.stdout.strip()).splitlines()
            raise AgentError(f"the agent did not start (exit {done.returncode}"
                             + (f": {why[-1]}" if why else "") + f"; log: {log})")
        try:
            yield directory / "agent.sock"
        finally:
            stop(pid)
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def agent_facts(deputy: str, socket: Path, env: Mapping[str, str] | None = None,
                timeout_s: float = 30.0) -> dict[str, str]:
    """{"rank_cpus": "0", "agent_cpus": "1", "layout": "last"}: what `deputy info
    --format json` says of the agent's placement ("" when nothing is pinned)."""
    argv = [deputy, "info", "--socket", str(socket), "--format", "json"]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, errors="replace",
                              stdin=subprocess.DEVNULL, timeout=timeout_s,
                              env=dict(env) if env is not None else None)
    except subprocess.TimeoutExpired as e:
        raise AgentError(f"`deputy info` did not answer within {timeout_s:g} s") from e
    except OSError as e:
        raise AgentError(f"cannot run {deputy} info: {e.strerror}") from e
    if done.returncode != 0:
        why = (done.stdout.strip() or done.stderr.strip()).splitlines()
        raise AgentError(f"`deputy info --format json` failed (exit {done.returncode}"
                         + (f": {why[-1]}" if why else "") + ")")
    try:
        placement = json.loads(done.stdout)["placement"]
        return {key: str(placement[key]) for key in ("layout", "agent_cpus", "rank_cpus")}
    except (ValueError, KeyError, TypeError) as e:
        raise AgentError("`deputy info --format json` gave no placement.layout, "
                         f"placement.agent_cpus and placement.rank_cpus ({e!r}): "
                         "an agent older than --agent-cores?") from e


def _read_pid(path: Path) -> int | None:
    try:
        return int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie nobody has reaped yet is gone for our purposes
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


def stop(pid: int, grace_s: float = 5.0) -> None:
    """SIGTERM (the agent cleans up its socket and shared memory), SIGKILL after grace_s."""
    for sig, wait in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 2.0)):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            if not _alive(pid):
                return
            time.sleep(0.05)
