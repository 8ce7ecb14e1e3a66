"""deputy-bench-mpi (tools/bench/mpi/osu_overlap.c) under plain Open MPI: the
table and the --json document it writes, and the cost of a sleep an idle run
measures first (tools/bench/common/sleep_cost.h), and the blocking forms'
alternating rounds. The library's own runs through it are in tests/launch
and tests/mpi."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

DEPUTY = os.environ.get("DEPUTY_BIN")
MPIRUN = shutil.which("mpirun")
BENCH = (Path(DEPUTY).resolve().parent / "deputy-bench-mpi-openmpi") if DEPUTY else None

pytestmark = pytest.mark.skipif(
    not (MPIRUN and BENCH and BENCH.exists()),
    reason="needs Open MPI's mpirun and deputy-bench-mpi-openmpi beside DEPUTY_BIN")


def run(tmp_path: Path, *args: str) -> tuple[str, dict]:
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_rmaps_base_oversubscribe="1")
    out = tmp_path / "out.json"
    r = subprocess.run([MPIRUN, "-np", "2", str(BENCH), *args, "--json", str(out)], env=env,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return r.stdout, json.loads(out.read_text())


def test_idle_run_measures_a_sleep_first_and_writes_it(tmp_path: Path) -> None:
    stdout, doc = run(tmp_path, "--op", "iallreduce", "-m", "4k:8k", "-i", "5", "-x", "1",
                      "--compute", "idle")
    assert doc["compute"] == "idle" and doc["ranks"] == 2
    sleep = doc["sleep"]
    assert sleep["asked_us"] == 5.0 and sleep["wall_us"] >= 5.0 and sleep["cpu_us"] > 0
    # The table prints one decimal of the measured double, the JSON two:
    # compare the numbers, not their roundings (26.85 in the JSON was 26.8
    # in the table once).
    lasts = re.search(r"^# idle phases sleep: a 5 us sleep lasts ([0-9.]+) us", stdout, re.M)
    assert lasts, stdout
    assert abs(float(lasts.group(1)) - sleep["wall_us"]) <= 0.051
    assert [row["bytes"] for row in doc["rows"]] == [4096, 8192]
    for row in doc["rows"]:
        assert row["mpi"]["pure_us"] > 0 and row["pmpi"]["pure_us"] > 0


@pytest.mark.parametrize("args", [["--op", "iallreduce", "--compute", "cpu"],
                                  ["--op", "allreduce", "--compute", "idle"]])
def test_runs_that_never_sleep_measure_nothing(args: list[str], tmp_path: Path) -> None:
    stdout, doc = run(tmp_path, *args, "-m", "4k:4k", "-i", "5", "-x", "1")
    assert "sleep" not in doc and "sleep lasts" not in stdout
    assert len(doc["rows"]) == 1


def test_blocking_forms_alternate_rounds_and_report_the_median_ratio(tmp_path: Path) -> None:
    stdout, doc = run(tmp_path, "--op", "allreduce", "-m", "8:16", "-i", "30", "-x", "2")
    assert "time_x" in stdout and "x_min" in stdout and "x_max" in stdout
    assert [row["bytes"] for row in doc["rows"]] == [8, 16]
    for row in doc["rows"]:
        # 10 rounds; each side's half 3 calls (-i 30) or, a call timed
        # after the warm-up, as many as last 2 ms: more than 3 unless an
        # 8 B allreduce took over 0.6 ms.
        assert row["rounds"] == 10 and row["calls_per_round"] > 3
        assert row["mpi"]["pure_us"] > 0 and row["pmpi"]["pure_us"] > 0
        assert row["time_x_min"] <= row["time_x"] <= row["time_x_max"]
    _, few = run(tmp_path, "--op", "bcast", "-m", "8:8", "-i", "4", "-x", "0")
    # Fewer iterations than rounds and no warm-up to time: one call each way.
    assert few["rows"][0]["rounds"] == 4 and few["rows"][0]["calls_per_round"] == 1


# Every operation it knows runs under plain MPI (no library: MPI_ and PMPI_
# are the same calls), one row per size, with the column set of its form.
@pytest.mark.parametrize("op", ["ireduce", "igather", "iscatter", "iscan", "iexscan",
                                "iallgatherv", "igatherv", "iscatterv", "reduce", "gather",
                                "scatter", "scan", "exscan", "allgatherv", "gatherv",
                                "scatterv", "iexchange", "exchange"])
def test_every_operation_runs(op: str, tmp_path: Path) -> None:
    _, doc = run(tmp_path, "--op", op, "-m", "4k:8k", "-i", "3", "-x", "1")
    assert doc["op"] == op and len(doc["rows"]) == 2, doc
    key = "overall_us" if op.startswith("i") else "pure_us"
    assert all(row["mpi"][key] > 0 and row["pmpi"][key] > 0 for row in doc["rows"]), doc

