"""DistributedDataParallel over the hetero backend trains exactly as over Gloo.

One spawn of 4 ranks on two daemons holds both process groups: the default group is "hetero",
a second group over the same ranks is Gloo. Each rank trains the same small model with each
group, once with DDP's default buckets and once with tiny buckets (several gradient allreduces
in flight per step), and also without any communication on the concatenated batch of all ranks,
which is what DDP's averaged gradients amount to. Losses and final parameters must agree.
"""
import pytest

pytest.importorskip("torch")

from hc_harness import need_backend, run_ranks  # noqa: E402

SEED = 1234
STEPS = 10
BATCH = 16
TOLERANCE = 1e-5


def _model(seed):
    import torch
    from torch import nn
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(32, 16), nn.ReLU(), nn.Linear(16, 8), nn.ReLU(),
                         nn.Linear(8, 1))


def _batch(rank):
    import torch
    generator = torch.Generator().manual_seed(SEED + 100 + rank)
    return torch.randn(BATCH, 32, generator=generator), torch.randn(BATCH, 1, generator=generator)


def _train_ddp(rank, group, small_buckets):
    import torch
    import torch.distributed as dist
    from torch import nn
    from torch.nn.parallel import DistributedDataParallel

    # Each rank starts from different weights: DDP must broadcast rank 0's before training.
    model = _model(SEED + rank)
    saved = dist._DEFAULT_FIRST_BUCKET_BYTES
    try:
        if small_buckets:
            dist._DEFAULT_FIRST_BUCKET_BYTES = 256
        ddp = DistributedDataParallel(model, process_group=group,
                                      bucket_cap_mb=(1024 / 2**20) if small_buckets else 25)
    finally:
        dist._DEFAULT_FIRST_BUCKET_BYTES = saved
    inputs, targets = _batch(rank)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=0.05)
    losses = []
    for _ in range(STEPS):
        optimizer.zero_grad()
        loss = nn.functional.mse_loss(ddp(inputs), targets)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    # Buckets are rebuilt after the first step; "580, 2112" names two.
    buckets = ddp._get_ddp_logging_data().get("rebuilt_bucket_sizes", "")
    return losses, [p.detach().flatten().tolist() for p in model.parameters()], buckets


def _train_reference(rank, world):
    """The same steps in one process: the gradient of the mean of the ranks' mean losses."""
    import torch
    from torch import nn

    model = _model(SEED)
    batches = [_batch(r) for r in range(world)]
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    losses = []
    for _ in range(STEPS):
        optimizer.zero_grad()
        per_rank = [nn.functional.mse_loss(model(x), y) for x, y in batches]
        (sum(per_rank) / world).backward()
        optimizer.step()
        losses.append(per_rank[rank].item())
    return losses, [p.detach().flatten().tolist() for p in model.parameters()], ""


def ddp_rank(rank, world):
    import torch.distributed as dist

    gloo = dist.new_group(backend="gloo")
    runs = {"reference": _train_reference(rank, world)}
    for small in (False, True):
        buckets = "small buckets" if small else "default buckets"
        runs[f"hetero {buckets}"] = _train_ddp(rank, None, small)
        runs[f"gloo {buckets}"] = _train_ddp(rank, gloo, small)
    return runs


def _max_diff(a, b):
    flat_a = [x for row in a for x in (row if isinstance(row, list) else [row])]
    flat_b = [x for row in b for x in (row if isinstance(row, list) else [row])]
    assert len(flat_a) == len(flat_b)
    return max(abs(x - y) for x, y in zip(flat_a, flat_b))


def test_ddp_matches_gloo_and_single_process(two_daemons):
    need_backend("hetero")
    run = run_ranks(ddp_rank, 4, two_daemons.sockets, "hetero", timeout_s=120,
                    daemons=two_daemons)
    per_rank = run.values()
    problems = []
    for rank, runs in enumerate(per_rank):
        for name, (losses, params, buckets) in runs.items():
            if name == "reference":
                continue
            if "small" in name and len(buckets.split(",")) < 2:
                problems.append(f"rank {rank} {name}: one bucket ({buckets!r}), want several")
            peer = "gloo" + name[len("hetero"):] if name.startswith("hetero") else "reference"
            for other in {peer, "reference"}:
                ref_losses, ref_params, _ = runs[other]
                loss_diff = _max_diff(losses, ref_losses)
                param_diff = _max_diff(params, ref_params)
                if loss_diff > TOLERANCE or param_diff > TOLERANCE:
                    problems.append(f"rank {rank} {name} vs {other}: losses differ by "
                                    f"{loss_diff:.3g}, parameters by {param_diff:.3g}")
        # DDP keeps every replica identical: the final parameters agree across ranks exactly.
        if runs["hetero default buckets"][1] != per_rank[0]["hetero default buckets"][1]:
            problems.append(f"rank {rank}: final parameters differ from rank 0's")
    assert not problems, "\n".join(problems)
    # The losses moved: a run that never stepped would pass every comparison above.
    first, last = per_rank[0]["reference"][0][0], per_rank[0]["reference"][0][-1]
    assert last < first, f"training did not lower the loss ({first} -> {last})"
