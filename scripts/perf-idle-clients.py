#!/usr/bin/env python3
"""What idle attached clients cost an agent: its CPU and its memory.

    scripts/perf-idle-clients.py [--deputy build/tools/deputy] [--clients 128]
                                 [--seconds 20] [--out FILE]

Starts a private agent (`deputy agent --daemon`), attaches --clients
contexts from processes of 64 each (an agent's max_process_clients), lets
them sit idle for --seconds and reads, from /proc: the agent's CPU time over
that window (share of one core), its resident memory before and after the
clients attached, and the node's shared memory (the clients' segments and
pools are memfds, counted as Shmem) before and after. A client that never
allocates commits only its segment (ring and header) and what the agent
keeps for it. Needs the Python package (`python/`) and libdeputy.so
($DEPUTY_LIB or next to the package's usual places).
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

PER_PROCESS = 64
CHILD = r"""
import sys, deputy
contexts = [deputy.Context(agent=sys.argv[1]) for _ in range(int(sys.argv[2]))]
print("attached", flush=True)
sys.stdin.read()  # until the parent closes it
for c in contexts:
    c.close()
"""


def meminfo_kib(key: str) -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    return 0


def status_kib(pid: int, key: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    return 0


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--deputy", default="build/tools/deputy", help="the deputy binary")
    ap.add_argument("--clients", type=int, default=128, help="contexts attached (1..256)")
    ap.add_argument("--seconds", type=float, default=20.0, help="idle window measured")
    ap.add_argument("--out", help="write the figures as JSON here")
    a = ap.parse_args()
    if not 1 <= a.clients <= 256:
        ap.error(f"--clients {a.clients}: 1..256 (an agent's max_clients)")
    if a.seconds <= 0:
        ap.error(f"--seconds {a.seconds}: must be positive")
    d = Path(tempfile.mkdtemp(prefix="deputy-idle-"))
    sock = d / "a.sock"
    r = subprocess.run([a.deputy, "agent", "--daemon", "--socket", str(sock)],
                       capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        print(f"perf-idle-clients: deputy agent --daemon failed: {r.stdout}{r.stderr}",
              file=sys.stderr)
        return 2
    agent = int((d / "agent.pid").read_text())
    env = dict(os.environ)
    env["PYTHONPATH"] = str(Path(__file__).resolve().parent.parent / "python") + (
        ":" + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    children = []
    try:
        time.sleep(0.5)
        rss0, shmem0 = status_kib(agent, "VmRSS"), meminfo_kib("Shmem")
        left = a.clients
        while left > 0:
            n = min(left, PER_PROCESS)
            children.append(subprocess.Popen([sys.executable, "-c", CHILD, str(sock), str(n)],
                                             stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                             text=True, env=env))
            left -= n
        for c in children:
            if c.stdout.readline().strip() != "attached":
                print("perf-idle-clients: a client process failed to attach", file=sys.stderr)
                return 2
        time.sleep(1.0)  # the agent settles (its last attach answered)
        info = json.loads(subprocess.run([a.deputy, "info", "--socket", str(sock), "--format",
                                          "json"], capture_output=True, text=True,
                                         timeout=30).stdout)
        attached = len(info["clients"])
        rss1, shmem1 = status_kib(agent, "VmRSS"), meminfo_kib("Shmem")
        cpu0, t0 = cpu_seconds(agent), time.monotonic()
        time.sleep(a.seconds)
        cpu1, t1 = cpu_seconds(agent), time.monotonic()
        share = (cpu1 - cpu0) / (t1 - t0)
        result = {
            "clients": attached, "seconds": round(t1 - t0, 2),
            "agent_cpu_share_of_a_core": share,
            "agent_rss_kib": {"before": rss0, "after": rss1,
                              "per_client": (rss1 - rss0) / max(attached, 1)},
            "node_shmem_kib": {"before": shmem0, "after": shmem1,
                               "per_client": (shmem1 - shmem0) / max(attached, 1)},
        }
        print(f"{attached} idle clients for {t1 - t0:.1f} s: the agent used {100 * share:.2f} % "
              f"of a core; its RSS {rss0 / 1024:.1f} -> {rss1 / 1024:.1f} MiB "
              f"({result['agent_rss_kib']['per_client']:.1f} KiB per client); the node's shared "
              f"memory +{(shmem1 - shmem0) / 1024:.1f} MiB "
              f"({result['node_shmem_kib']['per_client']:.1f} KiB per client)")
        if a.out:
            Path(a.out).write_text(json.dumps(result, indent=2) + "\n")
        return 0 if attached == a.clients else 1
    finally:
        for c in children:
            c.stdin.close()
            c.wait(timeout=60)
        try:
            os.kill(agent, 15)
        except ProcessLookupError:
            pass
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
