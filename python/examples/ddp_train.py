"""A short DDP training run through the "hetero" backend (or any other: --backend gloo).

Launched once per rank with the usual env:// variables (RANK, WORLD_SIZE, MASTER_ADDR,
MASTER_PORT) and HC_SOCKET naming the rank's hetero-commd; scripts/demo-torch does that for two
daemons. Rank 0 prints the loss of every step; every rank checks at the end that its parameters
equal rank 0's (DDP keeps them equal only if every allreduce was right).
"""
import argparse
import datetime

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

import hetero_comm.torch  # noqa: F401  registers "hetero"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--backend", default="hetero")
    parser.add_argument("--steps", type=int, default=20)
    args = parser.parse_args()

    dist.init_process_group(args.backend, timeout=datetime.timedelta(seconds=60))
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10))
    ddp = DistributedDataParallel(model)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05)
    data = torch.Generator().manual_seed(1000 + rank)  # each rank its own batches
    for step in range(args.steps):
        x = torch.randn(32, 64, generator=data)
        y = torch.randint(0, 10, (32,), generator=data)
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(ddp(x), y)
        loss.backward()
        opt.step()
        mean = loss.detach().clone()
        dist.all_reduce(mean, op=dist.ReduceOp.AVG if args.backend == "hetero" else dist.ReduceOp.SUM)
        if args.backend != "hetero":
            mean /= world
        if rank == 0:
            print(f"step {step:3d}  mean loss {mean.item():.6f}", flush=True)
    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    reference = flat.clone()
    dist.broadcast(reference, 0)
    wrong = int((flat != reference).sum())
    print(f"rank {rank}/{world}: parameters differ from rank 0's in {wrong} elements", flush=True)
    dist.destroy_process_group()
    raise SystemExit(1 if wrong else 0)


if __name__ == "__main__":
    main()
