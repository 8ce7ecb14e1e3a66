"""End-to-end tests of `deputy launch` as a user runs it.

Every test points DEPUTY_AGENT at a socket nobody serves (so the launcher
starts its own agent, unless the test runs one) and TMPDIR at a fresh
directory (so the launcher's private agent directory can be checked for).
After each job: no socket, no private directory, no agent and no rank
process may be left. Every command is bounded by a timeout.
"""

from __future__ import annotations

import os
import random
import re
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

DEPUTY = os.environ.get("DEPUTY_BIN")
TIMEOUT_S = 30

pytestmark = pytest.mark.skipif(
    not DEPUTY, reason="DEPUTY_BIN is not set: point it at a built deputy binary")


class Env:
    def __init__(self, root: Path):
        self.root = root
        self.vars = {"DEPUTY_AGENT": str(root / "nobody.sock"), "TMPDIR": str(root)}
        self.vars_unset = ["DEPUTY_TOKEN"]

    def environ(self, extra: dict | None = None) -> dict:
        env = {k: v for k, v in os.environ.items() if k not in self.vars_unset}
        return {**env, **self.vars, **(extra or {})}

    def launch(self, *args: str, extra: dict | None = None, timeout: float = TIMEOUT_S,
               input: str | None = None):
        return subprocess.run([DEPUTY, "launch", *args], capture_output=True, text=True,
                              timeout=timeout, env=self.environ(extra), input=input)

    def private_dirs(self) -> list[Path]:
        return sorted(self.root.glob("deputy-launch-*"))


def running(pattern: str) -> bool:
    return subprocess.run(["pgrep", "-f", pattern], capture_output=True).returncode == 0


def assert_clean(env: Env, *patterns: str):
    assert env.private_dirs() == [], "the launcher's agent directory was left behind"
    for p in patterns:
        end = time.monotonic() + 2
        while running(p) and time.monotonic() < end:
            time.sleep(0.05)
        assert not running(p), f"a process matching {p!r} was left behind"


def unique_sleep() -> str:
    """A `sleep` argument no other test uses, to find leftover processes by."""
    return f"{60 + random.randrange(1000)}.{random.randrange(10**6):06d}"


@pytest.fixture
def env():
    root = Path(tempfile.mkdtemp(prefix="deputy-launch-test-"))
    yield Env(root)
    subprocess.run(["rm", "-rf", str(root)], check=False)


# The secret travels on a socket the rank inherits ($DEPUTY_JOB_SECRET_FD),
# never in its environment: any process of the user can read that.
SHOW_SECRET = '$(eval "cat <&$DEPUTY_JOB_SECRET_FD") ${DEPUTY_JOB_SECRET:-unset}'


def test_every_rank_gets_its_environment(env):
    r = env.launch("-n", "3", "--", "sh", "-c",
                   'echo "$DEPUTY_RANK $DEPUTY_SIZE $DEPUTY_AGENT $DEPUTY_JOB $DEPUTY_TOKEN '
                   + SHOW_SECRET + '"', extra={"DEPUTY_JOB_SECRET": "the-callers-own"})
    assert r.returncode == 0, r.stdout + r.stderr
    rows = {}
    for line in r.stdout.splitlines():
        m = re.fullmatch(r"\[(\d)\] (\d) (\d) (\S+) (job-\d+-[0-9a-f]+) ([0-9a-f]{64}) ([0-9a-f]{64}) "
                         r"unset", line)
        assert m, line
        assert m[1] == m[2]
        rows[int(m[1])] = m.groups()[2:]
    assert sorted(rows) == [0, 1, 2]
    assert len(set(rows.values())) == 1, "ranks disagree on size, agent, job, token or secret"
    size, agent, job, token, secret = rows[0]
    assert size == "3"
    assert secret != token
    # A new job gets a new secret.
    again = env.launch("-n", "1", "--", "sh", "-c", 'echo "' + SHOW_SECRET + '"')
    assert again.returncode == 0 and secret not in again.stdout, again.stdout
    assert re.fullmatch(re.escape(str(env.root)) + r"/deputy-launch-\w+/agent\.sock", agent)
    assert_clean(env, agent)


# A rank that attached: its secret is nowhere in its environment (not even a
# DEPUTY_JOB_SECRET it was given besides: overwritten where it lay), the
# socket is closed, and its teammate, which got the secret the same way,
# meets it in a team.
RANK_AFTER_INIT = r"""
import ctypes, os, sys
lib = ctypes.CDLL(sys.argv[1])
fd = int(os.environ["DEPUTY_JOB_SECRET_FD"])
socket_inode = os.fstat(fd).st_ino
ctx = ctypes.c_void_p()
assert lib.dp_init(None, ctypes.byref(ctx)) == 0
environ = open("/proc/self/environ", "rb").read()
try:  # (the number may name another file by now)
    closed = "open" if os.fstat(fd).st_ino == socket_inode else "closed"
except OSError:
    closed = "closed"
team = ctypes.c_void_p()
st = lib.dp_team_create(ctx, b"env-check", int(os.environ["DEPUTY_RANK"]),
                        int(os.environ["DEPUTY_SIZE"]), ctypes.byref(team))
given = b"given-" + b"x" * 40
print(os.environ["DEPUTY_RANK"], closed, "leaked" if given in environ else "clean",
      "team" if st == 0 else f"team-failed-{st}", flush=True)
if st == 0:
    lib.dp_team_destroy(team)
lib.dp_finalize(ctx)
"""


def test_a_rank_that_attached_holds_no_secret_in_its_environment(env, tmp_path):
    script = tmp_path / "rank.py"
    script.write_text(RANK_AFTER_INIT)
    library = Path(DEPUTY).resolve().parent.parent / "libdeputy.so"
    r = env.launch("-n", "2", "--", "sh", "-c",
                   f'DEPUTY_JOB_SECRET=given-{"x" * 40} exec python3 {script} {library}')
    assert r.returncode == 0, r.stdout + r.stderr
    rows = sorted(line.split("] ", 1)[1] for line in r.stdout.splitlines() if "] " in line)
    assert rows == ["0 closed clean team", "1 closed clean team"], r.stdout + r.stderr
    assert_clean(env)


def test_the_started_agent_serves_the_job_and_is_gone_afterwards(env):
    r = env.launch("-n", "2", "--", "sh", "-c",
                   'test -S "$DEPUTY_AGENT" && pgrep -f "$DEPUTY_AGENT" >/dev/null && '
                   'echo "up $DEPUTY_AGENT"')
    assert r.returncode == 0, r.stdout + r.stderr
    lines = sorted(r.stdout.splitlines())
    assert len(lines) == 2 and lines[0].startswith("[0] up ") and lines[1].startswith("[1] up ")
    sock = lines[0].split()[-1]
    assert not Path(sock).exists() and not Path(sock).parent.exists()
    assert_clean(env, sock)


def test_ranks_reach_the_agent_with_the_token(env):
    r = env.launch("-n", "2", "--", DEPUTY, "info")
    assert r.returncode == 0, r.stdout + r.stderr
    for rank in (0, 1):
        assert f"[{rank}] agent: reachable at" in r.stdout
    assert "token required" in r.stdout
    assert_clean(env)


def test_an_agent_already_running_is_used_and_left_running(env):
    sock = env.root / "agent" / "agent.sock"
    r = subprocess.run([DEPUTY, "agent", "--daemon", "--socket", str(sock)], capture_output=True,
                       text=True, timeout=TIMEOUT_S, env=env.environ())
    assert r.returncode == 0, r.stderr
    pid = int((sock.parent / "agent.pid").read_text())
    try:
        r = env.launch("-n", "2", "--", "sh", "-c", 'echo "$DEPUTY_AGENT token=${DEPUTY_TOKEN-none}"',
                       extra={"DEPUTY_AGENT": str(sock)})
        assert r.returncode == 0, r.stdout + r.stderr
        assert sorted(r.stdout.splitlines()) == [f"[0] {sock} token=none", f"[1] {sock} token=none"]
        assert env.private_dirs() == []
        os.kill(pid, 0)  # still running
        r = subprocess.run([DEPUTY, "info", "--socket", str(sock)], capture_output=True, text=True,
                           timeout=TIMEOUT_S)
        assert r.returncode == 0 and f"pid {pid}" in r.stdout
    finally:
        os.kill(pid, signal.SIGTERM)


def test_exit_code_is_the_worst_rank(env):
    assert env.launch("-n", "3", "--", "true").returncode == 0
    r = env.launch("-n", "2", "--", "sh", "-c", '[ "$DEPUTY_RANK" = 1 ] && exit 5; exit 0')
    assert r.returncode == 5
    assert re.search(r"rank 1 \(pid \d+\) exited with code 5", r.stderr), r.stderr
    r = env.launch("-n", "1", "--", "sh", "-c", "kill -USR1 $$")
    assert r.returncode == 128 + signal.SIGUSR1
    assert "was killed by SIGUSR1" in r.stderr
    # Rank 0 fails once ranks 1 and 2 have set their trap; they are stopped
    # with SIGTERM and exit with codes of their own, which count: the worst wins.
    d = env.root
    r = env.launch("-n", "3", "--", "sh", "-c",
                   'trap "exit $((DEPUTY_RANK + 1))" TERM; touch ' + f"{d}/trap.$DEPUTY_RANK; "
                   '[ "$DEPUTY_RANK" != 0 ] && { sleep 30 & wait; }; '
                   f"while [ ! -e {d}/trap.1 ] || [ ! -e {d}/trap.2 ]; do sleep 0.01; done; exit 1")
    assert r.returncode == 3, r.stderr
    assert_clean(env)


def test_a_failing_rank_stops_the_others_quickly(env):
    nap = unique_sleep()
    start = time.monotonic()
    r = env.launch("-n", "3", "--", "sh", "-c",
                   f'[ "$DEPUTY_RANK" = 1 ] && {{ sleep 0.2; exit 3; }}; exec sleep {nap}')
    elapsed = time.monotonic() - start
    assert r.returncode == 3, r.stderr  # the stopped ranks' SIGTERM does not count
    assert re.search(r"rank 1 \(pid \d+\) exited with code 3; stopping the other 2 ranks", r.stderr)
    assert elapsed < 5, f"took {elapsed:.1f} s"
    assert_clean(env, f"sleep {nap}")


def test_a_rank_ignoring_sigterm_is_killed_after_the_grace_period(env):
    nap = unique_sleep()
    start = time.monotonic()
    r = env.launch("-n", "2", "--timeout", "1", "--grace", "0.5", "--", "sh", "-c",
                   f"trap '' TERM; sleep {nap}")
    elapsed = time.monotonic() - start
    assert r.returncode == 124, r.stderr
    assert "timeout: the job ran for 1 s" in r.stderr
    assert "did not stop within 0.5 s; killing it" in r.stderr
    assert elapsed < 6, f"took {elapsed:.1f} s"
    assert_clean(env, f"sleep {nap}")


def test_timeout(env):
    nap = unique_sleep()
    start = time.monotonic()
    r = env.launch("-n", "2", "--timeout", "1", "--", "sleep", nap)
    assert r.returncode == 124
    assert "timeout: the job ran for 1 s (--timeout); stopping 2 ranks" in r.stderr
    assert time.monotonic() - start < 6
    assert_clean(env, f"sleep {nap}")


def test_sigint_to_the_launcher_stops_and_cleans_everything(env):
    nap = unique_sleep()
    ready = env.root / "ready"
    ready.mkdir()
    p = subprocess.Popen(
        [DEPUTY, "launch", "-n", "3", "--", "sh", "-c",
         f'echo "$DEPUTY_AGENT" > {ready}/$DEPUTY_RANK; exec sleep {nap}'],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env.environ())
    try:
        end = time.monotonic() + TIMEOUT_S
        while len(list(ready.iterdir())) < 3 and time.monotonic() < end:
            time.sleep(0.02)
        time.sleep(0.1)  # the last file is written before its exec
        sock = (ready / "0").read_text().strip()
        assert Path(sock).exists() and running(sock)
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=TIMEOUT_S)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 128 + signal.SIGINT, err
    assert "got SIGINT; passing it to 3 ranks" in err
    assert not Path(sock).exists()
    assert_clean(env, sock, f"sleep {nap}")


def test_prefix_output_keeps_lines_whole(env):
    # Each line is written in two pieces with a pause between them, while
    # the other ranks write theirs: every line must still come out whole.
    script = ('i=0; while [ $i -lt 20 ]; do printf "rank %s line %s " $DEPUTY_RANK $i; '
              'sleep 0.01; printf "end\\n"; i=$((i+1)); done; '
              'echo "err $DEPUTY_RANK" >&2; printf "last $DEPUTY_RANK"')
    r = env.launch("-n", "3", "--output", "prefix", "--", "sh", "-c", script)
    assert r.returncode == 0, r.stderr
    seen = {0: [], 1: [], 2: []}
    for line in r.stdout.splitlines():
        m = re.fullmatch(r"\[(\d)\] rank (\d) line (\d+) end", line)
        if m:
            assert m[1] == m[2]
            seen[int(m[1])].append(int(m[3]))
        else:
            assert re.fullmatch(r"\[(\d)\] last \1", line), line
    assert all(v == list(range(20)) for v in seen.values()), seen
    # The launcher's own lines (its placement warning) are not the ranks'.
    ranks_err = [line for line in r.stderr.splitlines() if not line.startswith("deputy launch:")]
    assert sorted(ranks_err) == ["[0] err 0", "[1] err 1", "[2] err 2"]


def test_prefix_cuts_very_long_lines(env):
    r = env.launch("-n", "2", "--", "python3", "-c", "print('x' * 70000)")
    assert r.returncode == 0, r.stderr
    lengths = sorted(len(line) for line in r.stdout.splitlines())
    assert lengths == [4 + 4464, 4 + 4464, 4 + 65536, 4 + 65536]


def test_plain_is_the_default_for_one_rank_and_stdin_goes_to_rank_0(env):
    r = env.launch("-n", "1", "--", "echo", "hi")
    assert r.returncode == 0 and r.stdout == "hi\n"
    r = env.launch("-n", "2", "--", "sh", "-c", 'echo "$DEPUTY_RANK:$(cat)"', input="hello\n")
    assert sorted(r.stdout.splitlines()) == ["[0] 0:hello", "[1] 1:"]


def test_separate_output_files(env):
    out = env.root / "out"
    r = env.launch("-n", "2", "--output-dir", str(out), "--", "sh", "-c",
                   'echo "out $DEPUTY_RANK"; echo "err $DEPUTY_RANK" >&2')
    assert r.returncode == 0, r.stderr
    assert r.stdout == ""
    for rank in (0, 1):
        assert (out / f"rank.{rank}.out").read_text() == f"out {rank}\n"
        assert (out / f"rank.{rank}.err").read_text() == f"err {rank}\n"
    r = env.launch("-n", "2", "--output", "separate", "--", "true")
    assert r.returncode != 0 and "--output separate needs --output-dir" in r.stderr


def test_a_missing_program_is_reported_before_anything_starts(env):
    r = env.launch("-n", "2", "--", "no-such-program-for-deputy")
    assert r.returncode == 127
    assert "cannot find 'no-such-program-for-deputy' in PATH" in r.stderr
    assert env.private_dirs() == []
    notexec = env.root / "notexec"
    notexec.write_text("#!/bin/sh\n")
    r = env.launch("-n", "2", "--", str(notexec))
    assert r.returncode == 126
    assert f"rank 0: cannot execute '{notexec}': Permission denied" in r.stderr
    assert_clean(env)


def test_an_agent_that_fails_to_start_is_reported(env):
    cfg = env.root / "agent.json"
    cfg.write_text('{"agent": {"ring_size": 100}}')
    r = env.launch("-n", "2", "--agent-config", str(cfg), "--", "true")
    assert r.returncode == 1
    assert "the agent exited before it listened" in r.stderr
    assert "ring_size 100 must be a power of two" in r.stderr
    assert_clean(env)


def test_agent_config_and_log(env):
    cfg = env.root / "agent.json"
    cfg.write_text('{"agent": {"engines": 2}}')
    log = env.root / "agent.log"
    r = env.launch("-n", "1", "--agent-config", str(cfg), "--agent-log", str(log), "--",
                   DEPUTY, "info", "--format", "json")
    assert r.returncode == 0, r.stderr
    assert '"engines":2' in r.stdout.replace(" ", "")
    assert "agent: stopped" in log.read_text()
    assert_clean(env)
