"""The collectives of FullyShardedDataParallel (PyTorch 1.13), in FSDP's own shapes.

FSDP keeps one flat parameter per wrapped module, split with torch.chunk into world_size shards
that are zero-padded to the first chunk's length. Before forward it rebuilds the padded full
parameter with _all_gather_base(full, shard); after backward it pads the full gradient and hands
each rank its shard with _reduce_scatter_base, SUM between a pre-divide and a post-divide by
factors whose product is world_size (FSDP's _get_gradient_predivide_factor), or, in newer
releases, AVG or a pre-multiplied sum. Three ranks on two daemons (2 + 1): sizes never divide
evenly, and some ranks hold an all-padding shard. FSDP also prefetches: the next all-gather is in
flight before the current one is waited on.
"""
import pytest

pytest.importorskip("torch")

from hc_harness import need_backend, run_ranks  # noqa: E402

SIZES = (1, 2, 7, 1001, 300001)  # 300001 floats: past the daemon's inline and chunk sizes
WORLD = 3


def fsdp_predivide_factor(world):
    # torch/distributed/fsdp/fully_sharded_data_parallel.py, _get_gradient_predivide_factor
    factor = 1
    while world % factor == 0 and world / factor > factor:
        factor *= 2
    return float(factor)


def fsdp_shard(flat, rank, world):
    """FlatParamHandle._get_shard of 1.13: chunk, then pad to the first chunk's length."""
    import torch.nn.functional as F
    chunks = flat.chunk(world)
    chunk = chunks[rank] if rank < len(chunks) else chunks[0].new_empty(0)
    return F.pad(chunk, [0, chunks[0].numel() - chunk.numel()])


def _check_close(chk, label, got, want, rel):
    """For AVG and PREMUL_SUM by 1/3: each rank's third and the sum round; a wrong element is off
    by at least 1/3."""
    import torch
    chk.cases += 1
    got, want = got.to(torch.float64), want.to(torch.float64)
    bad = ((got - want).abs() > rel * want.abs().clamp(min=1.0)).nonzero().flatten()
    if bad.numel():
        i = bad[0].item()
        chk.fail(label, f"#wrong {bad.numel()} of {want.numel()}; first at {i}: got "
                        f"{got[i].item()} want {want[i].item()}")


def fsdp_rank(rank, world):
    import torch
    import torch.distributed as dist

    from hc_check import Checker, values

    chk = Checker(rank)
    for seed, n in enumerate(SIZES):
        # Parameters: every rank can rebuild the full flat parameter, but holds only its shard.
        flat = values(seed, 99, n, torch.float32)
        shard = fsdp_shard(flat, rank, world)
        padded = shard.numel() * world
        want = torch.cat([flat, flat.new_zeros(padded - n)])
        full = torch.full((padded,), -7.0)
        dist._all_gather_base(full, shard)
        chk.expect(f"unshard n={n}", full, want)
        full = torch.full((padded,), -7.0)
        full.narrow(0, rank * shard.numel(), shard.numel()).copy_(shard)
        dist._all_gather_base(full, full.narrow(0, rank * shard.numel(), shard.numel()))
        chk.expect(f"unshard in place n={n}", full, want)

        # Two unshards in flight, as FSDP's prefetch of the next module does.
        other = values(seed, 98, n, torch.float32)
        outs = [torch.zeros(padded), torch.zeros(padded)]
        works = [dist._all_gather_base(outs[0], shard, async_op=True),
                 dist._all_gather_base(outs[1], fsdp_shard(other, rank, world), async_op=True)]
        for work in works:
            work.wait()
        chk.expect(f"prefetched unshard 1 n={n}", outs[0], want)
        chk.expect(f"prefetched unshard 2 n={n}",
                   outs[1], torch.cat([other, other.new_zeros(padded - n)]))

        # Gradients: each rank's full gradient differs; the padding contributes zeros.
        mine = slice(rank * shard.numel(), (rank + 1) * shard.numel())
        pre = fsdp_predivide_factor(world)
        post = world / pre
        for dtype in (torch.float32, torch.bfloat16):
            grads = [torch.cat([values(seed, 10 + r, n, dtype),
                                torch.zeros(padded - n, dtype=dtype)]) for r in range(world)]
            # The reference takes the same float steps: halving is exact, so is the sum of halves.
            want = sum(g.div(pre) for g in grads)[mine].div(post)
            out = torch.full((shard.numel(),), -7.0, dtype=dtype)
            dist._reduce_scatter_base(out, grads[rank].div(pre))
            out.div_(post)
            chk.expect(f"reduce_scatter SUM pre/post-divided {dtype} n={n}", out, want)
        grads = [torch.cat([values(seed, 10 + r, n, torch.float32), torch.zeros(padded - n)])
                 for r in range(world)]
        mean = sum(g.to(torch.float64) for g in grads) / world
        for name, op in (("AVG", dist.ReduceOp.AVG),
                         ("PREMUL_SUM 1/3", dist._make_nccl_premul_sum(1.0 / world))):
            out = torch.full((shard.numel(),), -7.0)
            dist._reduce_scatter_base(out, grads[rank].clone(), op=op)
            _check_close(chk, f"reduce_scatter {name} n={n}", out, mean[mine], 1e-6)
    return chk.summary()


def test_fsdp_unshard_and_gradient_reduce_scatter(two_daemons):
    need_backend("hetero")
    run = run_ranks(fsdp_rank, WORLD, two_daemons.sockets, "hetero", timeout_s=120,
                    daemons=two_daemons)
    summaries = run.values()
    failures = [line for s in summaries for line in s["failures"]]
    assert not failures, "\n".join(failures)
    assert all(s["cases"] >= 8 * len(SIZES) for s in summaries), summaries
