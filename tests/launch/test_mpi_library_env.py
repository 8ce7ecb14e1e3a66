"""libdeputy-mpi's environment, end to end (docs/mpi.md "Environment").

An MPI program (deputy-bench-mpi-openmpi, built beside DEPUTY_BIN; only
mpi.h) under plain mpirun with the library preloaded and no agent at
DEPUTY_AGENT: it warns once and runs everything on MPI, with the reason in
the report; DEPUTY_MPI_REQUIRE=1 makes that fatal; a malformed
DEPUTY_MPI_THRESHOLDS stops it at MPI_Init naming the item.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

DEPUTY = os.environ.get("DEPUTY_BIN")
MPIRUN = shutil.which("mpirun")
BUILD = Path(DEPUTY).resolve().parent.parent if DEPUTY else None
LIB = BUILD / "src/mpi/libdeputy-mpi-openmpi.so" if BUILD else None
BENCH = BUILD / "tools/deputy-bench-mpi-openmpi" if BUILD else None

pytestmark = pytest.mark.skipif(
    not (DEPUTY and MPIRUN and LIB and LIB.exists() and BENCH and BENCH.exists()),
    reason="needs DEPUTY_BIN, Open MPI's mpirun, libdeputy-mpi-openmpi.so and "
    "deputy-bench-mpi-openmpi built beside it")


def run(tmp_path: Path, extra_env: dict[str, str]) -> subprocess.CompletedProcess:
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_rmaps_base_oversubscribe="1")
    env["DEPUTY_AGENT"] = str(tmp_path / "nobody-listens.sock")
    env.update(extra_env)
    cmd = [MPIRUN, "-np", "2"]
    for name in ("DEPUTY_AGENT", *extra_env):
        cmd += ["-x", name]
    cmd += ["-x", f"LD_PRELOAD={LIB}", str(BENCH), "--op", "iallreduce", "-m", "64k:64k",
            "-i", "2", "-x", "1"]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)


def test_no_agent_warns_once_and_passes_everything_to_mpi(tmp_path):
    report = tmp_path / "report"
    report.mkdir()
    r = run(tmp_path, {"DEPUTY_MPI_REPORT": f"json:{report}"})
    assert r.returncode == 0, r.stderr
    assert "65536" in r.stdout  # the benchmark's row: the program ran to its end
    warnings = [line for line in r.stderr.splitlines() if "reached no deputy agent" in line]
    assert len(warnings) == 1, r.stderr
    assert "2 of 2 ranks" in warnings[0] and "nobody-listens.sock" in warnings[0]
    for rank in (0, 1):
        data = json.loads((report / f"deputy-mpi-rank{rank}.json").read_text())
        assert data["agent"] is None
        ops = data["operations"]["MPI_Iallreduce"]
        assert ops["offloaded"] == 0
        assert ops["passed"]["no agent"] > 0


def test_require_makes_a_missing_agent_fatal(tmp_path):
    r = run(tmp_path, {"DEPUTY_MPI_REQUIRE": "1"})
    assert r.returncode != 0
    assert "DEPUTY_MPI_REQUIRE=1 and no deputy agent at" in r.stderr, r.stderr


def test_a_malformed_threshold_is_named(tmp_path):
    r = run(tmp_path, {"DEPUTY_MPI_THRESHOLDS": "allreduce=64k,iallgathr=0"})
    assert r.returncode != 0
    assert "DEPUTY_MPI_THRESHOLDS: unknown operation 'iallgathr'" in r.stderr, r.stderr
    r = run(tmp_path, {"DEPUTY_MPI_THRESHOLDS": "allreduce=lots"})
    assert r.returncode != 0
    assert "'allreduce=lots': the bytes must be a number" in r.stderr, r.stderr
