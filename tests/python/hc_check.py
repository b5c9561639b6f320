"""Rank-side helpers: seeded inputs every rank can rebuild for every other rank, reference results
computed on the host in float64, and a tally of wrong elements per case.

Inputs are small integers so that every reduction here is exact in every dtype: sums of four
values in [-3, 3] stay within int8, products of four stay below 82 (exact in bfloat16's 8-bit
mantissa), and dividing by a world size of 2 or 4 (AVG) or multiplying by 0.5 (PREMUL_SUM) only
moves the binary point. A result is then right or wrong, never "close".
"""
import torch
import torch.distributed as dist

DTYPES = {name: getattr(torch, name) for name in (
    "float32", "float64", "float16", "bfloat16", "int8", "uint8", "int32", "int64", "bool")}
FLOATS = (torch.float32, torch.float64, torch.float16, torch.bfloat16)
REDOPS = ("SUM", "PRODUCT", "MIN", "MAX", "AVG", "PREMUL_SUM")
PREMUL_FACTOR = 0.5
# Written around a non-contiguous view; an element that changes here was written out of bounds.
SENTINEL = 99


def values(seed, who, shape, dtype):
    """The input of `who` (a member index, or any small int) in case `seed`; the same on every
    rank that asks."""
    generator = torch.Generator().manual_seed(seed * 1009 + who)
    if dtype is torch.bool:
        low, high = 0, 2
    elif dtype is torch.uint8:
        low, high = 0, 4
    else:
        low, high = -3, 4
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    return torch.randint(low, high, shape, generator=generator, dtype=torch.int64).to(dtype)


def redop_allowed(redop, dtype):
    # AVG and PREMUL_SUM are defined for floating types only (NCCL's own rule).
    return dtype in FLOATS or redop not in ("AVG", "PREMUL_SUM")


def make_op(redop):
    if redop == "PREMUL_SUM":
        return dist._make_nccl_premul_sum(PREMUL_FACTOR)
    return getattr(dist.ReduceOp, redop)


def reduce_ref(tensors, redop, dtype):
    """What reducing `tensors` (one per member) with `redop` must give, as `dtype`. bool follows
    NCCL's uint8 treatment: SUM and MAX are OR, PRODUCT and MIN are AND."""
    stack = torch.stack([t.to(torch.float64) for t in tensors])
    if dtype is torch.bool:
        any_true, all_true = stack.amax(0), stack.amin(0)
        return (any_true if redop in ("SUM", "MAX") else all_true).to(torch.bool)
    if redop == "SUM":
        out = stack.sum(0)
    elif redop == "PRODUCT":
        out = stack.prod(0)
    elif redop == "MIN":
        out = stack.amin(0)
    elif redop == "MAX":
        out = stack.amax(0)
    elif redop == "AVG":
        out = stack.sum(0) / len(tensors)
    elif redop == "PREMUL_SUM":
        out = stack.sum(0) * PREMUL_FACTOR
    else:
        raise ValueError(redop)
    return out.to(dtype)


class Placed:
    """A tensor of `shape` laid out as asked: "contig", "strided" (every other column of a wider
    base filled with SENTINEL) or "transposed" (the transpose of a contiguous base)."""

    def __init__(self, layout, shape, dtype, fill=None):
        rows = shape[0]
        self.layout = layout
        if layout == "contig":
            self.base = torch.zeros(shape, dtype=dtype)
            self.view = self.base
        elif layout == "strided":
            self.base = torch.full((rows, 3), SENTINEL, dtype=dtype)
            self.view = self.base[:, ::2]
        elif layout == "transposed":
            self.base = torch.zeros((2, rows), dtype=dtype)
            self.view = self.base.t()
        else:
            raise ValueError(layout)
        if fill is not None:
            self.view.copy_(fill.reshape(self.view.shape))

    def guard_wrong(self):
        """Elements of the base outside the view that were overwritten."""
        if self.layout != "strided":
            return 0
        column = self.base[:, 1]
        return int((column != torch.full_like(column, SENTINEL)).sum())


def layout_shape(layout, count):
    return (count,) if layout == "contig" else (count, 2)


class Checker:
    """Counts cases and wrong elements; prints each failure as it happens, so that a rank killed
    at the deadline still leaves them in its log."""

    def __init__(self, rank):
        self.rank = rank
        self.cases = 0
        self.failures = []

    def expect(self, label, got, want):
        self.cases += 1
        got = got.detach().to(torch.float64).flatten()
        want = want.detach().to(torch.float64).flatten()
        if got.numel() != want.numel():
            return self.fail(label, f"{got.numel()} elements, want {want.numel()}")
        bad = (got != want).nonzero().flatten()
        if bad.numel():
            i = bad[0].item()
            self.fail(label, f"#wrong {bad.numel()} of {want.numel()}; first at {i}: "
                             f"got {got[i].item()} want {want[i].item()}")

    def expect_placed(self, label, placed, want):
        self.expect(label, placed.view, want)
        wrong = placed.guard_wrong()
        if wrong:
            self.fail(label, f"#wrong {wrong} elements outside the {placed.layout} view changed")

    def fail(self, label, text):
        line = f"rank {self.rank}: {label}: {text}"
        print("WRONG " + line, flush=True)
        self.failures.append(line)

    def summary(self):
        return {"cases": self.cases, "failures": self.failures}
