"""End-to-end tests of `deputy bench coll` (DEPUTY_BIN), an MPI program.

The MPI paths first (they need no agent): MPI's own collectives and the
ring allreduce on 2 and 3 ranks, every result validated (#wrong 0), the
nccl-tests columns and bus factors, the OSU overlap columns and formula,
the all-to-all buffer print in the layout of DOCA's DPA sample, the
allreduce table (--allreduce-table), --json flag files and --out results,
and usage errors that name the flag. Then the deputy paths against a real
agent (`deputy agent --daemon`). Runs are tiny (a few iterations) and
bounded by timeouts; the whole file takes well under 60 s.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
from pathlib import Path

import pytest

DEPUTY = os.environ.get("DEPUTY_BIN")
MPIRUN = shutil.which("mpirun")
TIMEOUT_S = 60

pytestmark = [
    pytest.mark.skipif(not DEPUTY, reason="DEPUTY_BIN is not set: point it at a built deputy "
                                          "binary (e.g. DEPUTY_BIN=build/tools/deputy)"),
    pytest.mark.skipif(MPIRUN is None, reason="mpirun not found (Debian: openmpi-bin "
                                              "libopenmpi-dev; scripts/deps.sh installs them)"),
]

# Open MPI refuses root without these; --oversubscribe lets 3 ranks share 2 cores.
MPI_ENV = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
           "OMPI_MCA_rmaps_base_oversubscribe": "1"}
QUICK = ["-i", "5", "-x", "1"]
MPI_ONLY = ["--no-deputy", "--compare", "mpi"]


@pytest.fixture(scope="module", autouse=True)
def built_with_mpi():
    if DEPUTY and not (Path(DEPUTY).parent / "deputy-bench-coll").exists():
        pytest.skip("deputy-bench-coll is not next to DEPUTY_BIN: CMake did not find MPI")


def coll(*args: str, ranks: int | None = 2, env: dict | None = None,
         timeout: float = TIMEOUT_S) -> subprocess.CompletedProcess:
    """`deputy bench coll ARGS`, under mpirun unless ranks is None (singleton)."""
    cmd = [DEPUTY, "bench", "coll", *args]
    if ranks is not None:
        cmd = [MPIRUN, "-np", str(ranks), *cmd]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **MPI_ENV, **(env or {})})


def run_ok(tmp_path: Path, *args: str, ranks: int = 2, env: dict | None = None):
    out = tmp_path / "out.json"
    r = coll(*args, "--out", str(out), ranks=ranks, env=env)
    assert r.returncode == 0, f"{args}: exit {r.returncode}\n{r.stdout}\n{r.stderr}"
    doc = json.loads(out.read_text())
    for row in doc["results"]:
        assert row.get("wrong", 0) == 0, f"{args}: wrong elements in {row}"
    return r.stdout, doc


def fails_naming(expected: str, *args: str, ranks: int | None = None) -> str:
    r = coll(*args, ranks=ranks)
    text = r.stdout + r.stderr
    assert r.returncode != 0, f"{args} should fail\n{text}"
    assert expected in text, f"{args}: message does not name {expected!r}:\n{text}"
    return text


def table_rows(stdout: str) -> list[list[str]]:
    return [line.split() for line in stdout.splitlines() if line and not line.startswith("#")]


# ---------------------------------------------------------------- MPI paths

def test_help_names_the_flags() -> None:
    r = coll("--help", ranks=None)
    assert r.returncode == 0, r.stderr
    for flag in ["--op", "-m,--message-size", "--compare", "--memory", "--compute",
                 "--print-buffers", "--allreduce-table", "--check", "--json", "--out", "-t,"]:
        assert flag in r.stdout, flag


@pytest.mark.parametrize("args,expected", [
    (["--op", "allreduc"], "--op allreduc"),
    (["-d", "float128"], "-d float128"),
    (["--redop", "avg"], "--redop avg"),
    (["--memory", "gpu"], "--memory gpu"),
    (["--compute", "busy"], "--compute busy"),
    (["--compare", "nccl"], "--compare nccl"),
    (["--wait", "sleepy"], "--wait sleepy"),
    (["-m", "64:8"], "-m 64:8"),
    (["-m", "4x"], "-m 4x"),
    (["--factor", "1"], "--factor 1"),
    (["--no-deputy"], "--no-deputy"),
    (["--max", "1g"], "--max"),
    (["--allreduce-table", "--op", "alltoall"], "--allreduce-table"),
    (["--allreduce-table", "--max", "4g"], "--max 4g"),
    (["--root", "5", "--op", "bcast", *MPI_ONLY], "--root 5"),
    (["--op", "alltoall", "-d", "bfloat16", *MPI_ONLY], "-d bfloat16"),
    (["--load", "1m,2x"], "--load 2x"),
    (["--load", "2"], "--load 2"),
])
def test_usage_errors_name_the_flag(args: list[str], expected: str) -> None:
    fails_naming(expected, *args)


def test_json_flags_and_bad_keys(tmp_path: Path) -> None:
    flags = tmp_path / "flags.json"
    flags.write_text(json.dumps({"op": "alltoall", "message-size": "64:256", "iterations": 5,
                                 "warmup": 1, "no-deputy": True, "compare": "mpi",
                                 "dtype": "int32"}))
    stdout, doc = run_ok(tmp_path, "--json", str(flags), "-i", "3")  # the command line wins
    cfg = doc["config"]
    assert (cfg["op"], cfg["message_size"], cfg["iterations"], cfg["dtype"]) == \
        ("alltoall", "64:256", 3, "int32")
    assert [r["size"] for r in doc["results"]] == [64, 128, 256]
    flags.write_text(json.dumps({"op": "allreduce", "colour": "blue"}))
    fails_naming("colour", "--json", str(flags))


def test_allreduce_table_mpi_and_ring_side_by_side(tmp_path: Path) -> None:
    stdout, doc = run_ok(tmp_path, *MPI_ONLY, "-m", "8:4k", *QUICK)
    header = [line for line in stdout.splitlines() if line.startswith("#") and "#wrong" in line]
    assert header and all(c in header[0] for c in ["size", "count", "time", "algbw", "busbw",
                                                    "ring/mpi"]), stdout
    rows = table_rows(stdout)
    assert [int(r[0]) for r in rows] == [8 << k for k in range(10)]
    for r in rows:  # size count | time algbw busbw #wrong | x2 | ratio
        assert len(r) == 11 and r[5] == "0" and r[9] == "0" and r[10].endswith("x"), r
    assert doc["benchmark"] == "coll"
    assert "Open MPI" in doc["versions"]["mpi"] and "\x00" not in doc["versions"]["mpi"]
    assert doc["versions"]["deputy"]
    assert doc["host"]["hostname"] and doc["config"]["ranks"] == 2
    impls = {(r["impl"], r["size"]) for r in doc["results"]}
    assert impls == {(i, 8 << k) for i in ["mpi", "ring"] for k in range(10)}
    for r in doc["results"]:
        assert r["busbw_gbps"] == pytest.approx(r["algbw_gbps"] * 2 * (2 - 1) / 2)
        assert r["algbw_gbps"] == pytest.approx(r["size"] / (r["time_us"] * 1e3))


@pytest.mark.parametrize("op,factor,formula", [
    ("allreduce", 4 / 3, "2(n-1)/n"), ("reduce_scatter", 2 / 3, "(n-1)/n"),
    ("allgather", 2 / 3, "(n-1)/n"), ("alltoall", 2 / 3, "(n-1)/n"),
    ("alltoallv", 2 / 3, "(n-1)/n"), ("bcast", 1.0, "1")])
def test_bus_factors_on_three_ranks(op: str, factor: float, formula: str, tmp_path: Path) -> None:
    out, doc = run_ok(tmp_path, *MPI_ONLY, "--op", op, "-m", "3k:12k", *QUICK, "--root", "2",
                      ranks=3)
    # The note under the table names the factor the rows used (one table row).
    assert f"busbw = algbw x {formula} (nccl-tests)" in out, out
    rows = [r for r in doc["results"] if r["impl"] == "mpi"]
    assert rows
    for r in rows:
        assert r["busbw_gbps"] == pytest.approx(r["algbw_gbps"] * factor)
        if op in ("reduce_scatter", "allgather", "alltoall", "alltoallv"):
            assert r["size"] == 3 * r["count"] * 4  # n blocks of count float32


@pytest.mark.parametrize("dtype,redop,sizes", [
    ("float32", "sum", "4:64k"), ("int8", "prod", "1:1k"), ("uint16", "min", "2:2k"),
    ("float64", "max", "8:8k"), ("int64", "sum", "8:8k"),
])
def test_ring_and_mpi_correct_for_counts_not_divisible_by_ranks(dtype, redop, sizes, tmp_path):
    # Counts 1, 2, 4, ... are never multiples of 3: uneven (and empty) ring segments.
    _, doc = run_ok(tmp_path, *MPI_ONLY, "-d", dtype, "--redop", redop, "-m", sizes,
                    "-i", "3", "-x", "1", ranks=3)
    assert {r["impl"] for r in doc["results"]} == {"mpi", "ring"}
    assert any(r["count"] == 1 for r in doc["results"])


def test_check_every_iteration(tmp_path: Path) -> None:
    stdout, doc = run_ok(tmp_path, *MPI_ONLY, "--op", "reduce_scatter", "-m", "1k:4k", "--check",
                         *QUICK)
    assert "every iteration (--check)" in stdout and doc["config"]["check"] is True


def test_float16_has_no_mpi_type_ring_still_runs(tmp_path: Path) -> None:
    stdout, doc = run_ok(tmp_path, *MPI_ONLY, "-d", "float16", "-m", "64:256", *QUICK)
    assert "MPI has no float16 datatype" in stdout
    by_impl = {r["impl"]: r for r in doc["results"] if r["size"] == 64}
    assert "skipped" in by_impl["mpi"] and by_impl["ring"]["wrong"] == 0


@pytest.mark.parametrize("compute", ["cpu", "idle"])
def test_nonblocking_osu_columns_and_overlap_formula(compute: str, tmp_path: Path) -> None:
    stdout, doc = run_ok(tmp_path, *MPI_ONLY, "--op", "iallreduce", "-m", "1k:16k", "-i", "20",
                         "-x", "2", "-t", "3", "--compute", compute)
    for col in ["Overall(us)", "Compute(us)", "Coll. Init(us)", "Test(us)", "Wait(us)",
                "Pure Comm.(us)", "Overlap(%)", "Host CPU(us)", "Poll CPU(us)", "Wait CPU(us)",
                "algbw", "busbw", "#wrong"]:
        assert col in stdout, col
    assert f"{compute} (" in stdout
    for r in doc["results"]:
        parts = r["coll_init_us"] + r["compute_us"] + r["test_us"] + r["wait_us"]
        assert parts == pytest.approx(r["overall_us"], rel=0.05, abs=1.0)
        osu = max(0.0, 100 - 100 * (r["overall_us"] - r["compute_us"]) / r["pure_comm_us"])
        assert r["overlap_pct"] == pytest.approx(osu)
        assert r["pure_comm_us"] == r["time_us"] and r["host_cpu_us"] >= 0 and r["wait_cpu_us"] >= 0
        # Polls are the tests that found the operation not done: the -t calls
        # during the compute at most, plus the slices after it.
        assert r["polls_per_op"] >= 0 and r["poll_cpu_us"] >= 0
        if r["polls_per_op"] == 0:
            assert r["poll_cpu_us"] == 0
        assert r["compute_us"] > 0.5 * r["pure_comm_us"]  # compute ~ pure comm. time
    # An idle run measures what a short sleep costs here (a sleep lasts at
    # least as long as asked); a cpu run does not sleep.
    sleep = doc["config"].get("sleep")
    if compute == "idle":
        assert sleep["asked_us"] == 5.0 and sleep["wall_us"] >= 5.0 and sleep["cpu_us"] > 0
        assert f"a 5 us sleep lasts {sleep['wall_us']:.1f} us" in stdout
    else:
        assert sleep is None and "sleep lasts" not in stdout


@pytest.mark.parametrize("op", ["ialltoall", "iallgather", "ibcast", "ireduce_scatter",
                                "ibarrier"])
def test_every_nonblocking_op_runs_on_mpi(op: str, tmp_path: Path) -> None:
    _, doc = run_ok(tmp_path, *MPI_ONLY, "--op", op, "-m", "256:1k", *QUICK)
    assert doc["results"] and all(r["nonblocking"] for r in doc["results"])


def parse_buffers(stdout: str) -> dict[str, list[list[int]]]:
    blocks: dict[str, list[list[int]]] = {}
    current = None
    for line in stdout.splitlines():
        m = re.match(r"^\s+----(send|recv) buffs---$", line)
        if m:
            current = blocks.setdefault(m.group(1), [])
            continue
        m = re.match(r"^ Rank (\d+) \|(.*)$", line)
        if m and current is not None:
            assert int(m.group(1)) == len(current), "ranks out of order"
            current.append([int(v) for v in m.group(2).split()])
    return blocks


def test_print_buffers_alltoall_in_the_dpa_samples_layout(tmp_path: Path) -> None:
    # As DOCA's DPA all-to-all sample: 4 ranks, -m 32 -> 8 int32 per rank, 2 per destination,
    # after its log line "Number of processes = 4," (in DOCA's log format on request).
    r = coll(*MPI_ONLY, "--op", "alltoall", "-d", "int32", "-m", "32:32", "--print-buffers",
             "--log-format", "doca", *QUICK, ranks=4)
    assert r.returncode == 0, r.stdout + r.stderr
    stdout = r.stdout
    said = re.findall(r"^\[\d\d:\d\d:\d\d:\d{6}\]\[\d+\]\[app\]\[INF\]\[main\.cc:\d+\]\[\w+\] "
                      r"Number of processes = (\d+),$", r.stderr, re.M)
    assert said == ["4"], r.stderr  # once, by rank 0
    buf = parse_buffers(stdout)
    send, recv = buf["send"], buf["recv"]
    assert len(send) == len(recv) == 4 and all(len(row) == 8 for row in send + recv)
    for r in range(4):  # recv block m of rank r = send block r of rank m
        for m in range(4):
            assert recv[r][2 * m:2 * m + 2] == send[m][2 * r:2 * r + 2]


def test_allreduce_table_columns_and_sizes(tmp_path: Path) -> None:
    stdout, doc = run_ok(tmp_path, "--allreduce-table", "--no-deputy", "--max", "32k")
    lines = stdout.splitlines()
    # As the ring-allreduce article's program: each rank's node first, then the table.
    host = socket.gethostname()
    first_row = next(i for i, line in enumerate(lines) if "DataSize(Bytes)" in line)
    assert [line for line in lines if line.startswith("Hostname:")] == [f"Hostname: {host}"] * 2
    assert all(line.startswith(("#", "Hostname: ")) for line in lines[:first_row]), stdout
    head = [line for line in lines if "DataSize(Bytes)" in line]
    assert head and head[0].split("  ") and re.search(
        r"DataSize\(Bytes\)\s+Num of float\s+Native Allreduce\s+Ring Allreduce\s+"
        r"deputy Allreduce", head[0])
    rows = [line.split() for line in lines if re.match(r"^\s+\d+\s+\d+\s", line)]
    assert [int(r[0]) for r in rows] == [128, 512, 2048, 8192, 32768]
    assert all(int(r[1]) == int(r[0]) // 4 and r[2].endswith("us") and r[4] == "-" for r in rows)
    assert {r["mode"] for r in doc["results"]} == {"allreduce-table"}


def test_refuses_sizes_this_node_cannot_hold() -> None:
    text = fails_naming("MemAvailable", *MPI_ONLY, "--op", "alltoall", "-m", "64g:64g")
    assert "-m 64g:64g needs" in text and "GiB" in text


def test_deputy_bench_coll_needs_its_program(tmp_path: Path) -> None:
    lone = tmp_path / "deputy"
    shutil.copy(DEPUTY, lone)
    r = subprocess.run([str(lone), "bench", "coll", "--help"], capture_output=True, text=True,
                       timeout=TIMEOUT_S)
    assert r.returncode != 0 and "deputy-bench-coll not found" in r.stdout + r.stderr


def test_under_deputy_launch_it_asks_for_mpirun() -> None:
    # deputy launch ranks are MPI singletons; the benchmark needs MPI ranks.
    if subprocess.run([DEPUTY, "launch", "--help"], capture_output=True).returncode != 0:
        pytest.skip("this deputy has no launch command")
    r = subprocess.run([DEPUTY, "launch", "-n", "2", "--timeout", "30", "--", DEPUTY, "bench",
                        "coll", *MPI_ONLY], capture_output=True, text=True, timeout=TIMEOUT_S,
                       env={**os.environ, **MPI_ENV})
    assert r.returncode != 0 and "run it under mpirun -np 2" in r.stdout + r.stderr


# ------------------------------------------------------------- deputy paths

@pytest.fixture(scope="module")
def agent():
    d = Path(tempfile.mkdtemp(prefix="deputy-bcoll-"))
    sock = d / "a.sock"
    r = subprocess.run([DEPUTY, "agent", "--daemon", "--socket", str(sock), "--log-file",
                        str(d / "log")], capture_output=True, text=True, timeout=TIMEOUT_S)
    if r.returncode != 0:
        shutil.rmtree(d, ignore_errors=True)
        pytest.fail(f"deputy agent --daemon failed: {r.stdout}{r.stderr}")
    pid = int((d / "agent.pid").read_text())
    yield {"DEPUTY_AGENT": str(sock)}
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    shutil.rmtree(d, ignore_errors=True)


def deputy_ok(tmp_path: Path, agent_env: dict, *args: str, ranks: int = 2):
    out = tmp_path / "out.json"
    r = coll(*args, "--out", str(out), ranks=ranks, env=agent_env)
    assert r.returncode == 0, f"{args}: exit {r.returncode}\n{r.stdout}\n{r.stderr}"
    doc = json.loads(out.read_text())
    for row in doc["results"]:
        assert row.get("wrong", 0) == 0, f"{args}: wrong elements in {row}"
    return r.stdout, doc


def test_the_placement_is_found_from_the_agent_and_the_ranks_cpus(agent, tmp_path: Path) -> None:
    """config.placement: "shared" when the agent's engines may run where the ranks do,
    "own-core" when they are pinned to CPUs no rank may use; absent without deputy."""
    _, doc = deputy_ok(tmp_path, agent, "--op", "allreduce", "-m", "8:8", *QUICK)
    assert doc["config"]["placement"] == "shared"
    _, mpi_only = run_ok(tmp_path, *MPI_ONLY, "-m", "8:8", *QUICK)
    assert "placement" not in mpi_only["config"]
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        pytest.skip("one CPU: no core to give the agent")
    d = Path(tempfile.mkdtemp(prefix="deputy-bcoll-own-"))
    try:
        r = subprocess.run([DEPUTY, "agent", "--daemon", "--socket", str(d / "a.sock"),
                            "--agent-cores", "last"], capture_output=True, text=True,
                           timeout=TIMEOUT_S)
        assert r.returncode == 0, r.stdout + r.stderr
        out = tmp_path / "own.json"
        ranks = ",".join(str(c) for c in cpus[:-1])
        r = subprocess.run(["taskset", "-c", ranks, MPIRUN, "-np", "2", "--bind-to", "none",
                            DEPUTY, "bench", "coll", "--op", "allreduce", "-m", "8:8", *QUICK,
                            "--out", str(out)], capture_output=True, text=True,
                           timeout=TIMEOUT_S,
                           env={**os.environ, **MPI_ENV, "DEPUTY_AGENT": str(d / "a.sock")})
        assert r.returncode == 0, r.stdout + r.stderr
        assert json.loads(out.read_text())["config"]["placement"] == "own-core"
    finally:
        pid = d / "agent.pid"
        if pid.exists():
            try:
                os.kill(int(pid.read_text()), signal.SIGKILL)
            except ProcessLookupError:
                pass
        shutil.rmtree(d, ignore_errors=True)


@pytest.mark.parametrize("memory,wait",
                         [("mapped", "spin"), ("direct", "block"), ("staged", "block")])
def test_deputy_allreduce_against_mpi(memory: str, wait: str, agent, tmp_path: Path) -> None:
    stdout, doc = deputy_ok(tmp_path, agent, "--compare", "mpi", "--memory", memory,
                            "--wait", wait, "-m", "8:64k", *QUICK)
    assert doc["config"]["memory"] == memory and doc["config"]["wait"] == wait
    assert {r["impl"] for r in doc["results"]} == {"deputy", "mpi", "ring"}
    assert "deputy/mpi" in stdout
    for r in doc["results"]:
        if r["impl"] == "deputy":
            assert r["time_vs_mpi"] > 0


def test_deputy_iallreduce_overlap_with_test_calls(agent, tmp_path: Path) -> None:
    stdout, doc = deputy_ok(tmp_path, agent, "--op", "iallreduce", "--compare", "mpi",
                            "-m", "4k:64k", "-i", "10", "-x", "2", "-t", "2", "--compute", "idle")
    rows = [r for r in doc["results"] if r["impl"] == "deputy"]
    assert rows and all(0 <= r["overlap_pct"] <= 100 and "overall_vs_mpi" in r for r in rows)


def test_deputy_beside_streaming_teams(agent, tmp_path: Path) -> None:
    """--load: the first of three teams of 2 is measured alone, then beside two teams
    streaming allreduces; the summary compares, reports each streaming team and the
    engines' shares; the JSON labels each row."""
    stdout, doc = deputy_ok(tmp_path, agent, "-m", "8:64", "--load", "64k,1m", *QUICK,
                            ranks=6)
    assert doc["config"]["load"] == "64k,1m"
    assert [r["load"] for r in doc["results"]] == ["alone"] * 4 + ["64k,1m"] * 4
    assert "2 team(s) of 2 rank(s)" in stdout
    assert len(re.findall(r"# beside the load / alone, deputy p99, \d+ B: [0-9.]+x", stdout)) == 4
    teams = doc["load"]["teams"]
    assert [(t["team"], t["bytes"]) for t in teams] == [(1, 65536), (2, 1 << 20)]
    assert all(t["operations"] >= 1 and t["seconds"] > 0 for t in teams)
    assert re.search(r"# load team 2: \d+ allreduce\(s\) of 1M", stdout)
    assert "# the agent's engines beside the load: engine 0 " in stdout


def test_load_needs_teams_of_equal_size(agent) -> None:
    r = coll("--load", "64k", *QUICK, ranks=3, env=agent)
    assert r.returncode != 0
    assert "the 3 ranks must split into 2 teams of equal size" in r.stdout + r.stderr


@pytest.mark.parametrize("op", ["reduce_scatter", "allgather", "alltoall", "bcast", "barrier",
                                "ialltoall", "ibcast", "ibarrier", "alltoallv", "ialltoallv",
                                "allgatherv", "igatherv", "iscatterv"])
def test_deputy_every_op(op: str, agent, tmp_path: Path) -> None:
    deputy_ok(tmp_path, agent, "--op", op, "-m", "64:4k", "--root", "1", *QUICK)


@pytest.mark.parametrize("op", ["iallgatherv", "gatherv", "iscatterv", "ireduce_scatterv"])
def test_deputy_vector_gathers_beside_mpi_validated(op: str, agent, tmp_path: Path) -> None:
    # Equal counts (the size rule), checked on every iteration against the
    # plain forms' layouts, beside MPI's own vector call, root 1 of 3.
    for memory in ("mapped", "staged"):
        stdout, doc = deputy_ok(tmp_path, agent, "--op", op, "--compare", "mpi", "--root", "1",
                                "--memory", memory, "-m", "12:12k", "--check", *QUICK, ranks=3)
        rows = [r for r in doc["results"] if not r.get("skipped")]
        assert {r["impl"] for r in rows} == {"deputy", "mpi"}, stdout
        assert all(r["wrong"] == 0 for r in rows), stdout


def test_deputy_alltoallv_beside_mpi_alltoallv_validated(agent, tmp_path: Path) -> None:
    # Equal counts (the size rule): deputy's alltoallv and MPI_Alltoallv, both
    # checked on every iteration, on 3 ranks and in staged memory too; src/coll
    # has no schedule for it, which --sched says instead of figures.
    for memory in ("mapped", "staged"):
        stdout, doc = deputy_ok(tmp_path, agent, "--op", "ialltoallv", "--compare", "mpi",
                                "--sched", "--memory", memory, "-m", "12:12k", "--check",
                                *QUICK, ranks=3)
        rows = doc["results"]
        assert {r["impl"] for r in rows if not r.get("skipped")} == {"deputy", "mpi"}, stdout
        assert all(r["wrong"] == 0 for r in rows if not r.get("skipped")), stdout
        assert all(r["size"] == 3 * r["count"] * 4 for r in rows), stdout
        sched = [r for r in rows if r["impl"] == "sched"]
        assert sched and all(r["skipped"] == "src/coll has no schedule for alltoallv"
                             for r in sched), sched


def test_deputy_alltoall_prints_buffers(agent, tmp_path: Path) -> None:
    stdout, _ = deputy_ok(tmp_path, agent, "--op", "alltoall", "-d", "int32", "-m", "16:16",
                          "--print-buffers", *QUICK)
    buf = parse_buffers(stdout)
    assert len(buf["recv"]) == 2 and buf["recv"][1][0:2] == buf["send"][0][2:4]


def test_deputy_staged_memory_runs_every_op_validated(agent, tmp_path: Path) -> None:
    # Staged: plain malloc buffers, copied through bounce buffers in the pool.
    for op in ("iallreduce", "alltoall", "ibcast", "reduce_scatter"):
        _, doc = deputy_ok(tmp_path, agent, "--op", op, "--memory", "staged", "-m", "8:256k",
                           *QUICK)
        assert doc["config"]["memory"] == "staged" and doc["results"], op

def test_sched_runs_src_coll_schedules_on_the_host_ranks(agent, tmp_path: Path) -> None:
    # --sched: deputy's own algorithms run by the host ranks over MPI p2p, validated,
    # beside MPI, with the algorithm the selector chose per size in the JSON.
    stdout, doc = deputy_ok(tmp_path, agent, "--op", "allreduce", "--compare", "mpi", "--sched",
                            "-m", "8:256k", "--factor", "32", *QUICK)
    ran = {r["size"]: r.get("algorithm") for r in doc["results"] if r["impl"] == "sched"}
    assert ran[8] == "recursive_doubling" and ran[262144] == "rabenseifner", ran
    assert "sched/mpi" in stdout
    _, doc = deputy_ok(tmp_path, agent, "--op", "ialltoall", "--host-algorithm", "bruck",
                       "-m", "24:24k", "--factor", "32", *QUICK, ranks=3)
    assert {r.get("algorithm") for r in doc["results"] if r["impl"] == "sched"} == {"bruck"}


SCHED_MATRIX = [("allreduce", a) for a in ("ring", "recursive_doubling", "rabenseifner")] + [
    ("reduce_scatter", "ring"), ("allgather", "ring"), ("allgather", "recursive_doubling"),
    ("alltoall", "pairwise"), ("alltoall", "bruck"), ("bcast", "binomial"), ("bcast", "chain"),
    ("barrier", "dissemination")]


@pytest.mark.parametrize("ranks", [3, 8])
@pytest.mark.parametrize("op,algorithm", SCHED_MATRIX)
def test_every_schedule_over_mpi_validates(op: str, algorithm: str, ranks: int,
                                           tmp_path: Path) -> None:
    # Every src/coll algorithm run by the host ranks over MPI point-to-point
    # (no agent): odd counts (1, 5, 25, ... elements), fewer elements than
    # ranks, every iteration checked (--check).
    out = tmp_path / "out.json"
    r = coll("--no-deputy", "--host-algorithm", algorithm, "--op", op, "-d", "int32",
             "-m", "4:100k", "--factor", "5", "-i", "2", "-x", "0", "--check", "--out", str(out),
             ranks=ranks)
    assert r.returncode == 0, f"{op} {algorithm} x{ranks}: {r.stdout}\n{r.stderr}"
    rows = [row for row in json.loads(out.read_text())["results"] if row["impl"] == "sched"]
    assert rows and all(row["wrong"] == 0 and row["algorithm"] == algorithm for row in rows), rows


@pytest.mark.parametrize("ranks", [2, 4, 7])
def test_allreduce_schedules_on_more_team_sizes(ranks: int, tmp_path: Path) -> None:
    for algorithm in ("ring", "recursive_doubling", "rabenseifner"):
        out = tmp_path / f"{algorithm}.json"
        r = coll("--no-deputy", "--host-algorithm", algorithm, "--op", "iallreduce", "-d",
                 "float32", "-m", "4:100k", "--factor", "5", "-i", "2", "-x", "0", "--check",
                 "--out", str(out), ranks=ranks)
        assert r.returncode == 0, f"{algorithm} x{ranks}: {r.stdout}\n{r.stderr}"
        rows = [row for row in json.loads(out.read_text())["results"] if row["impl"] == "sched"]
        assert rows and all(row["wrong"] == 0 for row in rows), rows
