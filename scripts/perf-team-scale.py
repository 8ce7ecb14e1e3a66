#!/usr/bin/env python3
"""Team creation time and one collective's latency against the team size,
on simulated nodes, beside MPI's communicator creation and collective.

    scripts/perf-team-scale.py [--deputy build/tools/deputy] [--nodes 8]
                               [--sizes 2,8,64,256,1024] [--ops 20]
                               [--mpi-max 64] [--layout cyclic|block] [--out FILE]

deputy: --nodes agents as one MPI job on this machine (`mpirun -np K deputy
agent`, one socket each), and for each size N, N contexts in processes of
up to 128 each, rank r attached to node r mod K (cyclic; block: the first
N/K ranks on node 0, ...). Contexts attach first (not timed); then every
rank joins the team at once (a thread per rank) and the creation time is
from that moment to the last join's return; then --ops 8-byte allreduces,
every rank posting and waiting, time per operation. Teams from N = 4096
have no MPI beside them here: a process per rank does not fit this
machine.

MPI: for each size up to --mpi-max, `mpirun -np N` (oversubscribed) of a
small mpi4py program timing MPI_Comm_split of MPI_COMM_WORLD (and
MPI_Comm_dup) and an 8-byte MPI_Allreduce, medians over the ranks' maxima.

The machine's CPUs are shared by everything: these are growth rates
(how each grows with N), not a cluster's times. Needs the Python package
(`python/`), libdeputy.so ($DEPUTY_LIB or next to the package's usual
places), deputy-agent-mpi beside --deputy, Open MPI's mpirun and mpi4py.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PER_PROCESS = 128
CHILD = r"""
import json, sys, threading, time
import numpy as np
import deputy
sockets, secret, key = sys.argv[1].split(","), sys.argv[2], sys.argv[3]
size, ranks, ops = int(sys.argv[4]), [int(r) for r in sys.argv[5].split(",")], int(sys.argv[6])
contexts = [deputy.Context(agent=sockets[i], job_secret=secret, pool_bytes=1 << 20,
                           connect_timeout_ms=60000)
            for i in range(len(ranks))]
print("attached", flush=True)
sys.stdin.readline()  # go
teams, errors = [None] * len(ranks), []
def join(i):
    try:
        teams[i] = deputy.Team(contexts[i], key, ranks[i], size, timeout_ms=300000)
    except Exception as e:  # reported below
        errors.append(str(e))
t0 = time.perf_counter()
threads = [threading.Thread(target=join, args=(i,)) for i in range(len(ranks))]
for t in threads: t.start()
for t in threads: t.join()
create = time.perf_counter() - t0
if errors:
    print(json.dumps({"error": errors[0]}), flush=True)
    sys.exit(1)
src = [deputy.empty(1, dtype=np.float64) for _ in ranks]
dst = [deputy.empty(1, dtype=np.float64) for _ in ranks]
for s, r in zip(src, ranks): s[0] = r
def once():
    reqs = [t.iallreduce(s, d) for t, s, d in zip(teams, src, dst)]
    for q in reqs: q.wait()
once()  # warm-up
t1 = time.perf_counter()
for _ in range(ops): once()
op = (time.perf_counter() - t1) / ops
want = size * (size - 1) / 2
bad = [d[0] for d in dst if d[0] != want]
for t in teams: t.close()
for c in contexts: c.close()
print(json.dumps({"create_s": create, "op_us": op * 1e6, "wrong": len(bad)}), flush=True)
"""
MPI_CHILD = r"""
import json, time
from mpi4py import MPI
import numpy as np
w = MPI.COMM_WORLD
def timed(f):
    w.Barrier()
    t0 = time.perf_counter(); x = f(); dt = time.perf_counter() - t0
    return x, w.allreduce(dt, op=MPI.MAX)
split, s_split = timed(lambda: w.Split(0, w.Get_rank()))
dup, s_dup = timed(lambda: w.Dup())
a, b = np.array([float(w.Get_rank())]), np.zeros(1)
for _ in range(10): split.Allreduce(a, b)
w.Barrier()
t0 = time.perf_counter()
n = %d
for _ in range(n): split.Allreduce(a, b)
op = w.allreduce((time.perf_counter() - t0) / n, op=MPI.MAX)
if w.Get_rank() == 0:
    print(json.dumps({"split_s": s_split, "dup_s": s_dup, "op_us": op * 1e6}), flush=True)
"""


def mpirun() -> list[str]:
    return ["mpirun", "--oversubscribe", "--mca", "btl", "self,vader,tcp"]


def start_agents(deputy: str, nodes: int, work: Path) -> subprocess.Popen:
    config = work / "agents.json"
    # One process holds up to PER_PROCESS contexts, all joining at once.
    config.write_text(json.dumps({"agent": {"max_process_clients": PER_PROCESS,
                                            "max_process_pending_joins": PER_PROCESS,
                                            "max_team_timeout_ms": 600000}}))
    agents = subprocess.Popen(mpirun() + ["-np", str(nodes), deputy, "agent", "--socket",
                                          str(work / "agent.sock"), "--config", str(config)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    sockets = [work / f"agent-node{k}.sock" for k in range(nodes)]
    deadline = time.monotonic() + 30
    while not all(s.exists() for s in sockets):
        if agents.poll() is not None or time.monotonic() > deadline:
            sys.exit(f"perf-team-scale: the agents did not come up: {agents.stderr.read()}")
        time.sleep(0.1)
    return agents


def deputy_size(size: int, nodes: int, layout: str, ops: int, work: Path,
                run: int) -> dict:
    node_of = [r % nodes if layout == "cyclic" else r * nodes // size for r in range(size)]
    children = []
    for lo in range(0, size, PER_PROCESS):
        ranks = list(range(lo, min(size, lo + PER_PROCESS)))
        socks = ",".join(str(work / f"agent-node{node_of[r]}.sock") for r in ranks)
        children.append(subprocess.Popen(
            [sys.executable, "-c", CHILD, socks, "perf-team-scale-secret",
             f"scale-{size}-{run}", str(size), ",".join(map(str, ranks)), str(ops)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True))
    for c in children:
        if c.stdout.readline().strip() != "attached":
            sys.exit(f"perf-team-scale: a process of the {size}-rank team did not attach")
    for c in children:
        c.stdin.write("go\n")
        c.stdin.flush()
    results = []
    for c in children:
        line = c.stdout.readline()
        c.wait()
        r = json.loads(line) if line else {"error": "no answer"}
        if "error" in r:
            sys.exit(f"perf-team-scale: team of {size}: {r['error']}")
        results.append(r)
    if any(r["wrong"] for r in results):
        sys.exit(f"perf-team-scale: team of {size}: wrong allreduce results")
    return {"create_s": max(r["create_s"] for r in results),
            "op_us": max(r["op_us"] for r in results)}


def mpi_size(size: int, ops: int) -> dict | None:
    out = subprocess.run(mpirun() + ["-np", str(size), sys.executable, "-c", MPI_CHILD % ops],
                         capture_output=True, text=True, timeout=600,
                         env=dict(os.environ, OMPI_MCA_rmaps_base_oversubscribe="1"))
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith("{")]
    return json.loads(lines[-1]) if out.returncode == 0 and lines else None


def median(xs: list[float]) -> float:
    xs = sorted(xs)
    return xs[len(xs) // 2]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--deputy", default="build/tools/deputy")
    p.add_argument("--nodes", type=int, default=8)
    p.add_argument("--sizes", default="2,8,64,256,1024")
    p.add_argument("--ops", type=int, default=20)
    p.add_argument("--runs", type=int, default=3, help="runs per size (medians)")
    p.add_argument("--mpi-max", type=int, default=64)
    p.add_argument("--layout", choices=["cyclic", "block"], default="cyclic")
    p.add_argument("--out", help="write the rows as JSON here")
    a = p.parse_args()
    sizes = [int(s) for s in a.sizes.split(",")]
    if a.nodes < 1 or any(s < 1 or s > 16384 for s in sizes):
        sys.exit("perf-team-scale: --nodes at least 1, --sizes each 1..16384")
    for tool in ("mpirun",):
        if not shutil.which(tool):
            sys.exit(f"perf-team-scale: {tool} not found (Debian: openmpi-bin)")
    os.environ.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
    os.environ.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
    work = Path(tempfile.mkdtemp(prefix="deputy-scale-"))
    work.chmod(0o700)
    agents = start_agents(a.deputy, a.nodes, work)
    rows = []
    try:
        print(f"{'ranks':>6} {'create ms':>10} {'allreduce us':>13} {'MPI split ms':>13} "
              f"{'MPI dup ms':>11} {'MPI allreduce us':>17}")
        for n in sizes:
            d = [deputy_size(n, a.nodes, a.layout, a.ops, work, run) for run in range(a.runs)]
            m = [mpi_size(n, a.ops) for _ in range(a.runs)] if n <= a.mpi_max else []
            m = [x for x in m if x]
            row = {"ranks": n, "nodes": a.nodes, "layout": a.layout,
                   "create_ms": median([x["create_s"] * 1e3 for x in d]),
                   "allreduce_us": median([x["op_us"] for x in d])}
            if m:
                row.update({"mpi_split_ms": median([x["split_s"] * 1e3 for x in m]),
                            "mpi_dup_ms": median([x["dup_s"] * 1e3 for x in m]),
                            "mpi_allreduce_us": median([x["op_us"] for x in m])})
            rows.append(row)

            def cell(key: str, width: int) -> str:
                return f"{row[key]:>{width}.2f}" if key in row else f"{'-':>{width}}"
            print(f"{n:>6} {cell('create_ms', 10)} {cell('allreduce_us', 13)} "
                  f"{cell('mpi_split_ms', 13)} {cell('mpi_dup_ms', 11)} "
                  f"{cell('mpi_allreduce_us', 17)}", flush=True)
    finally:
        agents.terminate()
        try:
            agents.wait(timeout=15)
        except subprocess.TimeoutExpired:
            agents.kill()
        shutil.rmtree(work, ignore_errors=True)
    if a.out:
        Path(a.out).write_text(json.dumps({"rows": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
