"""End-to-end tests of `deputy agent` and `deputy info` as a user runs them.

--daemon returns once the agent listens and leaves a pidfile; `deputy info`
answers (text and JSON) and says plainly when no agent is there; SIGTERM
removes socket and pidfile; a second agent on a live socket is refused;
`deputy bench channel --agent` runs the listening side inside the agent on
every transport. Every command is bounded by a timeout.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

DEPUTY = os.environ.get("DEPUTY_BIN")
TIMEOUT_S = 60

pytestmark = pytest.mark.skipif(
    not DEPUTY, reason="DEPUTY_BIN is not set: point it at a built deputy binary")


def deputy(*args: str, env: dict | None = None, timeout: float = TIMEOUT_S):
    return subprocess.run([DEPUTY, *args], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})})


def wait_gone(path: Path, seconds: float = 5.0) -> bool:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if not path.exists():
            return True
        time.sleep(0.02)
    return not path.exists()


@pytest.fixture
def agent_dir():
    d = Path(tempfile.mkdtemp(prefix="deputy-cli-agent-"))  # mode 0700
    yield d
    subprocess.run(["rm", "-rf", str(d)], check=False)


@pytest.fixture
def daemon(agent_dir):
    sock = agent_dir / "agent.sock"
    r = deputy("agent", "--daemon", "--socket", str(sock), "--log-file", str(agent_dir / "log"))
    assert r.returncode == 0, r.stderr
    pid = int((agent_dir / "agent.pid").read_text())
    yield sock, pid
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def test_daemon_starts_answers_info_and_stops_cleanly(daemon, agent_dir):
    sock, pid = daemon
    assert sock.exists()
    r = deputy("info", "--socket", str(sock))
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"agent: reachable at {sock}" in r.stdout
    assert f"pid {pid}" in r.stdout
    r = deputy("info", "--socket", str(sock), "--format", "json")
    info = json.loads(r.stdout)
    # Nothing pinned: two engines where the agent may use two CPUs or more.
    engines = min(2, len(os.sched_getaffinity(pid)))
    assert info["pid"] == pid and info["engines"] == engines and info["clients"] == []
    assert info["counters"]["info_requests"] == 2
    os.kill(pid, signal.SIGTERM)
    assert wait_gone(sock), "socket left behind after SIGTERM"
    assert wait_gone(agent_dir / "agent.pid"), "pidfile left behind after SIGTERM"
    r = deputy("info", "--socket", str(sock), "--timeout", "0.2")
    assert r.returncode == 1
    assert f"agent: not reachable at {sock}" in r.stdout
    log = (agent_dir / "log").read_text()
    assert "agent: stopped" in log


def test_daemon_stays_in_the_callers_session_and_ignores_hangup(daemon):
    # A session of its own would be a scheduling group of its own under
    # autogroup scheduling, which takes CPU from computing ranks
    # (docs/decisions/2026-11-27-scheduling-group.md).
    sock, pid = daemon
    assert os.getsid(pid) == os.getsid(0)
    assert os.getpgid(pid) == pid and os.getpgid(pid) != os.getpgid(0)
    # The kernel prints nothing for a task scheduled by a cgroup of its own
    # rather than an autogroup (a CI runner's scope), and has no file at all
    # without CONFIG_SCHED_AUTOGROUP: the session check above covers both.
    try:
        with open(f"/proc/{pid}/autogroup") as theirs, open("/proc/self/autogroup") as ours:
            their_group, our_group = theirs.read().split(), ours.read().split()
        if their_group and our_group:
            assert their_group[0] == our_group[0]
    except FileNotFoundError:
        pass
    os.kill(pid, signal.SIGHUP)  # a terminal that closes
    time.sleep(0.2)
    r = deputy("info", "--socket", str(sock))
    assert r.returncode == 0 and f"pid {pid}" in r.stdout, r.stdout + r.stderr


def test_second_agent_on_a_live_socket_is_refused(daemon):
    sock, _ = daemon
    r = deputy("agent", "--socket", str(sock), timeout=10)
    assert r.returncode != 0
    assert "another agent running there" in r.stderr + r.stdout


def test_daemon_reports_a_failed_start(agent_dir):
    cfg = agent_dir / "agent.json"
    cfg.write_text('{"agent": {"ring_size": 100}}')
    r = deputy("agent", "--daemon", "--socket", str(agent_dir / "a.sock"), "--config", str(cfg))
    assert r.returncode != 0
    assert "ring_size 100 must be a power of two" in r.stderr + r.stdout


def test_info_with_a_token(agent_dir):
    token = agent_dir / "token"
    token.write_text("t0ken\n")
    sock = agent_dir / "agent.sock"
    r = deputy("agent", "--daemon", "--socket", str(sock), "--token-file", str(token))
    assert r.returncode == 0, r.stderr
    pid = int((agent_dir / "agent.pid").read_text())
    try:
        r = deputy("info", "--socket", str(sock), env={"DEPUTY_TOKEN": ""})
        assert r.returncode == 1 and "requires a token" in r.stdout
        r = deputy("info", "--socket", str(sock), "--token-file", str(token))
        assert r.returncode == 0 and "token required" in r.stdout
    finally:
        os.kill(pid, signal.SIGTERM)
        wait_gone(sock)


@pytest.mark.parametrize("transport,extra", [
    ("shm", []), ("uds", []), ("tcp", ["--insecure-tcp"]),
])
def test_bench_channel_against_the_agent(daemon, transport, extra):
    sock, _ = daemon
    r = deputy("bench", "channel", "--agent", "--agent-socket", str(sock), "--transport",
               transport, "-s", "1k", "-n", "3000", *extra)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "# listen: messages sent 3000 (planned 3000), received 3000 (expected 3000): OK" in r.stdout
    assert "# connect: messages sent 3000 (planned 3000), received 3000 (expected 3000): OK" in r.stdout
    info = json.loads(deputy("info", "--socket", str(sock), "--format", "json").stdout)
    assert info["counters"]["services"] >= 1


def test_bench_channel_secure_against_the_agent(daemon, agent_dir):
    sock, _ = daemon
    key = agent_dir / "k.key"
    assert deputy("bench", "channel", "--keygen", str(key)).returncode == 0
    r = deputy("bench", "channel", "--agent", "--agent-socket", str(sock), "--transport", "tcp",
               "--secure", "--key", str(key), "--mode", "pingpong", "-s", "256", "-n", "500")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "received 500 (expected 500): OK" in r.stdout


def test_bench_channel_without_an_agent_says_so(agent_dir):
    r = deputy("bench", "channel", "--agent", "--agent-socket", str(agent_dir / "none.sock"),
               "-n", "10")
    assert r.returncode != 0
    assert "no agent answers at" in r.stdout + r.stderr


def test_agent_killed_mid_stream_ends_the_bench_with_an_error(agent_dir):
    sock = agent_dir / "agent.sock"
    r = deputy("agent", "--daemon", "--socket", str(sock))
    assert r.returncode == 0, r.stderr
    pid = int((agent_dir / "agent.pid").read_text())
    bench = subprocess.Popen([DEPUTY, "bench", "channel", "--agent", "--agent-socket", str(sock),
                              "--transport", "shm", "-s", "64", "-n", "1000000000",
                              "--timeout", "30"],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    time.sleep(1.0)
    os.kill(pid, signal.SIGKILL)
    killed = time.monotonic()
    out, _ = bench.communicate(timeout=30)
    elapsed = time.monotonic() - killed
    assert bench.returncode != 0, out
    assert elapsed < 5, f"the bench took {elapsed:.1f} s to notice the dead agent"
    assert "DP_ERR_AGENT_LOST" in out, out


def test_info_lists_the_device_and_saves_it_for_the_agent_to_load(agent_dir):
    """deputy info shows the device as accel-config list would; --save-config
    writes it as accel-config save-config does, and an agent started with
    that file runs the same device."""
    first = agent_dir / "a.sock"
    config = agent_dir / "device.json"
    config.write_text(json.dumps({"dev": "dsa0", "wait_mode": "yield", "groups": [
        {"dev": "group0.0",
         "grouped_workqueues": [{"dev": "wq0.0", "mode": "shared", "size": 64, "priority": 9,
                                 "threshold": 48, "max_batch_size": 16}],
         "grouped_engines": [{"dev": "engine0.0"}, {"dev": "engine0.1"}]}]}))
    saved = agent_dir / "saved.json"
    pids = []
    try:
        for sock, source in ((first, config), (agent_dir / "b.sock", saved)):
            r = deputy("agent", "--daemon", "--socket", str(sock), "--config", str(source),
                       "--log-file", str(agent_dir / "log"))
            assert r.returncode == 0, r.stdout + r.stderr
            pids.append(int((agent_dir / "agent.pid").read_text()))
            r = deputy("info", "--socket", str(sock))
            assert r.returncode == 0, r.stdout + r.stderr
            assert "run by software engines" in r.stdout, r.stdout
            assert "device dsa0: wait yield" in r.stdout, r.stdout
            assert "group0.0: engines engine0.0, engine0.1" in r.stdout, r.stdout
            assert ("wq0.0 shared, size 64, priority 9, threshold 48, max_batch_size 16, "
                    "max_transfer_size 2147483648, block_on_fault 0") in r.stdout, r.stdout
            if sock == first:
                r = deputy("info", "--socket", str(sock), "--save-config", str(saved))
                assert r.returncode == 0, r.stdout + r.stderr
                assert f"saved the agent's device to {saved}" in r.stdout
                doc = json.loads(saved.read_text())
                assert isinstance(doc, list) and doc[0]["dev"] == "dsa0"
                wq = doc[0]["groups"][0]["grouped_workqueues"][0]
                assert (wq["mode"], wq["size"], wq["threshold"]) == ("shared", 64, 48)
    finally:
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
