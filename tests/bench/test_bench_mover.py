"""End-to-end tests of the real `deputy bench mover` binary (DEPUTY_BIN).

What users and deputy_tools rely on: the human table, one dsa_perf_micros
`GB per sec` line per measured row, the --out JSON (every row verified),
--json flag files with the command line winning, errors that name the flag
or key, and every operation / wait mode / queue mode actually running and
verifying. Each run is small and bounded by a timeout, so a hang fails the
test instead of the CI job.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import time
from pathlib import Path

import pytest

TIMEOUT_S = 120
DEPUTY = os.environ.get("DEPUTY_BIN")

pytestmark = pytest.mark.skipif(
    not DEPUTY, reason="DEPUTY_BIN is not set: point it at a built deputy binary "
                       "(e.g. DEPUTY_BIN=build/tools/deputy) to run the CLI end-to-end tests")

# dsa_perf_micros's result line; the latency part at queue depth 1 or with one buffer.
GB_LINE = re.compile(r"^GB per sec = [0-9.]+ cpu [0-9.]+ kopsrate = \d+$")
GB_LATENCY_LINE = re.compile(r"^GB per sec = [0-9.]+ latency\(cycles\) = [0-9.]+, [0-9.]+ ns, "
                             r"cycles/sec =\d+ cpu [0-9.]+ kopsrate = \d+$")
QUICK = ["-n", "4", "-i", "20", "--reps", "1"]


def mover(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([DEPUTY, "bench", "mover", *args], capture_output=True, text=True,
                          timeout=TIMEOUT_S)


def run_ok(tmp_path: Path, *args: str) -> dict:
    """Runs with --out, asserts exit 0 and every row verified; returns the JSON."""
    out = tmp_path / "result.json"
    result = mover(*args, "--out", str(out))
    assert result.returncode == 0, \
        f"{args}: exit {result.returncode}\n{result.stdout}\n{result.stderr}"
    doc = json.loads(out.read_text())
    assert doc["results"], args
    for row in doc["results"]:
        assert row["verified"], \
            f"{args}: {row['mode']} at {row['transfer_size']}: {row['verify_error']}"
    return doc


def fails_naming(expected: str, *args: str) -> str:
    result = mover(*args)
    text = result.stdout + result.stderr
    assert result.returncode != 0, f"{args} should fail\n{text}"
    assert expected in text, f"{args}: message does not name {expected!r}:\n{text}"
    return text


def test_quick_run_prints_table_gb_lines_and_json(tmp_path: Path) -> None:
    out = tmp_path / "f.json"
    result = mover("-s", "4k,64k", *QUICK, "--compare", "cpu", "--out", str(out))
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert any(l.split()[:4] == ["size", "mode", "iters", "GB/s"] for l in lines), result.stdout
    doc = json.loads(out.read_text())
    assert doc["benchmark"] == "mover" and doc["schema"] == 1
    rows = doc["results"]
    assert [(r["mode"], r["transfer_size"]) for r in rows] == [
        ("mover", 4096), ("cpu", 4096), ("mover", 65536), ("cpu", 65536)]
    assert all(r["verified"] for r in rows)
    gb_lines = [l for l in lines if l.startswith("GB per sec")]
    assert len(gb_lines) == len(rows)
    assert all(GB_LINE.match(l) for l in gb_lines), gb_lines
    for line, row in zip(gb_lines, rows):
        assert float(line.split()[4]) == pytest.approx(row["gbps"], rel=1e-5)
    for key in ("config", "versions", "host"):
        assert doc[key], key


def test_json_file_sets_flags_and_command_line_wins(tmp_path: Path) -> None:
    flags = tmp_path / "flags.json"
    flags.write_text(json.dumps({"size": "8k", "buffers": 4, "iterations": 10, "reps": 1,
                                 "batch": 2, "wait": "pause"}))
    doc = run_ok(tmp_path, "--json", str(flags))
    config = doc["config"]
    assert (config["sizes"], config["buffers"], config["batch"], config["wait"]) == \
        ("8k", 4, 2, "pause")
    doc = run_ok(tmp_path, "--json", str(flags), "-s", "2k", "-b", "1")
    config = doc["config"]
    assert (config["sizes"], config["batch"], config["wait"]) == ("2k", 1, "pause")
    assert doc["results"][0]["transfer_size"] == 2048


def test_json_unknown_key_is_named(tmp_path: Path) -> None:
    flags = tmp_path / "flags.json"
    flags.write_text('{"size": "4k", "bogus_key": 1}')
    fails_naming("bogus_key", "--json", str(flags))


def test_json_wrong_type_is_named(tmp_path: Path) -> None:
    flags = tmp_path / "flags.json"
    flags.write_text('{"buffers": "many"}')
    text = fails_naming("buffers", "--json", str(flags))
    assert "integer" in text


@pytest.mark.parametrize("args, flag", [
    (["-o", "bogus"], "-o bogus"),
    (["-s", "0"], "-s 0"),
    (["-s", "4z"], "-s 4z"),
    # a reduction the type does not take (it crashed the run before it was refused)
    (["-o", "reduce", "--dtype", "float64", "--redop", "land"], "--dtype float64"),
    (["-o", "reduce", "--dtype", "int32", "--redop", "maxloc"], "--dtype int32"),
    (["-o", "reduce", "--dtype", "float64_int32", "--redop", "sum"], "--redop sum"),
    (["--isa", "avx1024"], "--isa avx1024"),
])
def test_bad_flags_are_named(args: list[str], flag: str) -> None:
    fails_naming(flag, *args, *QUICK)


OPS = ["memmove", "fill", "compare", "compare_pattern", "create_delta", "apply_delta", "dualcast",
       "crc32c", "copy_crc32c", "dif_check", "dif_insert", "dif_strip", "dif_update", "cache_flush",
       "reduce", "noop"]


@pytest.mark.parametrize("op", OPS + ["3"])
def test_every_operation_runs_and_verifies(tmp_path: Path, op: str) -> None:
    doc = run_ok(tmp_path, "-o", op, "-s", "4k", *QUICK, "--compare", "cpu")
    assert doc["config"]["op"] == ("memmove" if op == "3" else op)
    assert {r["mode"] for r in doc["results"]} == {"mover", "cpu"}


@pytest.mark.parametrize("op", ["0x12", "dif_insert", "dif_strip", "0x15"])
@pytest.mark.parametrize("block", ["0", "520", "2", "4104"])
def test_dif_operations_take_every_block_size(tmp_path: Path, op: str, block: str) -> None:
    # -s counts the data, a whole number of blocks: 2 blocks of each size.
    data = {"0": 512, "520": 520, "2": 4096, "4104": 4104}[block] * 2
    doc = run_ok(tmp_path, "-o", op, "--dif-block", block, "-s", str(data), *QUICK,
                 "--compare", "cpu")
    assert doc["config"]["dif_block"] == block
    assert {r["transfer_size"] for r in doc["results"]} == {data}


@pytest.mark.parametrize("args, flag", [
    (["-o", "dif_insert", "-s", "1000"], "-s 1000: dif_insert needs a whole number of DIF blocks of 512"),
    (["-o", "dif_check", "--dif-block", "5"], "--dif-block 5"),
])
def test_dif_sizes_and_blocks_are_named(args: list[str], flag: str) -> None:
    fails_naming(flag, *args, *QUICK)


@pytest.mark.parametrize("dtype, redop", [
    ("float32", "sum"), ("float64", "max"), ("int32", "min"), ("uint8", "prod"),
    ("bfloat16", "sum"), ("float16", "max"), ("int64", "sum"), ("int16", "bxor"),
    ("float64_int32", "maxloc"), ("int32_int32", "minloc"), ("float32_float32", "maxloc"),
])
def test_reduce_types_and_operations(tmp_path: Path, dtype: str, redop: str) -> None:
    doc = run_ok(tmp_path, "-o", "reduce", "--dtype", dtype, "--redop", redop, "-s", "4k", *QUICK,
                 "--compare", "cpu")
    assert (doc["config"]["dtype"], doc["config"]["redop"]) == (dtype, redop)


@pytest.mark.parametrize("args, key, value", [
    (["-b", "4"], "batch", 4),
    (["-w", "1"], "wq_mode", "shared"),
    (["-x", "block"], "wait", "block"),
    (["-x", "pause"], "wait", "pause"),
    (["-x", "yield"], "wait", "yield"),
    (["-e", "2"], "engines", 2),
    (["-m"], "cpu_mode", True),
])
def test_modes_run_and_verify(tmp_path: Path, args: list[str], key: str, value: object) -> None:
    doc = run_ok(tmp_path, *args, "-s", "4k,64k", "-n", "8", "-i", "20", "--reps", "1")
    assert doc["config"][key] == value
    expected_mode = "cpu" if "-m" in args else "mover"
    assert {r["mode"] for r in doc["results"]} == {expected_mode}


def test_isa_picks_the_kernels_of_the_run(tmp_path: Path) -> None:
    # The scalar kernels on any CPU, named in the banner and the JSON.
    doc = run_ok(tmp_path, "-o", "reduce", "--dtype", "int32", "--redop", "band", "-s", "4k",
                 *QUICK, "--isa", "scalar", "--compare", "cpu")
    assert doc["versions"]["kernels_isa"] == "scalar", doc



# --- the idxd (DSA) backend: on the stand-in device here, and without a device ---

@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("wq", ["standin", "standin/shared"])
def test_every_operation_verifies_on_the_standin_dsa_queue(tmp_path: Path, op: str, wq: str) -> None:
    doc = run_ok(tmp_path, "-o", op, "-s", "4k", "-b", "4", *QUICK, "--wq", wq)
    assert doc["config"]["wq"] == wq
    assert doc["config"]["backend"].startswith("DSA stand-in device"), doc["config"]["backend"]
    idxd = doc["idxd"]
    # reduce is deputy's own and noop moves nothing: both stay on the CPU.
    if op in ("reduce", "noop"):
        assert idxd["submitted"] == 0, idxd
    else:
        assert idxd["submitted"] > 0, idxd
    assert idxd["fallbacks"] == 0 and idxd["faults"] == 0, idxd


def test_a_device_that_is_not_there_runs_the_software_engines_and_says_why(tmp_path: Path) -> None:
    if Path("/sys/bus/dsa").exists():
        pytest.skip("this machine has a DSA bus")
    out = tmp_path / "result.json"
    result = mover("--device", "dsa0", "-s", "4k", *QUICK, "--out", str(out))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "# run by software engines (idxd: no DSA device: the idxd driver is not loaded" \
        in result.stdout, result.stdout
    assert "intel_iommu=on,sm_on" in result.stdout
    doc = json.loads(out.read_text())
    assert doc["config"]["device"] == "dsa0"
    assert "idxd" not in doc


@pytest.mark.parametrize("args, words", [
    (["--device", "dsa0", "--wq", "dsa0/wq0.0"], "give --device or --wq, not both"),
    (["--wq", "standin", "--config", "/dev/null"], "--config with --device/--wq"),
    (["--agent", "/nonexistent.sock", "--wq", "standin"], "--agent runs on the agent's device"),
])
def test_backend_flags_that_contradict_are_refused(args: list[str], words: str) -> None:
    fails_naming(words, *args, *QUICK)


def test_result_lines_read_as_dsa_perf_micros_users_read_them(tmp_path: Path) -> None:
    """The seeds' plotting scripts split the line on spaces and commas and
    take its numbers by position: [0] GB/s, and at -q1 [2] the latency in ns."""
    out = tmp_path / "q1.json"
    result = mover("-s", "4k", "-q", "1", *QUICK, "--out", str(out))
    assert result.returncode == 0, result.stdout + result.stderr
    lines = [l for l in result.stdout.splitlines() if l.startswith("GB per sec")]
    assert len(lines) == 1 and GB_LATENCY_LINE.match(lines[0]), lines
    numbers = [float(t) for t in re.split(" |,", lines[0]) if re.fullmatch(r"[0-9.]+", t)]
    row = json.loads(out.read_text())["results"][0]
    assert numbers[0] == pytest.approx(row["gbps"], rel=1e-5)
    assert numbers[2] == pytest.approx(row["latency_ns_median"], rel=1e-5)
    assert row["submit_ns_median"] > 0
    assert "submit(ns)" in result.stdout


def test_numa_placement_takes_the_nodes_this_machine_has(tmp_path: Path) -> None:
    nodes = sorted(int(p.name[4:]) for p in Path("/sys/devices/system/node").glob("node[0-9]*"))
    doc = run_ok(tmp_path, "-S", f"{nodes[0]},{nodes[-1]}", "-s", "4k", *QUICK, "--compare", "cpu")
    assert doc["config"]["numa_nodes"] == f"{nodes[0]},{nodes[-1]}"
    missing = max(nodes) + 1
    text = fails_naming(f"-S {nodes[0]},{missing}: this machine has no NUMA node {missing}",
                        "-S", f"{nodes[0]},{missing}", *QUICK)
    assert f"node {nodes[0]}" in text
    fails_naming("-S x: expected NUMA node numbers", "-S", "x", *QUICK)


def test_on_an_agents_mover_local_and_remote(tmp_path: Path) -> None:
    """--agent: the agent's mover, staged; over a Unix socket and over the
    secure session (tcp://, DEPUTY_KEY), every row verified, the agent named
    in the header and the JSON; no key for a remote agent is an error."""
    key = tmp_path / "k"
    assert subprocess.run([DEPUTY, "bench", "channel", "--keygen", str(key)],
                          capture_output=True, timeout=TIMEOUT_S).returncode == 0
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    sock = tmp_path / "a.sock"
    agent = subprocess.Popen([DEPUTY, "agent", "--socket", str(sock), "--listen",
                              f"tcp://127.0.0.1:{port}", "--key", str(key)],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(500):
            if sock.exists():
                break
            time.sleep(0.01)
        for where in (str(sock), f"tcp://127.0.0.1:{port}"):
            out = tmp_path / "agent.json"
            result = subprocess.run([DEPUTY, "bench", "mover", "--agent", where, "-s", "4k,64k",
                                     *QUICK, "--out", str(out)], capture_output=True, text=True,
                                    timeout=TIMEOUT_S, env={**os.environ, "DEPUTY_KEY": str(key)})
            assert result.returncode == 0, result.stdout + result.stderr
            assert f"# run by the agent at {where}, staged" in result.stdout
            doc = json.loads(out.read_text())
            assert doc["config"]["agent"] == where
            assert [r["verified"] for r in doc["results"]] == [True, True]
        env = {k: v for k, v in os.environ.items() if k != "DEPUTY_KEY"}
        result = subprocess.run([DEPUTY, "bench", "mover", "--agent", f"tcp://127.0.0.1:{port}",
                                 *QUICK], capture_output=True, text=True, timeout=TIMEOUT_S,
                                env=env)
        assert result.returncode == 2
        assert "DEPUTY_KEY=FILE (or dp_config_t.key_file) names the secure session's key" \
            in result.stderr
    finally:
        agent.kill()
        agent.wait()

