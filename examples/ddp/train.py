#!/usr/bin/env python3
"""A small CNN trained with DistributedDataParallel on synthetic
CIFAR-shaped data (generated, nothing downloaded), its gradients reduced
three ways, same seeds:

  --mode gloo         DDP over gloo (the baseline)
  --mode deputy       DDP over the "deputy" process group (import deputy.torch)
  --mode gloo+hook    DDP over gloo, gradients through deputy's comm hook

Prints the time per step (median over the steps after the warm-up, the
slowest rank's) and a checksum of the final parameters (SHA-256 of their
bytes): with 2 ranks the three modes give the same checksum (each bucket is
divided by the world size, then two halves are summed: exact in either
order). Runs its own ranks (`--nprocs N`, torch.multiprocessing) or under
torchrun (`python3 -m torch.distributed.run --nproc_per_node N train.py`).
deputy's modes use the node's agent at $DEPUTY_AGENT (or the default
address), started on demand where none answers. In deputy's modes the
ranks' tensors live in deputy's shared heap (libdeputy-heap.so preloaded
into the ranks it starts; --no-heap: ordinary memory; under torchrun, set
LD_PRELOAD yourself): gradient buckets the agent then reaches in place
(examples/ddp/README.md)."""

import argparse
import hashlib
import os
import statistics
import sys
import tempfile
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
import torch.nn.functional as F


class Net(nn.Module):
    """CIFAR-10-shaped: 3x32x32 in, 10 classes out (~0.6 M parameters)."""

    def __init__(self) -> None:
        super().__init__()
        self.c1 = nn.Conv2d(3, 32, 3, padding=1)
        self.c2 = nn.Conv2d(32, 64, 3, padding=1)
        self.f1 = nn.Linear(64 * 8 * 8, 128)
        self.f2 = nn.Linear(128, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.max_pool2d(F.relu(self.c1(x)), 2)
        x = F.max_pool2d(F.relu(self.c2(x)), 2)
        return self.f2(F.relu(self.f1(x.flatten(1))))


def run(rank: int, size: int, args: argparse.Namespace, init: str) -> None:
    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)
    backend = "deputy" if args.mode == "deputy" else "gloo"
    if backend == "deputy":
        import deputy.torch  # noqa: F401  registers the backend
    dist.init_process_group(backend, init_method=init, rank=rank, world_size=size)
    model = Net()
    ddp = nn.parallel.DistributedDataParallel(model, bucket_cap_mb=args.bucket_mb)
    state = None
    if args.mode == "gloo+hook":
        import deputy.torch as dtorch
        state = dtorch.HookState()
        ddp.register_comm_hook(state, dtorch.allreduce_hook)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01, momentum=0.9)
    # Each rank its own shard of a synthetic dataset.
    gen = torch.Generator().manual_seed(args.seed * 1000 + rank)
    images = torch.randn(args.steps, args.batch, 3, 32, 32, generator=gen)
    labels = torch.randint(0, 10, (args.steps, args.batch), generator=gen)
    times = []
    for step in range(args.steps):
        dist.barrier()
        t0 = time.perf_counter()
        opt.zero_grad()
        F.cross_entropy(ddp(images[step]), labels[step]).backward()
        opt.step()
        t = torch.tensor([time.perf_counter() - t0])
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        if step >= args.warmup:
            times.append(t.item())
    digest = hashlib.sha256(b"".join(p.detach().numpy().tobytes()
                                     for p in model.parameters())).hexdigest()[:16]
    if rank == 0:
        print(f"ddp: mode {args.mode}, {size} ranks, batch {args.batch} per rank, "
              f"{args.steps} steps ({args.warmup} warm-up), buckets {args.bucket_mb} MB")
        print(f"ddp: time per step {statistics.median(times) * 1e3:.2f} ms (median, slowest rank)"
              if times else "ddp: no timed steps")
        print(f"result: parameters sha256 {digest}", flush=True)
    if state is not None:
        state.close()
    dist.destroy_process_group()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mode", choices=("gloo", "deputy", "gloo+hook"), default="gloo")
    ap.add_argument("--nprocs", type=int, default=2, help="ranks to start (not under torchrun)")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--batch", type=int, default=32, help="images per rank per step")
    ap.add_argument("--bucket-mb", type=float, default=25.0, help="DDP's bucket_cap_mb")
    ap.add_argument("--threads", type=int, default=1, help="torch threads per rank")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--heap", action=argparse.BooleanOptionalAction, default=None,
                    help="preload libdeputy-heap.so into the ranks it starts (default: in "
                    "deputy's modes, not in gloo's)")
    args = ap.parse_args()
    if args.steps <= args.warmup:
        sys.exit("ddp: --steps must exceed --warmup")
    torchrun = "RANK" in os.environ and "WORLD_SIZE" in os.environ
    heap = args.heap if args.heap is not None else args.mode != "gloo" and not torchrun
    if heap:
        from deputy._lib import heap_preload
        preload = heap_preload()
        if not preload and args.heap:
            sys.exit("ddp: --heap: libdeputy-heap.so not found (build it, or set "
                     "DEPUTY_HEAP_PRELOAD)")
        if not preload:
            print("ddp: libdeputy-heap.so not found: the ranks' tensors are ordinary memory "
                  "(slower; examples/ddp/README.md)", file=sys.stderr)
        elif torchrun:
            if preload not in os.environ.get("LD_PRELOAD", ""):
                sys.exit("ddp: --heap under torchrun: give LD_PRELOAD=" + preload +
                         " to torchrun")
        else:
            # The ranks (spawned: new processes) inherit it.
            os.environ["LD_PRELOAD"] = ":".join(filter(None, [preload,
                                                              os.environ.get("LD_PRELOAD")]))
    if torchrun:
        run(int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), args, "env://")
        return
    with tempfile.TemporaryDirectory(prefix="ddp-") as d:
        mp.start_processes(_spawned, args=(args.nprocs, args, f"file://{d}/rdv"),
                           nprocs=args.nprocs, start_method="spawn")


def _spawned(rank: int, size: int, args: argparse.Namespace, init: str) -> None:
    run(rank, size, args, init)


if __name__ == "__main__":
    main()
