"""End-to-end tests of the real `deputy bench channel` binary (DEPUTY_BIN).

What a user and deputy_tools rely on: --loopback runs the experiment in one
command on every transport, plain and secure; two processes with --peer;
the perftest-style table, the SEND/RECV timestamps and per-message TRACE
lines of DOCA's secure-channel sample; counts that differ reported exactly with exit 2;
refusals (oversize message, plain TCP, wrong key) that name the problem;
--json flag files and --out results; and a peer killed mid-stream ending the
other side with an error, not a hang. Every command is bounded by a timeout.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest

TIMEOUT_S = 120
DEPUTY = os.environ.get("DEPUTY_BIN")

pytestmark = pytest.mark.skipif(
    not DEPUTY, reason="DEPUTY_BIN is not set: point it at a built deputy binary "
                       "(e.g. DEPUTY_BIN=build/tools/deputy) to run the CLI end-to-end tests")

STREAM_HEADER = re.compile(r"^role\s+dir\s+#bytes\s+#iterations\s+time\[usec\]\s+avg\[usec\]\s+"
                           r"BW average\[MB/sec\]\s+MsgRate\[Mpps\]$", re.M)
PING_HEADER = re.compile(r"^role\s+#bytes\s+#iterations\s+t_min\[usec\]\s+t_p50\[usec\]\s+"
                         r"t_avg\[usec\]\s+t_p99\[usec\]\s+t_max\[usec\]\s+MsgRate\[Mpps\]$", re.M)


def channel(*args: str, timeout: float = TIMEOUT_S) -> subprocess.CompletedProcess:
    return subprocess.run([DEPUTY, "bench", "channel", *args], capture_output=True, text=True,
                          timeout=timeout)


def describe(r: subprocess.CompletedProcess) -> str:
    return f"exit {r.returncode}\nstdout:\n{r.stdout}\nstderr:\n{r.stderr}"


@pytest.fixture(scope="module")
def key(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = tmp_path_factory.mktemp("keys") / "channel.key"
    r = channel("--keygen", str(path))
    assert r.returncode == 0, describe(r)
    assert oct(path.stat().st_mode & 0o777) == "0o600"
    return str(path)


def transport_args(transport: str) -> list[str]:
    return ["--transport", transport] + (["--insecure-tcp"] if transport == "tcp" else [])


@pytest.mark.parametrize("transport", ["shm", "uds", "tcp"])
def test_loopback_stream_counts_table_and_timestamps(transport: str, tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    r = channel("--loopback", "-n", "2000", "-s", "100", *transport_args(transport),
                "--out", str(out))
    assert r.returncode == 0, describe(r)
    assert STREAM_HEADER.search(r.stdout), r.stdout
    for role in ("listen", "connect"):
        assert re.search(rf"^{role}\s+send\s+100\s+2000\s", r.stdout, re.M), r.stdout
        assert re.search(rf"^{role}\s+recv\s+100\s+2000\s", r.stdout, re.M), r.stdout
        assert (f"# {role}: messages sent 2000 (planned 2000), received 2000 (expected 2000): OK"
                in r.stdout)
        assert f"[{role}] connection established: {transport}" in r.stderr
        for stamp in ("SEND START TIME", "SEND END TIME", "RECV START TIME", "RECV END TIME"):
            assert re.search(rf"\[{role}\] {stamp}: \d+ ns", r.stderr), (stamp, r.stderr)
        assert (f"[{role}] Send thread exiting, total amount of messages sent successfully: 2000"
                in r.stderr)
    doc = json.loads(out.read_text())
    assert doc["benchmark"] == "channel"
    assert doc["config"]["transport"] == transport
    assert doc["config"]["msg_size"] == 100
    assert doc["versions"]["libsodium"]
    assert doc["host"]["cpus"] >= 1
    sides = {s["role"]: s for s in doc["results"]}
    assert set(sides) == {"listen", "connect"}
    for s in sides.values():
        assert (s["sent"], s["received"], s["expected"], s["peer_sent"]) == (2000, 2000, 2000, 2000)
        assert s["wrong"] == 0 and s["verdict"] == "OK" and s["exit_code"] == 0
        assert s["recv"]["msg_rate_mpps"] > 0 and s["send"]["mb_per_s"] > 0
        assert s["recv_end_ns"] >= s["recv_first_ns"] >= s["recv_start_ns"] > 0


@pytest.mark.parametrize("transport", ["shm", "uds", "tcp"])
def test_loopback_secure(transport: str, key: str, tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    r = channel("--loopback", "-n", "500", "-s", "64k", "--transport", transport, "--secure",
                "--key", key, "--out", str(out))
    assert r.returncode == 0, describe(r)
    assert f"# deputy bench channel: secure+{transport}," in r.stdout
    doc = json.loads(out.read_text())
    assert [s["transport"] for s in doc["results"]] == [f"secure+{transport}"] * 2
    assert all(s["received"] == 500 and s["wrong"] == 0 for s in doc["results"])


def test_pingpong_latency_columns_and_json(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    r = channel("--loopback", "--mode", "pingpong", "-n", "3000", "--warmup", "500", "-s", "64",
                "--out", str(out))
    assert r.returncode == 0, describe(r)
    assert PING_HEADER.search(r.stdout), r.stdout
    assert re.search(r"^connect\s+64\s+3000\s+[0-9.]+\s+[0-9.]+", r.stdout, re.M), r.stdout
    assert "# latency is one-way: half the round trip, 500 warm-up round trip(s) left out" in r.stdout
    doc = json.loads(out.read_text())
    lat = {s["role"]: s["latency_ns"] for s in doc["results"]}["connect"]
    assert lat["samples"] == 2500
    assert 0 < lat["min"] <= lat["p50"] <= lat["p99"] <= lat["max"]


def test_compare_runs_the_baseline_in_the_same_command(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    r = channel("--loopback", "--mode", "pingpong", "-n", "2000", "--compare", "uds",
                "--out", str(out))
    assert r.returncode == 0, describe(r)
    assert "# deputy bench channel: shm, pingpong" in r.stdout
    assert "# deputy bench channel: uds, pingpong" in r.stdout
    assert re.search(r"^# shm vs uds: one-way p50 [0-9.]+ vs [0-9.]+ usec \([0-9.]+x lower\)$",
                     r.stdout, re.M), r.stdout
    doc = json.loads(out.read_text())
    assert doc["compare"]["transport"] == "uds"
    assert [s["transport"] for s in doc["compare"]["results"]] == ["uds", "uds"]
    assert all(s["verdict"] == "OK" for s in doc["results"] + doc["compare"]["results"])
    bad = channel("--peer", "listen", "@x", "--compare", "uds")
    assert bad.returncode != 0 and "--compare needs --loopback" in bad.stderr


def test_one_way_stream(tmp_path: Path) -> None:
    r = channel("--loopback", "--one-way", "-n", "5000", "-s", "64", "--buffer-size", "4k")
    assert r.returncode == 0, describe(r)
    assert "stream one way (connect -> listen)" in r.stdout
    assert "# listen: messages sent 0 (planned 0), received 5000 (expected 5000): OK" in r.stdout
    assert "# connect: messages sent 5000 (planned 5000), received 0 (expected 0): OK" in r.stdout
    assert "busy threads" not in r.stdout  # 2 busy threads fit 2 cores


@pytest.mark.parametrize("transport", ["shm", "uds"])
def test_one_message_is_timed_from_its_send_after_the_start_barrier(transport: str,
                                                                    tmp_path: Path) -> None:
    # The count table's fixed cost is the channel's: both sides' threads are
    # up before the sender starts, and the receive time runs from the first
    # send (both sides on one clock here) to the last receive.
    out = tmp_path / "r.json"
    r = channel("--loopback", "--one-way", "-n", "1", "-s", "256", *transport_args(transport),
                "--out", str(out))
    assert r.returncode == 0, describe(r)
    for role in ("listen", "connect"):
        assert f"[{role}] start barrier passed: both sides' threads are ready" in r.stderr, r.stderr
    sides = {s["role"]: s for s in json.loads(out.read_text())["results"]}
    listen, connect = sides["listen"], sides["connect"]
    assert listen["recv_start_ns"] == connect["send_start_ns"] > 0
    assert listen["recv_end_ns"] >= listen["recv_first_ns"] > listen["recv_start_ns"]


def test_two_processes_with_different_counts(tmp_path: Path) -> None:
    """DOCA's rule: a receiver's -n caps what it receives (its report's 1.3); the rest of
    what the peer sends is read and dropped, so the sender never blocks."""
    address = str(tmp_path / "ch.sock")
    listener = subprocess.Popen([DEPUTY, "bench", "channel", "--peer", "listen", address,
                                 "-n", "100", "--transport", "uds"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        connector = channel("--peer", "connect", address, "-n", "200", "--transport", "uds")
        lout, lerr = listener.communicate(timeout=TIMEOUT_S)
    finally:
        if listener.poll() is None:
            listener.kill()
    assert connector.returncode == 0, describe(connector)
    assert ("# connect: messages sent 200 (planned 200), received 100 (expected 100): OK"
            in connector.stdout)
    assert "total amount of messages received successfully: 100" in connector.stderr
    assert listener.returncode == 0, lout + lerr
    assert ("# listen: messages sent 100 (planned 100), received 100 (expected 100), "
            "dropped 100 beyond -n: OK") in lout
    assert ("message counts differ: this side -n 100, the peer -n 200: this side receives 100 "
            "(its -n caps what it receives) and drops the other 100") in lerr
    assert "total amount of messages received successfully: 100" in lerr


def test_oversize_message_is_refused_before_anything_is_sent() -> None:
    r = channel("--loopback", "-s", "2M", "-n", "1")
    assert r.returncode != 0
    assert ("-s 2M: a message of 2097152 bytes exceeds the channel maximum of 1048576 bytes "
            "(DP_ERR_TOO_LARGE); nothing was sent") in r.stderr, describe(r)
    assert "connection established" not in r.stderr
    raised = channel("--loopback", "-s", "2M", "-n", "20", "--max-msg-size", "4M")
    assert raised.returncode == 0, describe(raised)


def test_plain_tcp_needs_consent() -> None:
    r = channel("--loopback", "--transport", "tcp", "-n", "1")
    assert r.returncode != 0
    assert "--transport tcp without --secure would send every message in clear" in r.stderr


def test_wrong_key_is_denied(key: str, tmp_path: Path) -> None:
    other = tmp_path / "other.key"
    assert channel("--keygen", str(other)).returncode == 0
    address = str(tmp_path / "ch.sock")
    listener = subprocess.Popen([DEPUTY, "bench", "channel", "--peer", "listen", address,
                                 "--secure", "--key", key, "-n", "10", "--timeout", "20"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        connector = channel("--peer", "connect", address, "--secure", "--key", str(other),
                            "-n", "10", "--timeout", "20")
        lout, lerr = listener.communicate(timeout=TIMEOUT_S)
    finally:
        if listener.poll() is None:
            listener.kill()
    assert connector.returncode == 1, describe(connector)
    assert "does not hold the same key" in connector.stderr
    assert listener.returncode == 1
    assert "DP_ERR_DENIED" in lout + lerr


def test_keygen_never_overwrites(key: str) -> None:
    before = Path(key).read_text()
    r = channel("--keygen", key)
    assert r.returncode == 1
    assert "File exists" in r.stderr
    assert Path(key).read_text() == before


def test_json_flags_and_command_line_wins(tmp_path: Path) -> None:
    cfg = tmp_path / "flags.json"
    cfg.write_text(json.dumps({"msg-size": 256, "num-msgs": 300, "transport": "uds",
                               "mode": "stream", "loopback": True, "log-level": 30,
                               "sdk-log-level": 40, "buffer-size": "64k"}))
    out = tmp_path / "r.json"
    r = channel("--json", str(cfg), "-n", "400", "--out", str(out))
    assert r.returncode == 0, describe(r)
    doc = json.loads(out.read_text())
    assert doc["config"]["msg_size"] == 256
    assert doc["config"]["num_msgs"] == 400  # the command line wins
    assert doc["config"]["transport"] == "uds"
    assert doc["results"][0]["received"] == 400
    assert r.stderr == ""  # log level 30: no INFO lines
    cfg.write_text(json.dumps({"msg_size": 64, "nonsense": 1}))
    bad = channel("--json", str(cfg), "--loopback")
    assert bad.returncode != 0
    assert "unknown key 'nonsense'" in bad.stderr


def test_doca_flag_file_and_log_lines(tmp_path: Path) -> None:
    """DOCA's sample reads its flags from groups in a JSON file and logs
    [time][thread][component][level][file:line][function]: the file works as it is, and
    the lines read the same (the DOCA report's figures 12-13)."""
    cfg = tmp_path / "sc_params.json"
    cfg.write_text(json.dumps({"doca_general_flags": {"log-level": 50},
                               "doca_program_flags": {"msg-size": 128, "num-msgs": 256,
                                                      "loopback": True, "one-way": True}}))
    r = channel("--json", str(cfg), "--transport", "uds")
    assert r.returncode == 0, describe(r)
    doca = r"^\[\d\d:\d\d:\d\d:\d{6}\]\[\d+\]\[app\]\[INF\]\[session\.cc:\d+\]\[%s\] %s$"
    assert re.search(doca % ("stream_send", re.escape(
        "[connect] Send thread exiting, total amount of messages sent successfully: 256")),
        r.stderr, re.M), r.stderr
    assert re.search(doca % ("stream_recv", re.escape(
        "[listen] Receive thread exiting, total amount of messages received successfully: 256")),
        r.stderr, re.M), r.stderr
    assert re.search(r"^\[[\d:]+\]\[\d+\]\[app\]\[INF\]\[session\.cc:\d+\]\[\w+\] "
                     r"\[listen\] Started listening on uds \S+, waiting for a connection$",
                     r.stderr, re.M), r.stderr
    plain = channel("--json", str(cfg), "--transport", "uds", "--log-format", "plain")
    assert plain.returncode == 0, describe(plain)
    assert re.search(r"^\[[\d:.]+\] \[app\] \[info\] \[connect\] Send thread exiting",
                     plain.stderr, re.M), plain.stderr
    # A group that is not an object, and a flag given twice, are named; nothing runs.
    cfg.write_text(json.dumps({"doca_program_flags": [128]}))
    bad = channel("--json", str(cfg), "--loopback")
    assert bad.returncode != 0
    assert "'doca_program_flags' expects an object" in bad.stderr, bad.stderr
    cfg.write_text(json.dumps({"num-msgs": 5, "doca_program_flags": {"num-msgs": 6}}))
    twice = channel("--json", str(cfg), "--loopback")
    assert twice.returncode != 0
    assert "key 'num-msgs' is given twice" in twice.stderr, twice.stderr
    assert "connection established" not in bad.stderr + twice.stderr


def test_log_levels_trace_shows_every_message() -> None:
    r = channel("--loopback", "-n", "5", "-s", "32", "-l", "70")
    assert r.returncode == 0, describe(r)
    for i in range(5):
        assert f"[listen] message sent: {i}" in r.stderr
        assert f"[connect] message received: {i}" in r.stderr
    quiet = channel("--loopback", "-n", "5", "-s", "32", "-l", "10")
    assert quiet.returncode == 0
    assert quiet.stderr == ""
    # An error at level 30 still names its cause; at 10 the tool says nothing.
    err = channel("--peer", "connect", "@deputy-nobody-here", "--transport", "uds",
                  "--timeout", "0.2", "-l", "30")
    assert err.returncode == 1
    assert "connecting to @deputy-nobody-here" in err.stderr
    silent = channel("--peer", "connect", "@deputy-nobody-here", "--transport", "uds",
                     "--timeout", "0.2", "-l", "10", "--sdk-log-level", "10")
    assert silent.returncode == 1
    assert silent.stderr == ""


def test_killed_peer_ends_the_run_with_an_error(tmp_path: Path) -> None:
    address = str(tmp_path / "ch.sock")
    listener = subprocess.Popen([DEPUTY, "bench", "channel", "--peer", "listen", address,
                                 "-n", "1000000000", "--timeout", "60"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    connector = subprocess.Popen([DEPUTY, "bench", "channel", "--peer", "connect", address,
                                  "-n", "1000000000", "--timeout", "60"],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(1.0)
        connector.send_signal(signal.SIGKILL)
        connector.wait(timeout=10)
        start = time.monotonic()
        lout, lerr = listener.communicate(timeout=30)  # far below --timeout 60
        elapsed = time.monotonic() - start
    finally:
        for p in (listener, connector):
            if p.poll() is None:
                p.kill()
    assert listener.returncode == 1, lout + lerr
    assert "DP_ERR_AGENT_LOST" in lout or "DP_ERR_IO" in lout, lout + lerr
    assert elapsed < 30
