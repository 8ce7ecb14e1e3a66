"""A stand-in for `deputy bench mover|rail|channel|coll --out FILE`, for sweep tests.

It accepts the flags sweeps pass, writes a document of the real schema
(tools/bench/mover/report.cc write_json, tools/bench/rail/summary.cc,
tools/bench/channel/report.cc) with made-up numbers, and misbehaves on
request so failure handling can be tested without a real benchmark failing.
`bench channel --keygen FILE` writes a key file (0600, refusing to
overwrite) and `--secure` needs `--key` naming an existing one, as the real
benchmark does. `bench coll` needs an agent (DEPUTY_AGENT naming a socket
path that exists) unless `--no-deputy`, and `agent --daemon --socket S
--pidfile P` "starts" one: it creates S, and P naming a sleeping stand-in
process that the sweep must stop. `--agent-cores LAYOUT` is kept in S, and
`info --socket S --format json` answers with the placement of a 2-CPU
machine (`last`: the agent on CPU 1, the ranks on CPU 0; else nothing pinned).

  FAKE_DEPUTY_CALLS=file   append one line per call (the size, rails, or
                           channel's transport[+secure]:size:count:buffer;
                           agent:PID[:cores=LAYOUT][:config] for an agent)
  FAKE_DEPUTY_FAIL=4k      exit 1 with an error on stderr for this size
  FAKE_DEPUTY_USAGE=4k     exit 105 with a CLI11-style usage error for this size
  FAKE_DEPUTY_HANG=4k      sleep for a minute for this size (timeouts)
  FAKE_DEPUTY_NO_OUT=4k    exit 0 without writing --out for this size
  FAKE_DEPUTY_BAD_JSON=4k  write a truncated --out for this size
  FAKE_DEPUTY_INFO_UNPINNED=1  `info` reports nothing pinned whatever --agent-cores said
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time


def _size(text: str) -> int:
    scale = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}.get(text[-1].lower(), 1)
    return int(text[:-1] if scale > 1 else text) * scale


def _mover(argv: list[str]) -> tuple[dict, str, str]:
    p = argparse.ArgumentParser()
    p.add_argument("-o", "--op", default="memmove")
    p.add_argument("-s", "--size", default="4k")
    p.add_argument("-n", "--buffers", type=int, default=32)
    p.add_argument("-i", "--iterations", type=int, default=0)
    p.add_argument("-b", "--batch", type=int, default=1)
    p.add_argument("-q", "--queue-depth", type=int, default=32)
    p.add_argument("-e", "--engines", type=int, default=1)
    p.add_argument("-x", "--wait", default="spin")
    p.add_argument("-m", "--cpu", action="store_true")
    p.add_argument("--wq-size", type=int, default=128)
    p.add_argument("--compare", default="")
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--out", required=True)
    args, _ = p.parse_known_args(argv)
    rows = []
    for text in args.size.split(","):
        size = _size(text)
        modes = ["cpu"] if args.cpu else ["mover"] + (["cpu"] if args.compare == "cpu" else [])
        for mode in modes:
            gbps = (8.0 if mode == "cpu" else 4.0) * args.batch * size / (size + 4096)
            rows.append({"mode": mode, "transfer_size": size, "iterations": 10,
                         "ops_per_repeat": 10,
                         "bytes_per_repeat": 10 * size, "gbps": gbps, "gbps_per_repeat": [gbps],
                         "latency_ns_median": size / gbps, "latency_ns_p99": 2 * size / gbps,
                         "cpu_share": 1.0, "kops": gbps * 1e6 / size, "retries": 0,
                         "verified": True, "verify_error": ""})
    config = {"op": args.op, "sizes": args.size, "buffers": args.buffers,
              "iterations": args.iterations, "batch": args.batch,
              "queue_depth": args.queue_depth, "wq_mode": "dedicated", "wq_size": args.wq_size,
              "engines": args.engines, "wait": args.wait, "cpu_mode": args.cpu,
              "compare": args.compare, "stores": "auto", "repeats": args.reps,
              "dtype": "float32", "redop": "sum"}
    return {"benchmark": "mover", "schema": 1, "config": config,
            "versions": {"deputy": "fake"}, "host": {"cpus": 2}, "busy_threads": 2,
            "results": rows}, args.size, args.out


def _rail(argv: list[str]) -> tuple[dict, str, str]:
    p = argparse.ArgumentParser()
    p.add_argument("--rails", type=int, default=1)
    p.add_argument("--page-size", default="64k")
    p.add_argument("--no-warmup", action="store_true")
    p.add_argument("--out", required=True)
    args, _ = p.parse_known_args(argv)
    first_ms = 40.0 if args.no_warmup else 0.1  # a rail connects on its first write
    rails = [{"rail": r, "device": 0, "domain": "lo", "writes": 100, "bytes": 100 << 16,
              "gbps": 2.0, "share": 1.0 / args.rails, "eagain": 0,
              "first_completion_ms": first_ms} for r in range(args.rails)]
    doc = {"tool": "deputy bench rail", "role": "client",
           "config": {"provider": "tcp", "rails": args.rails, "devices": 1, "batch": 16,
                      "tx_depth": 64, "warmup": not args.no_warmup},
           "versions": {"provider": "tcp;ofi_rxm"},
           "results": {"bytes_per_write": _size(args.page_size), "iterations": 100 * args.rails,
                       "seconds": 1.0, "bytes": 100 * args.rails << 16,
                       "bw_peak_gbps": 2.5 * args.rails, "bw_average_gbps": 2.0 * args.rails,
                       "msg_rate_mpps": 0.001, "pct_of_link": 1.0, "sample_interval_s": 0.25,
                       "samples_gbps": [2.0 * args.rails] * 4},
           "rails": rails, "verify": {"enabled": True, "bad_bytes": 0}}
    return doc, str(args.rails), args.out


def _channel_side(role: str, transport: str, size: int, sent: int, received: int,
                  buffer: int, start: int) -> dict:
    def rate(n: int, seconds: float) -> dict:
        return {"seconds": seconds, "avg_us": seconds * 1e6 / n if n else 0.0,
                "mb_per_s": n * size / seconds / 1e6 if n else 0.0,
                "msg_rate_mpps": n / seconds / 1e6 if n else 0.0}
    send_s, recv_s = 1e-6 * (sent + 1), 1e-6 * (received + 2)
    return {"role": role, "transport": transport, "peer": "fake", "connected": True,
            "buffer_bytes": buffer or 1048576, "max_message": 1048576, "msg_size": size,
            "peer_msg_size": size, "planned_send": sent, "sent": sent, "expected": received,
            "received": received, "peer_planned": received, "peer_sent": received, "wrong": 0,
            "send_start_ns": start, "send_end_ns": start + int(send_s * 1e9),
            "recv_start_ns": start + 1000, "recv_first_ns": start + 1500 if received else 0,
            "recv_end_ns": start + 1000 + int(recv_s * 1e9), "send_cpu_ns": 1, "recv_cpu_ns": 1,
            "send": rate(sent, send_s), "recv": rate(received, recv_s),
            "latency_ns": {"samples": 0, "min": 0.0, "p50": 0.0, "avg": 0.0, "p99": 0.0,
                           "max": 0.0},
            "status": "DP_OK", "status_code": 0, "error": "", "verdict": "OK", "exit_code": 0}


def _channel(argv: list[str]) -> tuple[dict, str, str]:
    p = argparse.ArgumentParser()
    p.add_argument("-s", "--msg-size", default="64")
    p.add_argument("-n", "--num-msgs", type=int, default=100000)
    p.add_argument("--transport", default="shm")
    p.add_argument("--secure", action="store_true")
    p.add_argument("--key", default="")
    p.add_argument("--keygen", default="")
    p.add_argument("--insecure-tcp", action="store_true")
    p.add_argument("--buffer-size", default="0")
    p.add_argument("--mode", default="stream")
    p.add_argument("--one-way", action="store_true")
    p.add_argument("--loopback", action="store_true")
    p.add_argument("--cpus", default="")
    p.add_argument("--out", default="")
    args, _ = p.parse_known_args(argv)
    if args.keygen:
        if os.path.exists(args.keygen):
            print(f"--keygen {args.keygen}: exists; not overwritten", file=sys.stderr)
            raise SystemExit(1)
        fd = os.open(args.keygen, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        os.write(fd, b"deputy-psk-v1 " + b"ab" * 32 + b"\n")
        os.close(fd)
        raise SystemExit(0)
    if args.secure and not os.path.isfile(args.key):
        print(f"--key {args.key}: unusable key file", file=sys.stderr)
        raise SystemExit(105)
    if args.transport == "tcp" and not (args.secure or args.insecure_tcp):
        print("--transport tcp without --secure would send every message in clear",
              file=sys.stderr)
        raise SystemExit(105)
    if not args.out:
        raise SystemExit(0)
    size, buffer = _size(args.msg_size), _size(args.buffer_size)
    transport = ("secure+" if args.secure else "") + args.transport
    both = not args.one_way
    listen = _channel_side("listen", transport, size, args.num_msgs if both else 0,
                           args.num_msgs, buffer, 1_000_000)
    connect = _channel_side("connect", transport, size, args.num_msgs,
                            args.num_msgs if both else 0, buffer, 1_000_000)
    config = {"msg_size": size, "num_msgs": args.num_msgs, "transport": args.transport,
              "secure": args.secure, "key_file": args.key, "insecure_tcp": args.insecure_tcp,
              "buffer_size": args.buffer_size, "buffer_bytes": buffer, "mode": args.mode,
              "one_way": args.one_way, "loopback": True, "cpus": args.cpus, "peer": [],
              "max_msg_size": 1048576, "timeout_s": 10.0, "warmup": 100, "spin_us": 20.0,
              "verify": True, "compare": ""}
    doc = {"benchmark": "channel", "schema": 1, "config": config,
           "versions": {"deputy": "fake", "libsodium": "fake"}, "host": {"cpus": 2},
           "busy_threads": 4 if both else 2, "compare": None, "results": [listen, connect]}
    key = f"{transport}:{size}:{args.num_msgs}:{buffer}"
    return doc, key, args.out


def _coll(argv: list[str]) -> tuple[dict, str, str]:
    p = argparse.ArgumentParser()
    p.add_argument("--op", default="allreduce")
    p.add_argument("-m", "--message-size", default=":1m")
    p.add_argument("--factor", type=int, default=2)
    p.add_argument("-i", "--iterations", type=int, default=0)
    p.add_argument("-x", "--warmup", type=int, default=-1)
    p.add_argument("--memory", default="mapped")
    p.add_argument("--compute", default="cpu")
    p.add_argument("-t", "--num-test-calls", type=int, default=0)
    p.add_argument("--wait", default="")
    p.add_argument("--compare", default="")
    p.add_argument("--no-deputy", action="store_true")
    p.add_argument("--allreduce-table", action="store_true")
    p.add_argument("--max", default="512m")
    p.add_argument("--out", required=True)
    args, _ = p.parse_known_args(argv)
    if not args.no_deputy and not os.path.exists(os.environ.get("DEPUTY_AGENT", "/nonexistent")):
        print("[app] [error] dp_init: DP_ERR_AGENT_LOST: no agent at $DEPUTY_AGENT",
              file=sys.stderr)
        raise SystemExit(1)
    impls = ([] if args.no_deputy else ["deputy"]) + (["mpi"] if args.compare else [])
    nonblocking = args.op.startswith("i")
    if args.allreduce_table:
        impls = ([] if args.no_deputy else ["deputy"]) + ["mpi", "ring"]
        sizes, top = [], _size(args.max)
        size = 128
        while size <= top:
            sizes.append(size)
            size *= 4
    else:
        if args.op == "allreduce" and args.compare:
            impls.append("ring")
        low, _, high = args.message_size.partition(":")
        size, top, sizes = _size(low or "4"), _size(high or low), []
        while size <= top:
            sizes.append(size)
            size *= args.factor
    rows = []
    for size in sizes:
        for impl in impls:
            t = {"deputy": 50.0, "mpi": 10.0, "ring": 12.0}[impl] + size / 4e3
            row = {"impl": impl, "op": "allreduce" if args.allreduce_table else args.op,
                   "nonblocking": nonblocking and not args.allreduce_table, "size": size,
                   "count": size // 4, "dtype": "float32", "redop": "sum", "iterations": 10,
                   "warmup": 1, "time_us": t, "time_max_us": t, "algbw_gbps": size / t / 1e3,
                   "busbw_gbps": size / t / 1e3, "wrong": 0}
            if args.allreduce_table:
                row["mode"] = "allreduce-table"
            elif nonblocking:
                row.update({"overall_us": 1.2 * t, "compute_us": t, "coll_init_us": 0.1,
                            "test_us": 0.0, "wait_us": 0.2 * t, "pure_comm_us": t,
                            "overlap_pct": 80.0, "host_cpu_us": 0.5})
            rows.append(row)
    config = {"op": args.op, "message_size": args.message_size, "sizes": sizes,
              "factor": args.factor, "iterations": args.iterations, "warmup": args.warmup,
              "dtype": "float32", "redop": "sum", "memory": args.memory,
              "compute": args.compute, "num_test_calls": args.num_test_calls,
              "wait": args.wait, "compare": args.compare, "no_deputy": args.no_deputy,
              "allreduce_table": args.allreduce_table, "max": args.max, "implementations": impls,
              "ranks": 2, "local_ranks": 2}
    doc = {"benchmark": "coll", "schema": 1, "config": config,
           "versions": {"deputy": "fake", "mpi": "fake MPI"}, "host": {"cpus": 2},
           "averaging": "mean over iterations, then mean over ranks (OSU, nccl-tests)",
           "cpu_clock_cost_ns": 400, "results": rows}
    key = f"coll:{args.op}:{args.message_size}:{args.memory}:{args.compute}" + (
        f":allreduce-table:{args.max}" if args.allreduce_table else "")
    return doc, key, args.out


def _agent(argv: list[str]) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--daemon", action="store_true")
    p.add_argument("--socket", required=True)
    p.add_argument("--pidfile", required=True)
    p.add_argument("--log-file", default="")
    p.add_argument("--config", default="")
    p.add_argument("--agent-cores", default="")
    args = p.parse_args(argv)
    if os.environ.get("FAKE_DEPUTY_AGENT_FAIL"):
        print("[app] [error] deputy agent --daemon: the agent did not start: bind: "
              "Address in use", file=sys.stderr)
        return 1
    if args.config:
        json.loads(open(args.config, encoding="utf-8").read())  # must be JSON
    sleeper = subprocess.Popen(["sleep", "300"], process_group=0,
                               stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    with open(args.socket, "w", encoding="utf-8") as f:
        json.dump({"agent_cores": args.agent_cores}, f)
    with open(args.pidfile, "w", encoding="utf-8") as f:
        f.write(f"{sleeper.pid}\n")
    calls = os.environ.get("FAKE_DEPUTY_CALLS")
    if calls:
        with open(calls, "a", encoding="utf-8") as f:
            f.write(f"agent:{sleeper.pid}"
                    + (f":cores={args.agent_cores}" if args.agent_cores else "")
                    + (":config" if args.config else "") + "\n")
    print(f"deputy agent: pid {sleeper.pid} listening on {args.socket}")
    return 0


def _info(argv: list[str]) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--socket", required=True)
    p.add_argument("--format", default="text")
    args = p.parse_args(argv)
    try:
        with open(args.socket, encoding="utf-8") as f:
            cores = json.load(f).get("agent_cores") or "shared"
    except OSError:
        print(f"agent: no agent at {args.socket}")
        return 1
    if os.environ.get("FAKE_DEPUTY_INFO_UNPINNED"):
        cores = "shared"  # an agent that ignored --agent-cores
    pinned = cores != "shared"
    placement = {"layout": cores, "topology": "1 package, 2 cores, 2 CPUs, no SMT",
                 "agent_cpus": "1" if pinned else "", "rank_cpus": "0" if pinned else "",
                 "threads": [], "engine_cpus": "1" if pinned else "0-1", "client_cpus": ""}
    print(json.dumps({"version": "fake", "pid": 1, "placement": placement}))
    return 0


BENCHES = {"mover": _mover, "rail": _rail, "channel": _channel, "coll": _coll}


def _mpirun(argv: list[str]) -> int:
    """`deputy mpirun --baseline --agent-cores LAYOUT -- MPIRUN-ARGS...`: logged as
    mpirun:baseline:cores=LAYOUT, then the (fake) mpirun runs the rest."""
    p = argparse.ArgumentParser()
    p.add_argument("--baseline", action="store_true")
    p.add_argument("--agent-cores", default="")
    split = argv.index("--") if "--" in argv else len(argv)
    args = p.parse_args(argv[:split])
    calls = os.environ.get("FAKE_DEPUTY_CALLS")
    if calls:
        with open(calls, "a", encoding="utf-8") as f:
            f.write("mpirun" + (":baseline" if args.baseline else "")
                    + (f":cores={args.agent_cores}" if args.agent_cores else "") + "\n")
    os.execvp("mpirun", ["mpirun", *argv[split + 1:]])
    return 127


def main(argv: list[str]) -> int:
    if argv[:1] == ["agent"]:
        return _agent(argv[1:])
    if argv[:1] == ["mpirun"]:
        return _mpirun(argv[1:])
    if argv[:1] == ["info"]:
        return _info(argv[1:])
    if len(argv) < 2 or argv[0] != "bench" or argv[1] not in BENCHES:
        print(f"fake deputy: unsupported command {argv[:2]}", file=sys.stderr)
        return 2
    doc, key, out = BENCHES[argv[1]](argv[2:])
    calls = os.environ.get("FAKE_DEPUTY_CALLS")
    if calls:
        with open(calls, "a", encoding="utf-8") as f:
            f.write(key + "\n")
    print(f"# fake deputy bench {argv[1]} {key}")
    if os.environ.get("FAKE_DEPUTY_USAGE") == key:
        print(f"-s {key}: not a size (examples: 64, 4k, 2m, 1g)\nRun with --help for more information.",
              file=sys.stderr)
        return 105
    if os.environ.get("FAKE_DEPUTY_HANG") == key:
        time.sleep(60)
    if os.environ.get("FAKE_DEPUTY_FAIL") == key:
        with open(out, "w", encoding="utf-8") as f:
            json.dump(doc, f)
        print(f"[app] [error] mover at {key}: verification failed at byte 17", file=sys.stderr)
        return 1
    if os.environ.get("FAKE_DEPUTY_NO_OUT") == key:
        return 0
    with open(out, "w", encoding="utf-8") as f:
        text = json.dumps(doc, indent=2)
        f.write(text[: len(text) // 2] if os.environ.get("FAKE_DEPUTY_BAD_JSON") == key else text)
    print("GB per sec = 1.0 cpu 1.0 kopsrate = 1")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
