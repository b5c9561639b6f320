#!/usr/bin/env python3
"""One rank of PyTorch's "nccl" backend over hetero-comm's NCCL shim.

scripts/gpu-check (stage 1, step torch) runs two of these on one GPU with
LD_PRELOAD=libnccl.so.2 of the kit, then two with --backend gloo on the CPU:

    torch_shim_check.py [--backend nccl|gloo] [--hold PATH] [--timeout SECONDS]

RANK, WORLD_SIZE (2), MASTER_ADDR and MASTER_PORT as torchrun sets them. With
nccl: every collective PyTorch maps to NCCL, checked on the host, then a short
DDP run; with gloo the DDP run alone. Prints "loss RANK STEP VALUE" per DDP
step (gpu-check compares nccl's with gloo's), "WRONG ..." per bad case and
"#wrong N" last; exits 0 only when N is 0. --hold PATH: once done, creates
PATH.ready<RANK> and waits for PATH.go before destroying the process group.
"""
import argparse
import datetime
import faulthandler
import os
import sys
import time

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

SIZES = (1, 7, (1 << 20) + 3)
DTYPES = (torch.float32, torch.bfloat16)
SEED = 1234
DDP_STEPS = 10


def pattern(n, rank):
    """Rank-dependent small integers, built on the host.

    Values stay below 16, so every sum over two ranks (and the average of
    two: values of the ranks differ by 2) is exact in bfloat16 too, and a
    result can be compared for equality.
    """
    return torch.arange(n, dtype=torch.int64) % 13 + 2 * rank + 1


def count_wrong(name, got, want):
    # The collectives ran on PyTorch's NCCL stream: wait for them (and for the
    # daemon's completion behind them) before reading anything back.
    torch.cuda.synchronize()
    got = got.detach().cpu().to(torch.float64).flatten()
    want = want.to(torch.float64).flatten()
    if got.numel() != want.numel():
        print(f"WRONG {name}: {got.numel()} elements, want {want.numel()}")
        return want.numel()
    bad = (got != want).nonzero().flatten()
    if bad.numel():
        i = bad[0].item()
        print(f"WRONG {name}: {bad.numel()} of {want.numel()}; first at {i}: "
              f"got {got[i].item()} want {want[i].item()}")
    return bad.numel()


def check_collectives(rank, world, device):
    """Returns (wrong elements, operations issued)."""
    wrong = issued = 0
    peer = (rank + 1) % world
    avg = getattr(dist.ReduceOp, "AVG", None)
    for dtype in DTYPES:
        for n in SIZES:
            tag = f"{str(dtype).replace('torch.', '')} n={n}"
            inputs = [pattern(n, r) for r in range(world)]
            total = sum(inputs)
            # In-place collectives overwrite it: each gets a fresh copy.
            mine = inputs[rank]

            x = mine.to(device, dtype)
            dist.all_reduce(x, op=dist.ReduceOp.SUM)
            wrong += count_wrong(f"all_reduce sum {tag}", x, total)
            issued += 1
            if avg is not None:
                x = mine.to(device, dtype)
                dist.all_reduce(x, op=avg)
                wrong += count_wrong(f"all_reduce avg {tag}", x,
                                     total / world)
                issued += 1
            for root in range(world):
                x = mine.to(device, dtype)
                dist.broadcast(x, src=root)
                wrong += count_wrong(f"broadcast root {root} {tag}", x,
                                     inputs[root])
                issued += 1

            out = torch.empty(world * n, device=device, dtype=dtype)
            dist.all_gather_into_tensor(out, mine.to(device, dtype))
            wrong += count_wrong(f"all_gather {tag}", out, torch.cat(inputs))
            issued += 1

            # Each rank's input is world * n long; rank r keeps the sum of
            # the r-th slices.
            long_inputs = [pattern(world * n, r) for r in range(world)]
            out = torch.empty(n, device=device, dtype=dtype)
            dist.reduce_scatter_tensor(
                out, long_inputs[rank].to(device, dtype))
            want = sum(long_inputs)[rank * n:(rank + 1) * n]
            wrong += count_wrong(f"reduce_scatter {tag}", out, want)
            issued += 1

            # Both directions in one batch: NCCL needs the send and the
            # receive of a pair in one group, or the two ranks deadlock.
            received = torch.empty(n, device=device, dtype=dtype)
            ops = [dist.P2POp(dist.isend, mine.to(device, dtype), peer),
                   dist.P2POp(dist.irecv, received, peer)]
            for request in dist.batch_isend_irecv(ops):
                request.wait()
            wrong += count_wrong(f"send/recv {tag}", received, inputs[peer])
            issued += 1
    dist.barrier(device_ids=[device.index or 0])
    issued += 1
    return wrong, issued


def ddp_losses(rank, device):
    """Trains a tiny model for DDP_STEPS steps; prints each step's loss."""
    # Same initial weights on every rank and on either backend (DDP also
    # broadcasts rank 0's at start); data from the seed and the rank alone,
    # made on the host so that CPU and GPU runs see the same numbers.
    torch.manual_seed(SEED)
    model = nn.Sequential(nn.Linear(32, 16), nn.ReLU(), nn.Linear(16, 1))
    model = model.to(device)
    ids = [device.index or 0] if device.type == "cuda" else None
    ddp = DistributedDataParallel(model, device_ids=ids)
    generator = torch.Generator().manual_seed(SEED + 1 + rank)
    inputs = torch.randn(64, 32, generator=generator).to(device)
    targets = torch.randn(64, 1, generator=generator).to(device)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=0.05)
    for step in range(DDP_STEPS):
        optimizer.zero_grad()
        loss = nn.functional.mse_loss(ddp(inputs), targets)
        loss.backward()
        optimizer.step()
        print(f"loss {rank} {step} {loss.item():.9e}")


def nccl_version():
    # Informative only (the shim says 2.30.7): never worth failing the run.
    try:
        return ".".join(map(str, torch.cuda.nccl.version()))
    except Exception as error:
        return f"unknown ({error})"


def hold(path, rank, seconds=60):
    # The daemon counts the operations of the communicators it still holds:
    # gpu-check reads its counters while this process keeps them open.
    with open(f"{path}.ready{rank}", "w"):
        pass
    deadline = time.monotonic() + seconds
    while not os.path.exists(f"{path}.go") and time.monotonic() < deadline:
        time.sleep(0.05)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=("nccl", "gloo"), default="nccl")
    parser.add_argument("--hold", metavar="PATH")
    parser.add_argument("--timeout", type=float, default=100.0)
    args = parser.parse_args()
    # Lines must reach the log even when the watchdog below ends the process.
    sys.stdout.reconfigure(line_buffering=True)
    # A hang in C code (NCCL calls, the shim) never returns to Python: a
    # watchdog thread in C prints every thread's stack and exits instead.
    faulthandler.dump_traceback_later(args.timeout, exit=True)

    rank = int(os.environ["RANK"])
    world = int(os.environ.get("WORLD_SIZE", "2"))
    timeout = datetime.timedelta(seconds=max(10, int(args.timeout) - 20))
    torch.manual_seed(SEED)
    # TF32 matmuls would differ from the CPU's float32 by far more than the
    # 1e-4 the loss comparison allows.
    torch.set_float32_matmul_precision("highest")

    wrong = 0
    if args.backend == "nccl":
        # Both ranks on GPU 0: real NCCL refuses that, the daemon does not.
        torch.cuda.set_device(0)
        device = torch.device("cuda:0")
        try:
            dist.init_process_group("nccl", rank=rank, world_size=world,
                                    timeout=timeout, device_id=device)
        except TypeError:  # a PyTorch without device_id (before 2.3)
            dist.init_process_group("nccl", rank=rank, world_size=world,
                                    timeout=timeout)
        print(f"torch {torch.__version__}, nccl {nccl_version()}, allocator "
              f"{os.environ.get('PYTORCH_CUDA_ALLOC_CONF', 'default')}")
        wrong, issued = check_collectives(rank, world, device)
        print(f"issued {issued} operations")
    else:
        device = torch.device("cpu")
        dist.init_process_group("gloo", rank=rank, world_size=world,
                                timeout=timeout)
    ddp_losses(rank, device)
    if device.type == "cuda":
        torch.cuda.synchronize()
    if args.hold:
        hold(args.hold, rank)
    dist.destroy_process_group()
    print(f"#wrong {wrong}")
    return 0 if wrong == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
