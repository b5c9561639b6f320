"""The collective matrix as one ordered list of cases, run inside each rank process.

Every rank builds the same list, so op k of one rank meets op k of the others. A case posts one
collective (or a p2p exchange) and checks what this rank got against a reference rebuilt from
every member's seeded input (hc_check.values). `Ctx` names the group the cases run in: members
are global ranks in group order, `me` is this rank's index among them; roots and peers are given
to torch as global ranks, as torch.distributed expects.
"""
from dataclasses import dataclass

import torch
import torch.distributed as dist

from hc_check import (DTYPES, REDOPS, Placed, layout_shape, make_op, redop_allowed, reduce_ref,
                      values)

COUNTS = (0, 1, 7, 1001)
NONCONTIG_COUNT = 7
ALL_OPS = frozenset((
    "all_reduce", "all_reduce_coalesced", "reduce", "broadcast", "all_gather",
    "all_gather_base", "all_gather_coalesced", "gather", "scatter", "reduce_scatter",
    "reduce_scatter_base", "all_to_all", "all_to_all_single", "send_recv", "barrier"))


@dataclass(frozen=True)
class Caps:
    """What a backend is asked to do. The hetero backend is asked for everything."""
    dtypes: tuple
    redops: tuple
    ops: frozenset
    zero_count_ops: frozenset
    noncontig: bool = True


CAPS = {
    "hetero": Caps(tuple(DTYPES), REDOPS, ALL_OPS, ALL_OPS),
    # PyTorch 1.13's Gloo: no bfloat16 or bool, no AVG or PREMUL_SUM, no reduce_scatter, base
    # variants or list all_to_all; an allgather of 0 elements dies of SIGFPE inside Gloo; a
    # strided or transposed view is read and written as if it were contiguous (wrong results).
    "gloo": Caps(("float32", "float64", "float16", "int8", "uint8", "int32", "int64"),
                 ("SUM", "PRODUCT", "MIN", "MAX"),
                 ALL_OPS - {"reduce_scatter", "reduce_scatter_base", "all_gather_base",
                            "all_to_all"},
                 frozenset(("all_reduce", "all_reduce_coalesced", "broadcast", "reduce",
                            "send_recv", "barrier")),
                 noncontig=False),
}


@dataclass
class Ctx:
    members: list
    me: int
    group: object = None  # None: the default group

    @property
    def n(self):
        return len(self.members)


def split_size(src, dst, count):
    # Uneven all_to_all traffic: each pair moves count, count + 1 or count + 2 elements.
    return count + (src + 2 * dst) % 3


def all_reduce(ctx, chk, label, seed, dtype, count, redop, layout):
    shape = layout_shape(layout, count)
    inputs = [values(seed, m, shape, dtype) for m in range(ctx.n)]
    x = Placed(layout, shape, dtype, inputs[ctx.me])
    dist.all_reduce(x.view, op=make_op(redop), group=ctx.group)
    chk.expect_placed(label, x, reduce_ref(inputs, redop, dtype))


def all_reduce_coalesced(ctx, chk, label, seed, dtype, count, redop):
    shapes = [(count,), (3,), (count + 2,)]
    inputs = [[values(seed, m * 8 + k, s, dtype) for k, s in enumerate(shapes)]
              for m in range(ctx.n)]
    mine = [t.clone() for t in inputs[ctx.me]]
    dist.all_reduce_coalesced(mine, op=make_op(redop), group=ctx.group)
    for k in range(len(shapes)):
        chk.expect(f"{label} tensor {k}", mine[k],
                   reduce_ref([inputs[m][k] for m in range(ctx.n)], redop, dtype))


def reduce(ctx, chk, label, seed, dtype, count, redop, layout, root):
    shape = layout_shape(layout, count)
    inputs = [values(seed, m, shape, dtype) for m in range(ctx.n)]
    x = Placed(layout, shape, dtype, inputs[ctx.me])
    dist.reduce(x.view, dst=ctx.members[root], op=make_op(redop), group=ctx.group)
    if ctx.me == root:  # the other ranks' buffers are scratch, as in NCCL
        chk.expect_placed(label, x, reduce_ref(inputs, redop, dtype))


def broadcast(ctx, chk, label, seed, dtype, count, layout, root):
    shape = layout_shape(layout, count)
    x = Placed(layout, shape, dtype, values(seed, ctx.me, shape, dtype))
    dist.broadcast(x.view, src=ctx.members[root], group=ctx.group)
    chk.expect_placed(label, x, values(seed, root, shape, dtype))


def all_gather(ctx, chk, label, seed, dtype, count, layout, inplace):
    shape = layout_shape(layout, count)
    inputs = [values(seed, m, shape, dtype) for m in range(ctx.n)]
    outs = [Placed(layout, shape, dtype) for _ in range(ctx.n)]
    if inplace:  # the input is this rank's slot of the output list
        outs[ctx.me].view.copy_(inputs[ctx.me])
        x = outs[ctx.me].view
    else:
        x = Placed(layout, shape, dtype, inputs[ctx.me]).view
    dist.all_gather([o.view for o in outs], x, group=ctx.group)
    for m in range(ctx.n):
        chk.expect_placed(f"{label} slot {m}", outs[m], inputs[m])


def all_gather_base(ctx, chk, label, seed, dtype, count, inplace):
    inputs = [values(seed, m, count, dtype) for m in range(ctx.n)]
    out = torch.zeros(ctx.n * count, dtype=dtype)
    if inplace:  # FSDP's way: the shard is a slice of the full buffer
        x = out.narrow(0, ctx.me * count, count)
        x.copy_(inputs[ctx.me])
    else:
        x = inputs[ctx.me].clone()
    dist._all_gather_base(out, x, group=ctx.group)
    chk.expect(label, out, torch.cat(inputs))


def all_gather_coalesced(ctx, chk, label, seed, dtype, count):
    shapes = [(count,), (2, 3)]
    inputs = [[values(seed, m * 8 + k, s, dtype) for k, s in enumerate(shapes)]
              for m in range(ctx.n)]
    outs = [[torch.zeros(s, dtype=dtype) for s in shapes] for _ in range(ctx.n)]
    dist.all_gather_coalesced(outs, [t.clone() for t in inputs[ctx.me]], group=ctx.group)
    for m in range(ctx.n):
        for k in range(len(shapes)):
            chk.expect(f"{label} slot {m} tensor {k}", outs[m][k], inputs[m][k])


def gather(ctx, chk, label, seed, dtype, count, layout, inplace, root):
    shape = layout_shape(layout, count)
    inputs = [values(seed, m, shape, dtype) for m in range(ctx.n)]
    x = Placed(layout, shape, dtype, inputs[ctx.me])
    outs = None
    if ctx.me == root:
        outs = [Placed(layout, shape, dtype) for _ in range(ctx.n)]
        if inplace:
            outs[ctx.me] = x
    dist.gather(x.view, gather_list=[o.view for o in outs] if outs else None,
                dst=ctx.members[root], group=ctx.group)
    if outs:
        for m in range(ctx.n):
            chk.expect_placed(f"{label} slot {m}", outs[m], inputs[m])


def scatter(ctx, chk, label, seed, dtype, count, layout, inplace, root):
    shape = layout_shape(layout, count)
    pieces = [values(seed, m, shape, dtype) for m in range(ctx.n)]
    out = Placed(layout, shape, dtype)
    sources = None
    if ctx.me == root:
        sources = [Placed(layout, shape, dtype, p) for p in pieces]
        if inplace:
            out = sources[ctx.me]
    dist.scatter(out.view, scatter_list=[s.view for s in sources] if sources else None,
                 src=ctx.members[root], group=ctx.group)
    chk.expect_placed(label, out, pieces[ctx.me])


def reduce_scatter(ctx, chk, label, seed, dtype, count, redop, layout, inplace):
    shape = layout_shape(layout, count)
    # inputs[m][j]: what member m contributes to member j's result
    inputs = [[values(seed, m * ctx.n + j, shape, dtype) for j in range(ctx.n)]
              for m in range(ctx.n)]
    ins = [Placed(layout, shape, dtype, t) for t in inputs[ctx.me]]
    out = ins[ctx.me] if inplace else Placed(layout, shape, dtype)
    dist.reduce_scatter(out.view, [p.view for p in ins], op=make_op(redop), group=ctx.group)
    chk.expect_placed(label, out,
                      reduce_ref([inputs[m][ctx.me] for m in range(ctx.n)], redop, dtype))


def reduce_scatter_base(ctx, chk, label, seed, dtype, count, redop, inplace):
    inputs = [values(seed, m, ctx.n * count, dtype) for m in range(ctx.n)]
    x = inputs[ctx.me].clone()
    out = x.narrow(0, ctx.me * count, count) if inplace else torch.zeros(count, dtype=dtype)
    dist._reduce_scatter_base(out, x, op=make_op(redop), group=ctx.group)
    mine = slice(ctx.me * count, (ctx.me + 1) * count)
    chk.expect(label, out, reduce_ref([t[mine] for t in inputs], redop, dtype))


def all_to_all(ctx, chk, label, seed, dtype, count, layout):
    def piece(src, dst):
        return values(seed, src * ctx.n + dst, layout_shape(layout, split_size(src, dst, count)),
                      dtype)
    sends = [Placed(layout, layout_shape(layout, split_size(ctx.me, j, count)), dtype,
                    piece(ctx.me, j)) for j in range(ctx.n)]
    recvs = [Placed(layout, layout_shape(layout, split_size(j, ctx.me, count)), dtype)
             for j in range(ctx.n)]
    dist.all_to_all([r.view for r in recvs], [s.view for s in sends], group=ctx.group)
    for j in range(ctx.n):
        chk.expect_placed(f"{label} from member {j}", recvs[j], piece(j, ctx.me))


def all_to_all_single(ctx, chk, label, seed, dtype, count, with_splits):
    if not with_splits:
        inputs = [values(seed, m, ctx.n * count, dtype) for m in range(ctx.n)]
        out = torch.zeros(ctx.n * count, dtype=dtype)
        dist.all_to_all_single(out, inputs[ctx.me].clone(), group=ctx.group)
        mine = slice(ctx.me * count, (ctx.me + 1) * count)
        return chk.expect(label, out, torch.cat([t[mine] for t in inputs]))

    def piece(src, dst):
        return values(seed, src * ctx.n + dst, split_size(src, dst, count), dtype)
    in_splits = [split_size(ctx.me, j, count) for j in range(ctx.n)]
    out_splits = [split_size(j, ctx.me, count) for j in range(ctx.n)]
    x = torch.cat([piece(ctx.me, j) for j in range(ctx.n)])
    out = torch.zeros(sum(out_splits), dtype=dtype)
    dist.all_to_all_single(out, x, out_splits, in_splits, group=ctx.group)
    chk.expect(label, out, torch.cat([piece(j, ctx.me) for j in range(ctx.n)]))


def send_recv(ctx, chk, label, seed, dtype, count, layout):
    """Blocking send/recv between member pairs (0, 1), (2, 3)...; the lower member sends first,
    so even a synchronous send cannot deadlock."""
    shape = layout_shape(layout, count)
    partner = ctx.me ^ 1
    if partner >= ctx.n:
        return
    got = Placed(layout, shape, dtype)
    mine = Placed(layout, shape, dtype, values(seed, ctx.me, shape, dtype)).view
    peer = ctx.members[partner]
    if ctx.me % 2 == 0:
        dist.send(mine, peer, group=ctx.group)
        sender = dist.recv(got.view, peer, group=ctx.group)
    else:
        sender = dist.recv(got.view, peer, group=ctx.group)
        dist.send(mine, peer, group=ctx.group)
    chk.expect_placed(label, got, values(seed, partner, shape, dtype))
    chk.expect(f"{label} recv's returned source", torch.tensor([sender]), torch.tensor([peer]))


def isend_irecv(ctx, chk, label, seed, dtype, count, layout, recv_first=False):
    """Around a ring: isend to the next member and irecv from the previous, both in flight
    before either is waited on (with two members both go to the one peer); posted in either
    order, as torch allows."""
    shape = layout_shape(layout, count)
    after, before = (ctx.me + 1) % ctx.n, (ctx.me - 1) % ctx.n
    got = Placed(layout, shape, dtype)
    mine = Placed(layout, shape, dtype, values(seed, ctx.me, shape, dtype)).view
    if recv_first:
        requests = [dist.irecv(got.view, ctx.members[before], group=ctx.group),
                    dist.isend(mine, ctx.members[after], group=ctx.group)]
    else:
        requests = [dist.isend(mine, ctx.members[after], group=ctx.group),
                    dist.irecv(got.view, ctx.members[before], group=ctx.group)]
    for request in requests:
        request.wait()
    chk.expect_placed(label, got, values(seed, before, shape, dtype))


def barrier(ctx, chk, label, seed):
    dist.barrier(group=ctx.group)
    chk.cases += 1


def plan(ctx, caps, seed0, dtypes=None, counts=COUNTS, tag=""):
    """The ordered cases (label, op, ctx, callable(chk)) for one group; the same on every member,
    and of the same shape (ops in the same order) for groups of the same size."""
    cases = []

    def add(op, name, fn, **kwargs):
        label = f"{tag}{op} {name}"
        seed = seed0 + len(cases)
        cases.append((label, op, ctx,
                      lambda chk, kw=kwargs, lb=label, sd=seed: fn(ctx, chk, lb, sd, **kw)))

    for dname in dtypes or caps.dtypes:
        dtype = DTYPES[dname]
        for count in counts:
            def ok(op):
                return op in caps.ops and (count or op in caps.zero_count_ops)
            d = dict(dtype=dtype, count=count)
            for redop in caps.redops:
                if not redop_allowed(redop, dtype):
                    continue
                what = f"{dname} n={count} {redop}"
                if ok("all_reduce"):
                    add("all_reduce", what, all_reduce, redop=redop, layout="contig", **d)
                if ok("all_reduce_coalesced"):
                    add("all_reduce_coalesced", what, all_reduce_coalesced, redop=redop, **d)
                if ok("reduce"):
                    root = len(cases) % ctx.n
                    add("reduce", f"{what} root {root}", reduce, redop=redop, layout="contig",
                          root=root, **d)
                for inplace in (False, True):
                    mode = "in place" if inplace else "out of place"
                    if ok("reduce_scatter"):
                        add("reduce_scatter", f"{what} {mode}", reduce_scatter, redop=redop,
                              layout="contig", inplace=inplace, **d)
                    if ok("reduce_scatter_base"):
                        add("_reduce_scatter_base", f"{what} {mode}", reduce_scatter_base,
                              redop=redop, inplace=inplace, **d)
            what = f"{dname} n={count}"
            if ok("broadcast"):
                for root in range(ctx.n):
                    add("broadcast", f"{what} root {root}", broadcast, layout="contig",
                          root=root, **d)
            for inplace in (False, True):
                mode = "in place" if inplace else "out of place"
                if ok("all_gather"):
                    add("all_gather", f"{what} {mode}", all_gather, layout="contig",
                          inplace=inplace, **d)
                if ok("all_gather_base"):
                    add("_all_gather_base", f"{what} {mode}", all_gather_base,
                          inplace=inplace, **d)
                root = (len(cases) + 1) % ctx.n
                if ok("gather"):
                    add("gather", f"{what} {mode} root {root}", gather, layout="contig",
                          inplace=inplace, root=root, **d)
                if ok("scatter"):
                    add("scatter", f"{what} {mode} root {root}", scatter, layout="contig",
                          inplace=inplace, root=root, **d)
            if ok("all_gather_coalesced"):
                add("all_gather_coalesced", what, all_gather_coalesced, **d)
            if ok("all_to_all"):
                add("all_to_all", what, all_to_all, layout="contig", **d)
            if ok("all_to_all_single"):
                add("all_to_all_single", what, all_to_all_single, with_splits=False, **d)
                add("all_to_all_single", f"{what} with splits", all_to_all_single,
                      with_splits=True, **d)
            if ok("send_recv"):
                add("send/recv", what, send_recv, layout="contig", **d)
                add("isend/irecv", what, isend_irecv, layout="contig", **d)
                add("irecv/isend", what, isend_irecv, layout="contig", recv_first=True, **d)
        if caps.noncontig:
            plan_noncontig(ctx, caps, dname, dtype, add)
        if "barrier" in caps.ops:
            add("barrier", dname, barrier)
    return cases


def plan_noncontig(ctx, caps, dname, dtype, add):
    """Views that are not contiguous: results must land in the view and nowhere else."""
    d = dict(dtype=dtype, count=NONCONTIG_COUNT)
    redops = ("SUM", "MAX") if dtype is torch.bool else ("SUM",)
    for layout in ("strided", "transposed"):
        what = f"{dname} n={NONCONTIG_COUNT} {layout}"
        for redop in redops:
            if "all_reduce" in caps.ops:
                add("all_reduce", f"{what} {redop}", all_reduce, redop=redop, layout=layout, **d)
        if "reduce" in caps.ops:
            add("reduce", f"{what} SUM root {ctx.n - 1}", reduce, redop="SUM", layout=layout,
                  root=ctx.n - 1, **d)
        if "reduce_scatter" in caps.ops:
            add("reduce_scatter", f"{what} SUM", reduce_scatter, redop="SUM", layout=layout,
                  inplace=False, **d)
        if "broadcast" in caps.ops:
            add("broadcast", f"{what} root {ctx.n - 1}", broadcast, layout=layout,
                  root=ctx.n - 1, **d)
        for inplace in (False, True):
            mode = "in place" if inplace else "out of place"
            if "all_gather" in caps.ops:
                add("all_gather", f"{what} {mode}", all_gather, layout=layout, inplace=inplace,
                      **d)
            if "gather" in caps.ops:
                add("gather", f"{what} {mode} root 0", gather, layout=layout, inplace=inplace,
                      root=0, **d)
            if "scatter" in caps.ops:
                add("scatter", f"{what} {mode} root 0", scatter, layout=layout,
                      inplace=inplace, root=0, **d)
        if "all_to_all" in caps.ops:
            add("all_to_all", what, all_to_all, layout=layout, **d)
        if "send_recv" in caps.ops:
            add("send/recv", what, send_recv, layout=layout, **d)
            add("isend/irecv", what, isend_irecv, layout=layout, **d)
