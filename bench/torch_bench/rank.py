"""One rank of bench/torch: run as `python3 -m torch_bench.rank ...` by bench/torch, one process per
rank, with HC_SOCKET naming the rank's daemon. Joins the default group ("hetero", or "gloo" with
--gloo-only) and a Gloo group over the same TCP store, then measures, in this order:

  allreduce: per size, per repetition, the tensor kinds in a rotating order
    gloo    dist.all_reduce on a plain CPU tensor (torch.empty), Gloo group
    staged  the same plain tensor, "hetero" group: the backend copies it into the daemon's
            segment and back
    empty   a tensor from hetero_comm.empty, "hetero" group: the daemon reads it in place
  Each (kind, size, repetition): one checked call (rank r adds r+1), then warm-up calls, then
  `iters` blocking calls timed back to back; iters is chosen from the warm-up time so that one
  measurement takes about --budget seconds (the same on every rank). The time of a measurement is
  the slowest rank's elapsed time / iters.

  DDP: a 3-layer MLP (Linear width x width, ReLU between), fixed seed, wrapped in
  DistributedDataParallel over the Gloo group and over the "hetero" group, plus the same model
  without DDP ("local", no communication); one step of each model in turn (rotating order), each
  step timed alone; a step's time is the slowest rank's.

Rank 0 writes every raw time to --result as JSON; bench/torch computes medians and prints.
"""

import argparse
import datetime
import json
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel

KINDS_ALL = ("gloo", "staged", "empty")


def parse():
    p = argparse.ArgumentParser()
    p.add_argument("--rank", type=int, required=True)
    p.add_argument("--world", type=int, required=True)
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--sizes", required=True, help="comma-separated byte counts")
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--budget", type=float, default=0.3)
    p.add_argument("--min-iters", type=int, default=3)
    p.add_argument("--max-iters", type=int, default=50)
    p.add_argument("--ddp-steps", type=int, default=20)
    p.add_argument("--ddp-warmup", type=int, default=5)
    p.add_argument("--ddp-width", type=int, default=1024)
    p.add_argument("--ddp-batch", type=int, default=8)
    p.add_argument("--timeout", type=float, default=600)
    p.add_argument("--gloo-only", action="store_true")
    p.add_argument("--result", required=True)
    return p.parse_args()


def log(rank, msg):
    print("[rank %d %s] %s" % (rank, time.strftime("%H:%M:%S"), msg), flush=True)


class Bench:
    def __init__(self, args):
        self.args = args
        self.rank = args.rank
        self.world = args.world
        self.hetero = not args.gloo_only
        self.times = []  # this rank's raw seconds, in measurement order; max-reduced at the end
        self.records = []  # (what, key..., index into times)

    def setup(self):
        if self.hetero:
            import hetero_comm  # noqa: F401
            import hetero_comm.torch  # noqa: F401  registers the c10d backend "hetero"
            self.hc = hetero_comm
        backend = "hetero" if self.hetero else "gloo"
        dist.init_process_group(backend, init_method="tcp://127.0.0.1:%d" % self.args.port,
                                rank=self.rank, world_size=self.world,
                                timeout=datetime.timedelta(seconds=self.args.timeout))
        # Gloo over the same store; with --gloo-only the default group is Gloo already.
        self.gloo = dist.new_group(backend="gloo") if self.hetero else dist.group.WORLD
        self.default = dist.group.WORLD
        self.kinds = KINDS_ALL if self.hetero else ("gloo",)

    def max_over_ranks(self, values):
        t = torch.tensor(values, dtype=torch.float64)
        dist.all_reduce(t, op=dist.ReduceOp.MAX, group=self.gloo)
        return t.tolist()

    # ---- allreduce ----

    def tensor_of(self, kind, count):
        if kind == "empty":
            return self.hc.empty(count, dtype=torch.float32)
        return torch.empty(count, dtype=torch.float32)

    def check(self, kind, t, group):
        t.fill_(float(self.rank + 1))
        dist.all_reduce(t, group=group)
        want = float(self.world * (self.world + 1) // 2)
        if not bool(torch.all(t == want)):
            bad = int((t != want).sum())
            raise RuntimeError("%s allreduce of %d B: %d of %d elements differ from %g (first %g)"
                               % (kind, t.numel() * 4, bad, t.numel(), want, float(t[0])))
        t.zero_()  # zeros stay zeros: no overflow, no denormals while timing

    def time_calls(self, t, group, warmup):
        a = self.args
        dist.barrier(group=self.gloo)
        start = time.perf_counter()
        for _ in range(warmup):
            dist.all_reduce(t, group=group)
        per_call = (time.perf_counter() - start) / max(1, warmup)
        per_call = self.max_over_ranks([per_call])[0]
        iters = int(min(a.max_iters, max(a.min_iters, round(a.budget / max(per_call, 1e-6)))))
        dist.barrier(group=self.gloo)
        start = time.perf_counter()
        for _ in range(iters):
            dist.all_reduce(t, group=group)
        return (time.perf_counter() - start) / iters, iters

    def allreduce(self):
        a = self.args
        sizes = [int(s) for s in a.sizes.split(",")]
        for size in sizes:
            count = size // 4
            plain = self.tensor_of("gloo", count)
            plain.zero_()  # first touch outside the timed calls
            bufs = {"gloo": plain, "staged": plain}
            if self.hetero:
                bufs["empty"] = self.tensor_of("empty", count)
                bufs["empty"].zero_()
            groups = {"gloo": self.gloo, "staged": self.default, "empty": self.default}
            warmup = 5 if size <= (1 << 20) else 2 if size <= (16 << 20) else 1
            checked = set()
            for rep in range(a.reps):
                k = rep % len(self.kinds)
                for kind in self.kinds[k:] + self.kinds[:k]:
                    if kind not in checked:
                        self.check(kind, bufs[kind], groups[kind])
                        checked.add(kind)
                    staged = self.hc.staged_bytes() if self.hetero else 0
                    seconds, iters = self.time_calls(bufs[kind], groups[kind], warmup)
                    if self.hetero:  # what the backend copied per call (0 for empty tensors)
                        staged = (self.hc.staged_bytes() - staged) // (iters + warmup)
                    self.records.append(("allreduce", kind, size, rep, iters, staged,
                                         len(self.times)))
                    self.times.append(seconds)
                    if self.rank == 0:
                        log(self.rank, "%-6s %10d B rep %d: %9.1f us x %d"
                            % (kind, size, rep, seconds * 1e6, iters))
            del bufs, plain

    # ---- DDP ----

    def model(self):
        w = self.args.ddp_width
        torch.manual_seed(1234)
        return nn.Sequential(nn.Linear(w, w), nn.ReLU(), nn.Linear(w, w), nn.ReLU(),
                             nn.Linear(w, w))

    def ddp(self):
        a = self.args
        models = {"local": self.model(),
                  "gloo": DistributedDataParallel(self.model(), process_group=self.gloo)}
        if self.hetero:
            models["hetero"] = DistributedDataParallel(self.model(), process_group=self.default)
        names = tuple(models)
        optims = {n: torch.optim.SGD(m.parameters(), lr=0.01) for n, m in models.items()}
        g = torch.Generator().manual_seed(100 + self.rank)
        x = torch.randn(a.ddp_batch, a.ddp_width, generator=g)
        y = torch.randn(a.ddp_batch, a.ddp_width, generator=g)
        losses = {}

        def step(name):
            optims[name].zero_grad()
            loss = nn.functional.mse_loss(models[name](x), y)
            loss.backward()
            optims[name].step()
            return float(loss)

        for name in names:
            for _ in range(a.ddp_warmup):
                step(name)
        # One step of each model in turn, in a rotating order, so that the machine's other work
        # falls on all of them alike.
        for rep in range(a.reps):
            dist.barrier(group=self.gloo)
            for i in range(a.ddp_steps):
                k = (rep * a.ddp_steps + i) % len(names)
                for name in names[k:] + names[:k]:
                    start = time.perf_counter()
                    losses[name] = step(name)
                    self.records.append(("ddp", name, rep, i, len(self.times)))
                    self.times.append(time.perf_counter() - start)
            if self.rank == 0:
                log(self.rank, "ddp rep %d done" % rep)
        return losses

    def run(self):
        self.setup()
        log(self.rank, "joined: default group %s, world %d" % (dist.get_backend(), self.world))
        self.allreduce()
        losses = self.ddp()
        times = self.max_over_ranks(self.times)
        if self.rank == 0:
            out = {"world": self.world, "hetero": self.hetero, "torch": torch.__version__,
                   "allreduce": [], "ddp": [], "losses": losses,
                   "ddp_params": sum(p.numel() for p in self.model().parameters()),
                   "ddp_width": self.args.ddp_width, "ddp_batch": self.args.ddp_batch}
            for r in self.records:
                if r[0] == "allreduce":
                    _, kind, size, rep, iters, staged, i = r
                    out["allreduce"].append({"kind": kind, "bytes": size, "rep": rep,
                                             "iters": iters, "staged_bytes_per_call": staged,
                                             "seconds": times[i]})
                else:
                    _, name, rep, step, i = r
                    out["ddp"].append({"model": name, "rep": rep, "step": step,
                                       "seconds": times[i]})
            tmp = self.args.result + ".tmp"
            with open(tmp, "w") as f:
                json.dump(out, f)
            os.replace(tmp, self.args.result)
        dist.barrier(group=self.gloo)
        dist.destroy_process_group()
        log(self.rank, "done")


def main():
    args = parse()
    torch.set_num_threads(1)  # 2 to 4 ranks share 2 cores; the same for every backend
    try:
        Bench(args).run()
    except Exception as e:  # the log says which rank failed and how; bench/torch reports it
        log(args.rank, "FAILED: %s: %s" % (type(e).__name__, e))
        raise
    return 0


if __name__ == "__main__":
    sys.exit(main())
