"""A short DDP training run through the "hetero" backend (or any other: --backend gloo).

Launched once per rank with the usual env:// variables (RANK, WORLD_SIZE, MASTER_ADDR,
MASTER_PORT) and HC_SOCKET naming the rank's hetero-commd; scripts/demo-torch does that for two
daemons. Rank 0 prints the loss of every step; every rank checks at the end that its parameters
equal rank 0's (DDP keeps them equal only if every allreduce was right).

`--backend nccl --device cuda` trains on the process's GPU (CUDA or ROCm builds of torch alike)
through PyTorch's NCCL backend, which reaches hetero-commd when the shim is preloaded
(deploy/kubernetes/ddp-mixed-job.yaml); "hetero" takes CPU tensors only.
"""
import argparse
import datetime

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--backend", default="hetero")
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--steps", type=int, default=20)
    args = parser.parse_args()
    if args.backend == "hetero":
        # Only this backend needs the extension: an image with the shim alone runs --backend nccl.
        import hetero_comm.torch  # noqa: F401  registers "hetero"
    device = torch.device(args.device)
    if device.type == "cuda":
        torch.cuda.set_device(0)  # one GPU per process: the one the pod was given

    dist.init_process_group(args.backend, timeout=datetime.timedelta(seconds=60))
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10))
    model = model.to(device)
    ddp = DistributedDataParallel(model, device_ids=[0] if device.type == "cuda" else None)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05)
    data = torch.Generator().manual_seed(1000 + rank)  # each rank its own batches
    for step in range(args.steps):
        # Drawn on the CPU, so that every device sees the same batches for a seed.
        x = torch.randn(32, 64, generator=data).to(device)
        y = torch.randint(0, 10, (32,), generator=data).to(device)
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
