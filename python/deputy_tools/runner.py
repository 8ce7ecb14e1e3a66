"""Running one sweep point as a subprocess, atomically.

The benchmark writes its JSON to `<name>.json.partial`; only a zero exit
and a parsable JSON object promote it to `<name>.json`. So an interrupted,
crashed or timed-out run never looks finished to the next (resuming)
sweep, and a failed run's output is kept aside as `<name>.json.failed`
for inspection. Each point also leaves `<name>.log` with its command,
exit status, stdout and stderr, because the table a benchmark prints is
often what explains a failure. The sweep's "sweep" object (annotation) is
added to the document before the promotion, so a result never exists without it.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

PARTIAL = ".partial"
FAILED = ".failed"


@dataclass(frozen=True)
class Outcome:
    ok: bool
    seconds: float
    returncode: int | None  # None: timed out or could not start
    message: str            # why it failed ("" when ok)
    log: Path


def partial_path(result: Path) -> Path:
    """Where the benchmark writes (its --out) until the run is known to be good."""
    return result.with_name(result.name + PARTIAL)


def run_point(argv: Sequence[str], result: Path, timeout_s: float,
              env: Mapping[str, str] | None = None,
              annotation: Mapping[str, Any] | None = None) -> Outcome:
    """Runs argv (which must write its JSON to partial_path(result)) and files the outcome;
    `env`: the whole environment (None: this process's); `annotation`: added to the
    document as "sweep"."""
    partial = partial_path(result)
    failed = result.with_name(result.name + FAILED)
    log = result.with_suffix(".log")
    for stale in (partial, failed):
        stale.unlink(missing_ok=True)
    start = time.monotonic()
    stdout, stderr, returncode, problem = _execute(argv, timeout_s, env)
    seconds = time.monotonic() - start
    if problem is None and returncode != 0:
        problem = f"exit status {returncode}" + _reason(stderr, stdout)
    if problem is None:
        problem = _check_json(partial)
    if problem is None and annotation is not None:
        _annotate(partial, annotation)
    _write_log(log, argv, returncode, seconds, stdout, stderr, problem, env)
    if problem is None:
        os.replace(partial, result)
        return Outcome(True, seconds, returncode, "", log)
    if partial.exists():
        os.replace(partial, failed)
    return Outcome(False, seconds, returncode, problem, log)


def run_setup(argv: Sequence[str], creates: Path, log: Path, timeout_s: float,
              env: Mapping[str, str] | None = None) -> str | None:
    """Runs a spec's setup step; None when it exited 0 and `creates` exists, else why not."""
    start = time.monotonic()
    stdout, stderr, returncode, problem = _execute(argv, timeout_s, env)
    if problem is None and returncode != 0:
        problem = f"exit status {returncode}" + _reason(stderr, stdout)
    if problem is None and not creates.exists():
        problem = f"exited 0 but did not create {creates}"
    _write_log(log, argv, returncode, time.monotonic() - start, stdout, stderr, problem, env)
    return problem


def _execute(argv: Sequence[str], timeout_s: float, env: Mapping[str, str] | None = None,
             ) -> tuple[str, str, int | None, str | None]:
    try:
        # A process group of its own, so a timeout can stop a launcher's
        # children too; not a session of its own: under autogroup scheduling
        # a session is a scheduling group, and ranks in another group than
        # the sweep's agent (started from this session) would measure a
        # placement no launcher makes (docs/decisions/2026-11-27-scheduling-
        # group.md).
        proc = subprocess.Popen(list(argv), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                stdin=subprocess.DEVNULL, text=True, errors="replace",
                                process_group=0,
                                env=dict(env) if env is not None else None)
    except OSError as e:
        return "", "", None, f"cannot start {argv[0]}: {e.strerror}"
    try:
        stdout, stderr = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        _kill(proc)
        stdout, stderr = proc.communicate()
        return stdout, stderr, None, f"timed out after {timeout_s:g} s (timeout_s / --timeout)"
    except BaseException:  # Ctrl-C: do not leave the benchmark running
        _kill(proc)
        proc.communicate()
        raise
    return stdout, stderr, proc.returncode, None


def _kill(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _reason(stderr: str, stdout: str) -> str:
    """The most telling line: the first stderr line mentioning an error, else its first
    line (CLI11 puts the message first, then a "Run with --help" hint), else stdout's last."""
    lines = [l.strip() for l in stderr.splitlines()
             if l.strip() and not l.startswith("Run with --help")]
    if not lines:
        lines = [l.strip() for l in stdout.splitlines() if l.strip()][-1:]
    if not lines:
        return ""
    chosen = next((l for l in lines if "error" in l.lower()), lines[0])
    return ": " + (chosen if len(chosen) <= 300 else chosen[:297] + "...")


def _check_json(partial: Path) -> str | None:
    if not partial.exists():
        return "exited 0 but wrote no results file (--out)"
    try:
        doc = json.loads(partial.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        return f"results file is not valid JSON: {e}"
    if not isinstance(doc, dict):
        return "results file is not a JSON object"
    return None


def _annotate(partial: Path, annotation: Mapping[str, Any]) -> None:
    doc = json.loads(partial.read_text(encoding="utf-8"))
    doc["sweep"] = dict(annotation)
    partial.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")


def _write_log(log: Path, argv: Sequence[str], returncode: int | None, seconds: float,
               stdout: str, stderr: str, problem: str | None,
               env: Mapping[str, str] | None = None) -> None:
    status = "ok" if problem is None else f"FAILED: {problem}"
    # What the command saw beyond the sweep's own environment: enough to re-run it.
    added = sorted((k, v) for k, v in (env or {}).items() if os.environ.get(k) != v)
    prefix = "".join(f"{k}={shlex.quote(v)} " for k, v in added)
    log.write_text(f"$ {prefix}{shlex.join(argv)}\n# exit {returncode}, {seconds:.2f} s, {status}\n"
                   f"--- stdout\n{stdout}--- stderr\n{stderr}", encoding="utf-8")
