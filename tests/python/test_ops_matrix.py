"""Every collective x dtype x ReduceOp x count x layout, checked element by element.

One spawn per configuration runs the whole matrix (matrix_cases.plan) inside the rank processes:
hetero on one daemon with 2 and 4 ranks and on two daemons with 2 ranks each, and the same
matrix with 4 ranks, trimmed to what Gloo supports, on Gloo, which proves the expectations
themselves. The 4-rank runs add groups [0, 2] and [1, 3] running at the same time (on two
daemons both span the daemons) and then the world group again.
"""
import dataclasses

import pytest

pytest.importorskip("torch")

from hc_harness import need_backend, run_ranks  # noqa: E402

SUBGROUP_DTYPES = ("float32", "bfloat16", "int64", "bool")
SUBGROUP_COUNTS = (1, 1001)
PG_TIMEOUT_S = 10  # every op here is small; a late one is a hang
# Past the daemon's inline size (256 KiB) and its inter-daemon chunk (512 KiB) in every dtype
# but int8/uint8/bool, which the small counts cover.
LARGE_COUNT = 300001
LARGE_DTYPES = ("float32", "bfloat16", "int64")
LARGE_OPS = frozenset(("all_reduce", "reduce", "broadcast", "all_gather_base",
                       "reduce_scatter_base", "all_to_all_single", "send_recv"))


def run_plan(phases, chk, control, rank, world, timeout):
    """Runs each phase's cases in order. A phase is (member lists of its groups, cases); each rank
    runs the cases of its own group, and the groups of a phase have plans of the same shape.

    After every case the ranks share over a Gloo side group which of them raised. When all
    members of a group raised, its ops still line up, but the backend may have aborted the
    group: every rank creates a fresh one in its place (torch wants all ranks in new_group), and
    later cases of the op that failed are skipped, so that one broken op costs one timeout and
    hides nothing else. When only some members raised, the ranks no longer agree on what op
    comes next, and the matrix stops."""
    import torch
    import torch.distributed as dist

    skipped = {}
    for group_members, cases in phases:
        for label, op, ctx, case in cases:
            if op in skipped:
                skipped[op] += 1
                continue
            raised = 0
            try:
                case(chk)
            except Exception as error:  # a backend error is one more failure of the matrix
                chk.fail(label, f"raised {type(error).__name__}: {error}")
                raised = 1
            flags = torch.zeros(world, dtype=torch.int32)
            flags[rank] = raised
            dist.all_reduce(flags, group=control)
            if not flags.any():
                continue
            for members in group_members:
                count = int(flags[list(members)].sum())
                if 0 < count < len(members):
                    chk.fail(label, f"raised on {count} of the {len(members)} ranks of group "
                                    f"{list(members)}: stopping the matrix")
                    return
            skipped.setdefault(op, 0)
            for members in group_members:
                if flags[list(members)].all():
                    fresh = dist.new_group(list(members), timeout=timeout)
                    if rank in members:
                        ctx.group = fresh
    for op, count in skipped.items():
        if count:
            chk.fail(op, f"{count} later cases skipped after this op raised")


def matrix_rank(rank, world, backend, subgroups):
    import datetime

    import torch.distributed as dist

    from hc_check import Checker
    from matrix_cases import CAPS, Ctx, plan

    timeout = datetime.timedelta(seconds=PG_TIMEOUT_S)
    control = dist.new_group(backend="gloo")
    caps = CAPS[backend]
    chk = Checker(rank)
    everyone = list(range(world))
    world_ctx = Ctx(everyone, rank)
    phases = [([everyone], plan(world_ctx, caps, seed0=0))]
    large = dataclasses.replace(caps, ops=caps.ops & LARGE_OPS, noncontig=False)
    phases.append(([everyone], plan(world_ctx, large, seed0=300000,
                                    dtypes=[d for d in LARGE_DTYPES if d in caps.dtypes],
                                    counts=(LARGE_COUNT,), tag="large: ")))
    if subgroups:
        # Every rank creates both groups, as torch requires; each runs the cases of its own.
        pairs = [(0, 2), (1, 3)]
        groups = {m: dist.new_group(list(m), timeout=timeout) for m in pairs}
        members = pairs[0] if rank in pairs[0] else pairs[1]
        ctx = Ctx(list(members), members.index(rank), groups[members])
        dtypes = [d for d in SUBGROUP_DTYPES if d in caps.dtypes]
        phases.append((pairs, plan(ctx, caps, seed0=100000, dtypes=dtypes,
                                   counts=SUBGROUP_COUNTS, tag=f"group {list(members)}: ")))
        again = dataclasses.replace(caps, ops=frozenset(("all_reduce", "broadcast", "barrier")))
        phases.append(([everyone], plan(world_ctx, again, seed0=200000, dtypes=["float32"],
                                        counts=(7,), tag="world after groups: ")))
    run_plan(phases, chk, control, rank, world, timeout)
    return chk.summary()


CONFIGS = [
    # backend, daemons, ranks, store
    pytest.param("hetero", 1, 2, "file", id="hetero-1daemon-2ranks"),
    pytest.param("hetero", 1, 4, "tcp", id="hetero-1daemon-4ranks"),
    pytest.param("hetero", 2, 4, "env", id="hetero-2daemons-4ranks"),
    pytest.param("gloo", 0, 4, "tcp", id="gloo-4ranks"),
]


@pytest.mark.parametrize("backend,daemon_count,nranks,store", CONFIGS)
def test_matrix(backend, daemon_count, nranks, store, request):
    need_backend(backend)
    daemons = None
    if daemon_count:
        daemons = request.getfixturevalue("one_daemon" if daemon_count == 1 else "two_daemons")
    run = run_ranks(matrix_rank, nranks, daemons.sockets if daemons else [], backend,
                    timeout_s=200, args=(backend, nranks == 4),
                    pg_timeout_s=PG_TIMEOUT_S, store=store, daemons=daemons)
    summaries = run.values()
    counts = [summary["cases"] for summary in summaries]
    # The same failure seen by several ranks is listed once, with the ranks that saw it.
    seen = {}
    for summary in summaries:
        for line in summary["failures"]:
            who, text = line.split(": ", 1)
            seen.setdefault(text, []).append(who.split()[-1])
    lines = [f"[ranks {','.join(ranks)}] {text}" for text, ranks in seen.items()]
    print(f"{backend}, {daemon_count} daemons, {nranks} ranks: {counts} checks per rank, "
          f"{run.elapsed_s:.1f} s")
    shown = "\n".join(lines[:80]) + (f"\n... {len(lines) - 80} more" if len(lines) > 80 else "")
    assert not lines, f"{len(lines)} distinct failures:\n{shown}"
    assert min(counts) > 100, f"too few checks ran: {counts}"
