"""Allreduce through torch.distributed, the deputy backend against gloo on
the same processes, reported as nccl-tests reports it (time, algbw, busbw,
#wrong), with a JSON document for figures:

    python -m deputy.bench -n 2 -m 4k:64m --json allreduce.json

Each rank's default process group is gloo (also the bookkeeping's: the
barriers and the slowest rank's time); the deputy backend is a group over
the same ranks, their tensors in deputy's shared heap (libdeputy-heap.so
preloaded into the ranks; --no-heap: ordinary memory). Per size, the two
are timed alternately (--runs rounds of
--iters blocking all_reduce calls after --warmup), and each row gives the
median round: time is the slowest rank's per call, algbw = bytes / time,
busbw = algbw x nccl-tests' factor (from libdeputy's table:
dp_coll_bus_factor). #wrong counts the elements that differ from the
exact sum (float32 sums of small integers, exact in any order).

The agent: $DEPUTY_AGENT or the default address, started on demand when
none answers (python/deputy/README.md); start it yourself to choose its
placement (`deputy agent --agent-cores last`)."""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from typing import Any, Optional

from deputy._lib import heap_preload, lib

SUFFIXES = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}


def parse_size(text: str) -> int:
    text = text.strip().lower()
    scale = SUFFIXES.get(text[-1:], 1)
    return int(float(text[:-1] if text[-1:] in SUFFIXES else text) * scale)


def sizes(spec: str) -> list[int]:
    low, _, high = spec.partition(":")
    lo, hi = parse_size(low), parse_size(high or low)
    if lo < 4 or hi < lo:
        raise ValueError(f"-m {spec}: need 4 <= MIN <= MAX bytes")
    out, n = [], lo
    while n <= hi:
        out.append(n)
        n *= 2
    return out


def bus_factor(ranks: int) -> float:
    return float(lib.dp_coll_bus_factor(b"allreduce", ranks))


def _rank(rank: int, ranks: int, rdv: str, args: argparse.Namespace, out: Any) -> None:
    import torch
    import torch.distributed as dist
    import deputy.torch  # noqa: F401  (registers "deputy")
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{rdv}", rank=rank, world_size=ranks)
    groups = {"gloo": None, "deputy": dist.new_group(backend="deputy")}
    rows = []
    for nbytes in sizes(args.sizes):
        count = nbytes // 4
        data = {b: torch.empty(count, dtype=torch.float32) for b in groups}
        rounds: dict[str, list[float]] = {b: [] for b in groups}
        wrong = {b: 0 for b in groups}
        want = float(ranks * (ranks + 1) // 2)
        for b in groups:  # checked once, outside the timing
            data[b].fill_(float(rank + 1))
            dist.all_reduce(data[b], group=groups[b])
            wrong[b] = int((data[b] != want).sum())
        for r in range(args.runs):
            # Alternated, and which goes first swaps each round.
            order = list(groups) if r % 2 == 0 else list(reversed(list(groups)))
            for b in order:
                t = data[b]
                # Small values: sums of a round's calls stay finite.
                t.fill_(1.0 / ranks)
                for _ in range(args.warmup):
                    dist.all_reduce(t, group=groups[b])
                t.fill_(1.0 / ranks)
                dist.barrier()
                start = time.perf_counter()
                for _ in range(args.iters):
                    dist.all_reduce(t, group=groups[b])
                mine = torch.tensor([(time.perf_counter() - start) / args.iters])
                dist.all_reduce(mine, op=dist.ReduceOp.MAX)  # the slowest rank's
                rounds[b].append(float(mine))
        bad = torch.tensor([wrong[b] for b in groups], dtype=torch.int64)
        dist.all_reduce(bad)
        row: dict[str, Any] = {"bytes": nbytes, "count": count, "type": "float"}
        for i, b in enumerate(groups):
            t_s = statistics.median(rounds[b])
            algbw = nbytes / t_s / 1e9
            row[b] = {"time_us": t_s * 1e6, "algbw": algbw,
                      "busbw": algbw * bus_factor(ranks), "wrong": int(bad[i]),
                      "time_us_rounds": [x * 1e6 for x in rounds[b]]}
        row["busbw_x"] = row["deputy"]["busbw"] / row["gloo"]["busbw"]
        rows.append(row)
        if rank == 0:
            print(f"{nbytes:>12} {count:>12} {'float':>6}  "
                  + "  ".join(f"{row[b]['time_us']:>10.1f} {row[b]['algbw']:>7.2f} "
                              f"{row[b]['busbw']:>7.2f} {row[b]['wrong']:>6}" for b in groups)
                  + f"  {row['busbw_x']:>8.2f}", flush=True)
    dist.destroy_process_group()
    if rank == 0:
        out.put(rows)


def main(argv: Optional[list[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m deputy.bench",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("-n", "--ranks", type=int, default=2, help="processes (default 2)")
    ap.add_argument("-m", "--sizes", default="4k:64m", help="MIN:MAX bytes, x2 steps "
                    "(k/m/g suffixes; default 4k:64m)")
    ap.add_argument("--iters", type=int, default=20, help="timed calls per round (20)")
    ap.add_argument("--warmup", type=int, default=5, help="untimed calls first (5)")
    ap.add_argument("--runs", type=int, default=3, help="rounds per backend and size (3)")
    ap.add_argument("--json", help="write the results here")
    ap.add_argument("--heap", action=argparse.BooleanOptionalAction, default=True,
                    help="preload libdeputy-heap.so into the ranks, so that torch's tensors "
                    "live in deputy's shared heap (default; --no-heap: ordinary memory, "
                    "registered and reached through the process)")
    args = ap.parse_args(argv)
    if args.ranks < 1 or args.iters < 1 or args.warmup < 0 or args.runs < 1:
        ap.error("need -n >= 1, --iters >= 1, --warmup >= 0, --runs >= 1")
    try:
        sizes(args.sizes)
    except ValueError as e:
        ap.error(str(e))
    preload = heap_preload() if args.heap else None
    if args.heap and not preload:
        print("deputy.bench: libdeputy-heap.so not found (DEPUTY_HEAP_PRELOAD): ordinary "
              "memory", file=sys.stderr)
    if preload:  # the spawned ranks inherit it
        os.environ["LD_PRELOAD"] = ":".join(filter(None, [preload,
                                                          os.environ.get("LD_PRELOAD")]))
    import torch.multiprocessing as mp
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    with tempfile.TemporaryDirectory(prefix="deputy-bench-") as d:
        print(f"# deputy.bench: allreduce, {args.ranks} ranks, float32 sum, {args.iters} "
              f"iterations x {args.runs} rounds (+{args.warmup} warm-up), median round; "
              f"busbw factor {bus_factor(args.ranks):.3f}; tensors in "
              f"{'the shared heap (' + preload + ')' if preload else 'ordinary memory'}")
        print(f"# {'size':>10} {'count':>12} {'type':>6}  "
              f"{'gloo: time(us)':>14} {'algbw':>7} {'busbw':>7} {'#wrong':>6}  "
              f"{'deputy: time(us)':>10} {'algbw':>7} {'busbw':>7} {'#wrong':>6}  "
              f"{'busbw_x':>8}")
        procs = [ctx.Process(target=_rank, args=(r, args.ranks, f"{d}/rdv", args, out))
                 for r in range(args.ranks)]
        for p in procs:
            p.start()
        rows = None
        while rows is None and any(p.is_alive() for p in procs):
            try:
                rows = out.get(timeout=1)
            except Exception:
                pass
        for p in procs:
            p.join()
        failed = [p.exitcode for p in procs if p.exitcode]
        if failed or rows is None:
            print(f"deputy.bench: a rank failed (exit codes {failed})", file=sys.stderr)
            return 1
    if args.json:
        doc = {"benchmark": "deputy.bench", "op": "allreduce", "ranks": args.ranks,
               "dtype": "float32", "iterations": args.iters, "warmup": args.warmup,
               "runs": args.runs, "bus_factor": bus_factor(args.ranks),
               "memory": "shared heap" if preload else "ordinary",
               "agent": os.environ.get("DEPUTY_AGENT", "(default address)"), "rows": rows}
        with open(args.json, "w") as f:
            json.dump(doc, f, indent=1)
    return 0 if all(r[b]["wrong"] == 0 for r in rows for b in ("gloo", "deputy")) else 1


if __name__ == "__main__":
    sys.exit(main())
