"""Every benchmark's `--out` document has the one envelope that
tools/common/result_document.h builds: which benchmark, the schema, every
flag resolved, the versions (deputy's first), the host, and the rows. A
reader (python/deputy_tools) relies on it; a benchmark that built its own
would fail here."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

DEPUTY = os.environ.get("DEPUTY_BIN")
MPIRUN = shutil.which("mpirun")
TIMEOUT_S = 120

pytestmark = pytest.mark.skipif(
    not DEPUTY, reason="DEPUTY_BIN is not set: point it at a built deputy binary "
                       "(e.g. DEPUTY_BIN=build/tools/deputy)")

# The quickest run of each, as its own tests run it.
RUNS = {
    "mover": ["-s", "4k", "-n", "4", "-i", "20", "--reps", "1"],
    "channel": ["--loopback", "-n", "200", "-s", "100", "--transport", "shm"],
    "rail": ["--loopback", "--provider", "tcp", "--rails", "1", "--pages", "16",
             "--page-size", "4k", "--repeat", "2", "-q"],
    "coll": ["--op", "allreduce", "-m", "8:8", "-i", "2", "-x", "0", "--no-deputy",
             "--compare", "mpi"],
}


def run(name: str, out: Path) -> subprocess.CompletedProcess:
    cmd = [DEPUTY, "bench", name, *RUNS[name], "--out", str(out)]
    if name == "coll":
        if MPIRUN is None:
            pytest.skip("mpirun not found (Debian: openmpi-bin)")
        if not (Path(DEPUTY).parent / "deputy-bench-coll").exists():
            pytest.skip("deputy-bench-coll is not next to DEPUTY_BIN: CMake did not find MPI")
        cmd = [MPIRUN, "--oversubscribe", "-np", "2", *cmd]
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    return subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT_S, env=env)


@pytest.mark.parametrize("name", sorted(RUNS))
def test_out_document_has_the_common_envelope(name: str, tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    r = run(name, out)
    assert r.returncode == 0, f"exit {r.returncode}\n{r.stdout}\n{r.stderr}"
    doc = json.loads(out.read_text())
    assert doc["benchmark"] == name
    assert doc["schema"] == 1
    assert isinstance(doc["config"], dict) and doc["config"], doc["config"]
    assert isinstance(doc["versions"]["deputy"], str) and doc["versions"]["deputy"]
    for key in ("hostname", "kernel", "machine", "cpus", "timestamp"):
        assert key in doc["host"], (key, doc["host"])
    assert doc["results"], "no rows"
