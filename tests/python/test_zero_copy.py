"""hetero_comm.empty() memory reaches the daemon without a staging copy; other memory is staged.

hetero_comm.staged_bytes() counts, per process, the bytes the client copied into the daemon's
segment because they lived in memory the daemon does not share. Collectives on tensors from
hetero_comm.empty(), and on contiguous slices of them, must not move that counter; the same
collective on a torch.ones tensor must move it by at least the tensor's size. DDP built inside
hetero_comm.shared_memory() keeps its gradient buckets in the segment: its backward stages nothing.
"""
import pytest

pytest.importorskip("torch")

from hc_harness import need_backend, run_ranks  # noqa: E402

N = 1 << 18  # floats: 1 MiB, past the daemon's inline size as well


def zero_copy_rank(rank, world):
    import torch
    import torch.distributed as dist

    import hetero_comm

    out = {"memory_path": hetero_comm.memory_path(), "wrong": []}

    def expect(label, got, want):
        if not torch.equal(got, want):
            bad = (got != want).nonzero().flatten()
            out["wrong"].append(f"{label}: #wrong {bad.numel()} of {want.numel()}")

    shapes = {}
    for dtype in (torch.float32, torch.bfloat16, torch.int64, torch.uint8):
        t = hetero_comm.empty(5, dtype=dtype)
        shapes[str(dtype)] = (tuple(t.shape), str(t.dtype), t.device.type, t.is_contiguous())

    warm = torch.ones(8)
    dist.all_reduce(warm)  # the communicator exists; whatever its setup stages is done

    a = hetero_comm.empty(N, dtype=torch.float32)
    b = hetero_comm.empty(N * world, dtype=torch.float32)
    c = hetero_comm.empty(N, dtype=torch.float32)
    before = hetero_comm.staged_bytes()
    a.fill_(rank + 1)
    dist.all_reduce(a)
    expect("all_reduce of empty()", a, torch.full((N,), world * (world + 1) / 2))
    a.fill_(rank + 1)
    dist.broadcast(a, src=world - 1)
    expect("broadcast of empty()", a, torch.full((N,), float(world)))
    a.fill_(rank + 1)
    dist._all_gather_base(b, a)
    expect("_all_gather_base of empty()", b,
           torch.arange(1, world + 1, dtype=torch.float32).repeat_interleave(N))
    dist._reduce_scatter_base(c, b)
    expect("_reduce_scatter_base of empty()", c, torch.full((N,), float(world * (rank + 1))))
    part = a[1000:1000 + 4096]  # a contiguous slice is still the daemon's memory
    part.fill_(1.0)
    dist.all_reduce(part)
    expect("all_reduce of a slice of empty()", part, torch.full((4096,), float(world)))
    out["staged_by_empty"] = hetero_comm.staged_bytes() - before

    plain = torch.ones(N)
    before = hetero_comm.staged_bytes()
    dist.all_reduce(plain)
    out["staged_by_plain"] = hetero_comm.staged_bytes() - before
    expect("all_reduce of torch.ones", plain, torch.full((N,), float(world)))
    out["shapes"] = shapes
    return out


def test_empty_is_not_staged_and_plain_memory_is(one_daemon):
    need_backend("hetero")
    run = run_ranks(zero_copy_rank, 2, one_daemon.sockets, "hetero", timeout_s=60,
                    daemons=one_daemon)
    problems = []
    for rank, value in enumerate(run.values()):
        print(f"rank {rank}: memory path {value['memory_path']!r}, staged by empty() "
              f"{value['staged_by_empty']}, by torch.ones {value['staged_by_plain']}")
        problems += [f"rank {rank}: {w}" for w in value["wrong"]]
        if not isinstance(value["memory_path"], str) or not value["memory_path"]:
            problems.append(f"rank {rank}: memory_path() gave {value['memory_path']!r}")
        for dtype, (shape, got_dtype, device, contiguous) in value["shapes"].items():
            if (shape, got_dtype, device, contiguous) != ((5,), dtype, "cpu", True):
                problems.append(f"rank {rank}: empty(5, dtype={dtype}) gave shape {shape}, "
                                f"{got_dtype}, {device}, contiguous {contiguous}")
        if value["staged_by_empty"] != 0:
            problems.append(f"rank {rank}: ops on empty() memory staged "
                            f"{value['staged_by_empty']} bytes, want 0")
        if value["staged_by_plain"] < 4 * N:
            problems.append(f"rank {rank}: an all_reduce of {4 * N} bytes of torch.ones staged "
                            f"{value['staged_by_plain']} bytes")
    assert not problems, "\n".join(problems)


def ddp_buckets_rank(rank, world):
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    import hetero_comm

    out = {}
    grads = {}
    for shared in (False, True):
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(512, 512), torch.nn.ReLU(),
                                    torch.nn.Linear(512, 10))
        if shared:
            with hetero_comm.shared_memory():
                ddp = DistributedDataParallel(model)
            # The block is over: later allocations are torch's again.
            late = torch.empty(1 << 20)
        else:
            ddp = DistributedDataParallel(model)
        x = torch.randn(16, 512, generator=torch.Generator().manual_seed(100 + rank))
        before = hetero_comm.staged_bytes()
        ddp(x).sum().backward()
        out["staged_shared" if shared else "staged_plain"] = hetero_comm.staged_bytes() - before
        grads[shared] = torch.cat([p.grad.reshape(-1) for p in model.parameters()])
    # Same gradients either way: the buckets' memory changes nothing but the copies.
    out["grads_differ"] = int((grads[False] != grads[True]).sum())
    # A tensor made after the block is plain memory: an all_reduce of it is staged.
    before = hetero_comm.staged_bytes()
    dist.all_reduce(late.fill_(1.0))
    out["late_staged"] = hetero_comm.staged_bytes() - before
    return out


def test_shared_memory_block_puts_ddp_buckets_in_the_segment(one_daemon):
    """DistributedDataParallel built inside hetero_comm.shared_memory() gets gradient buckets in
    the daemon's segment: its backward allreduces stage 0 bytes, where the same model built
    outside stages its whole gradient, and the gradients are equal. Allocations after the block
    are torch's own again."""
    need_backend("hetero")
    run = run_ranks(ddp_buckets_rank, 2, one_daemon.sockets, "hetero", timeout_s=60,
                    daemons=one_daemon)
    problems = []
    for rank, value in enumerate(run.values()):
        print(f"rank {rank}: backward staged {value['staged_plain']} bytes with plain buckets, "
              f"{value['staged_shared']} with buckets in the segment")
        if value["staged_shared"] != 0:
            problems.append(f"rank {rank}: buckets made in shared_memory() staged "
                            f"{value['staged_shared']} bytes, want 0")
        if value["staged_plain"] < 4 * 512 * 512:
            problems.append(f"rank {rank}: plain buckets staged only {value['staged_plain']} bytes")
        if value["grads_differ"]:
            problems.append(f"rank {rank}: {value['grads_differ']} gradient elements differ")
        if value["late_staged"] < 4 << 20:
            problems.append(f"rank {rank}: a tensor made after the block staged only "
                            f"{value['late_staged']} bytes: the allocator was not restored")
    assert not problems, "\n".join(problems)
