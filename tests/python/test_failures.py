"""What the hetero backend does when a job goes wrong: it raises, names what is missing, and never
hangs a rank.

- a rank dies while the others are inside an allreduce (on one daemon, and on the other daemon
  of a two-daemon job): every survivor raises RuntimeError within 15 s, long before the group's
  timeout;
- a rank withholds an allreduce: the first rank to wait raises after the group's 3 s timeout,
  naming the op, "timed out" and the missing rank; a rank that posted later learns of the abort
  before its own timeout; a later op on that aborted group raises at once;
- work.wait(timeout) on a pending op raises without aborting: the op completes when the peer
  posts, and the group keeps working;
- BAND, BOR and BXOR, and recv from any source, are refused by name, and the group keeps working;
- ranks that disagree on an allreduce's size raise instead of hanging.
"""
import re
import signal

import pytest

pytest.importorskip("torch")

from hc_harness import need_backend, run_ranks  # noqa: E402

DEATH_LIMIT_S = 15.0
WITHHELD_TIMEOUT_S = 3
LATE_POST_S = 1.5
BIG = 4 << 20  # floats: 16 MiB, so the victim dies with its share still being moved


def _outcome(fn):
    """Runs fn; returns (error text or None, seconds taken)."""
    import time
    start = time.monotonic()
    try:
        fn()
        error = None
    except RuntimeError as caught:
        error = str(caught) or "<empty RuntimeError>"
    return error, time.monotonic() - start


def killed_rank(rank, world, victim, how):
    import os
    import time

    import torch
    import torch.distributed as dist

    x = torch.ones(BIG)
    dist.all_reduce(x)  # every rank has joined the communicator
    if rank == victim:
        time.sleep(0.3)  # the survivors are waiting inside the next allreduce by now
        dist.all_reduce(torch.ones(BIG), async_op=True)
        if how == "exit":
            os._exit(17)
        os.kill(os.getpid(), signal.SIGKILL)

    def ops():
        for _ in range(3):  # the first may complete if the victim's share had all arrived
            dist.all_reduce(x)
    error, seconds = _outcome(ops)
    return {"error": error, "seconds": seconds}


@pytest.mark.parametrize("daemon_count,nranks,victim,how", [
    pytest.param(1, 2, 1, "exit", id="1daemon-os_exit"),
    pytest.param(2, 4, 3, "sigkill", id="2daemons-sigkill"),
])
def test_killed_rank_fails_the_others_fast(daemon_count, nranks, victim, how, request):
    need_backend("hetero")
    daemons = request.getfixturevalue("one_daemon" if daemon_count == 1 else "two_daemons")
    run = run_ranks(killed_rank, nranks, daemons.sockets, "hetero", timeout_s=60,
                    args=(victim, how), pg_timeout_s=120, daemons=daemons)
    problems = []
    for result in run.results:
        if result.rank == victim:
            if result.finished:
                problems.append(f"the victim rank {victim} did not die")
            continue
        if not result.finished or result.error_type:
            problems.append(f"rank {result.rank}: {result.error or 'no result'}")
            continue
        value = result.value
        if value["error"] is None:
            problems.append(f"rank {result.rank}: every allreduce after rank {victim} died "
                            f"returned")
        elif value["seconds"] > DEATH_LIMIT_S:
            problems.append(f"rank {result.rank}: raised after {value['seconds']:.1f} s "
                            f"(limit {DEATH_LIMIT_S} s): {value['error']}")
        if result.exitcode != 0:
            problems.append(f"rank {result.rank}: exit status {result.exitcode} after the error")
        print(f"rank {result.rank}: raised after {value['seconds']:.2f} s: {value['error']}")
    assert not problems, "\n".join(problems) + "\n" + run.report()


def withheld_rank(rank, world, withholder, late):
    import datetime
    import time

    import torch
    import torch.distributed as dist

    side = dist.new_group(backend="gloo", timeout=datetime.timedelta(seconds=60))
    dist.all_reduce(torch.ones(8))  # every rank has joined the communicator
    out = {}
    if rank == late:
        time.sleep(LATE_POST_S)  # posts too, but its own timeout would fire after rank 0's
    if rank != withholder:
        out["first"], out["first_s"] = _outcome(lambda: dist.all_reduce(torch.ones(8)))
        out["later"], out["later_s"] = _outcome(lambda: dist.all_reduce(torch.ones(8)))
    dist.barrier(group=side)  # the withholder waits here, posting nothing on the hetero group
    return out


def test_withheld_op_times_out_naming_op_and_rank(one_daemon):
    """Rank 1 of 3 never posts an allreduce. Rank 0 raises after the group's timeout, naming the
    op, "timed out" and rank 1; rank 2, which posted 1.5 s later, learns of the abort, and its
    reason, before its own timeout. Later ops on the aborted group raise at once on both."""
    need_backend("hetero")
    withholder, late = 1, 2
    run = run_ranks(withheld_rank, 3, one_daemon.sockets, "hetero", timeout_s=60,
                    args=(withholder, late), pg_timeout_s=WITHHELD_TIMEOUT_S, daemons=one_daemon)
    values = run.values()
    problems = []
    for rank in (0, late):
        value = values[rank]
        first, later = value["first"], value["later"]
        print(f"rank {rank}: the withheld op raised after {value['first_s']:.2f} s: {first}; "
              f"the next after {value['later_s']:.2f} s: {later}")
        if first is None:
            problems.append(f"rank {rank}: the withheld allreduce returned")
            continue
        if "allreduce" not in first.lower().replace("_", "").replace(" ", ""):
            problems.append(f"rank {rank}: the error does not name the op: {first}")
        if later is None:
            problems.append(f"rank {rank}: an op on the aborted group returned")
        elif value["later_s"] > 1.5:
            problems.append(f"rank {rank}: an op on the aborted group took "
                            f"{value['later_s']:.2f} s to raise")
    first, seconds = values[0]["first"], values[0]["first_s"]
    if first is not None:
        if "timed out" not in first.lower():
            problems.append(f"rank 0: the error does not say 'timed out': {first}")
        if not re.search(rf"(?<!\d){withholder}(?!\d)", first):
            problems.append(f"rank 0: the error does not name rank {withholder}: {first}")
        if not WITHHELD_TIMEOUT_S - 0.5 <= seconds <= WITHHELD_TIMEOUT_S + 10:
            problems.append(f"rank 0: raised after {seconds:.2f} s, not after the group's "
                            f"{WITHHELD_TIMEOUT_S} s timeout")
    seconds = values[late]["first_s"]
    if values[late]["first"] is not None and seconds > WITHHELD_TIMEOUT_S - LATE_POST_S + 1.0:
        problems.append(f"rank {late}: raised {seconds:.2f} s after posting: it waited for its "
                        f"own timeout instead of learning of rank 0's abort")
    # The aborting rank leaves its reason in the store, so the others learn the cause too.
    late_error = values[late]["first"] or ""
    if "timed out" not in late_error or not re.search(rf"(?<!\d){withholder}(?!\d)", late_error):
        problems.append(f"rank {late}: the error does not carry rank 0's reason (timed out, "
                        f"rank {withholder}): {late_error}")
    assert not problems, "\n".join(problems)


def refusals_rank(rank, world):
    import datetime

    import torch
    import torch.distributed as dist

    side = dist.new_group(backend="gloo", timeout=datetime.timedelta(seconds=60))
    dist.all_reduce(torch.ones(8))
    out = {}

    # A timed wait gives up without aborting: rank 1 posts only after rank 0's wait raised.
    x = torch.full((5,), float(rank + 1))
    if rank == 0:
        work = dist.all_reduce(x, async_op=True)
        out["wait"], out["wait_s"] = _outcome(
            lambda: work.wait(timeout=datetime.timedelta(milliseconds=200)))
        dist.barrier(group=side)
        out["completed"], _ = _outcome(work.wait)
    else:
        dist.barrier(group=side)
        out["completed"], _ = _outcome(lambda: dist.all_reduce(x))
    out["timed_wait_result"] = x.tolist()

    for name in ("BAND", "BOR", "BXOR"):
        out[name], _ = _outcome(
            lambda: dist.all_reduce(torch.ones(4, dtype=torch.int32),
                                    op=getattr(dist.ReduceOp, name)))
    out["anysource"], _ = _outcome(lambda: dist.recv(torch.zeros(4)))
    y = torch.full((3,), float(rank + 1))
    out["after_refusals"], _ = _outcome(lambda: dist.all_reduce(y))
    out["after_refusals_result"] = y.tolist()

    # Last: a mismatch may leave its group failed.
    mismatch = dist.new_group([0, 1], timeout=datetime.timedelta(seconds=60))
    out["mismatch"], out["mismatch_s"] = _outcome(
        lambda: dist.all_reduce(torch.ones(10 if rank == 0 else 12), group=mismatch))
    return out


def test_refusals_timed_wait_and_mismatch(two_daemons):
    need_backend("hetero")
    run = run_ranks(refusals_rank, 2, two_daemons.sockets, "hetero", timeout_s=90,
                    pg_timeout_s=30, daemons=two_daemons)
    problems = []
    for rank, value in enumerate(run.values()):
        print(f"rank {rank}: {value}")
        if rank == 0:
            if value["wait"] is None:
                problems.append("rank 0: wait(200 ms) on an op rank 1 had not posted returned")
            elif value["wait_s"] > 2.0:
                problems.append(f"rank 0: wait(200 ms) raised after {value['wait_s']:.2f} s")
        if value["completed"] is not None:
            problems.append(f"rank {rank}: the op did not complete after the timed wait: "
                            f"{value['completed']}")
        if value["timed_wait_result"] != [3.0] * 5:
            problems.append(f"rank {rank}: the op after the timed wait gave "
                            f"{value['timed_wait_result']}, want 3.0 everywhere")
        for name in ("BAND", "BOR", "BXOR"):
            if value[name] is None or name.lower() not in value[name].lower():
                problems.append(f"rank {rank}: {name} not refused by name: {value[name]}")
        anysource = value["anysource"]
        if anysource is None or not re.search(r"any|src|source", anysource, re.I):
            problems.append(f"rank {rank}: recv from any source not refused clearly: {anysource}")
        if value["after_refusals"] is not None or value["after_refusals_result"] != [3.0] * 3:
            problems.append(f"rank {rank}: the group broke after refused calls: "
                            f"{value['after_refusals']} {value['after_refusals_result']}")
        if value["mismatch"] is None:
            problems.append(f"rank {rank}: allreduce of 10 against 12 elements returned")
        elif value["mismatch_s"] > 10:
            problems.append(f"rank {rank}: the mismatch raised only after "
                            f"{value['mismatch_s']:.1f} s: {value['mismatch']}")
    assert not problems, "\n".join(problems)


def cuda_rank(rank, world):
    import torch
    import torch.distributed as dist
    error, _ = _outcome(lambda: dist.all_reduce(torch.ones(4, device="cuda")))
    return error


def test_cuda_tensor_points_to_the_nccl_shim(one_daemon):
    need_backend("hetero")
    import torch
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device: the refusal of CUDA tensors cannot be exercised")
    run = run_ranks(cuda_rank, 1, one_daemon.sockets, "hetero", timeout_s=60, daemons=one_daemon)
    error = run.values()[0]
    assert error is not None and re.search(r"nccl|shim", error, re.I), error
