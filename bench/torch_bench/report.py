"""The tables and the targets block of bench/torch, from the raw times (medians throughout)."""

import statistics

MIB = 1 << 20


def busbw(size, seconds, nranks):
    """nccl-tests allreduce bus bandwidth in GB/s (10^9 B/s): size / time * 2(n-1)/n."""
    if not seconds or nranks < 2:
        return None
    return size / seconds / 1e9 * 2 * (nranks - 1) / nranks


def fmt_bytes(n):
    for unit, div in (("G", 1 << 30), ("M", MIB), ("K", 1 << 10)):
        if n >= div and n % div == 0:
            return "%d%s" % (n // div, unit)
    return str(n)


def ratio(a, b):
    return a / b if a is not None and b else None


def cell(v, width, spec="%.2f"):
    return (spec % v if v is not None else "-").rjust(width)


class ConfigResult:
    """What one configuration measured: the ranks' JSON (or an error) and hc-perf's times."""

    def __init__(self, key, title, daemons, nranks):
        self.key, self.title, self.daemons, self.nranks = key, title, daemons, nranks
        self.load = None  # 1-minute load average when the configuration started
        self.torch = None
        self.torch_error = None
        # (variant, size) -> list of (out-of-place us, in-place us); variants, see VARIANTS
        self.hcperf = {}
        self.hcperf_error = None

    def torch_seconds(self, kind, size):
        if not self.torch:
            return None
        v = [r["seconds"] for r in self.torch["allreduce"]
             if r["kind"] == kind and r["bytes"] == size]
        return statistics.median(v) if v else None

    def torch_busbw(self, kind, size):
        return busbw(size, self.torch_seconds(kind, size), self.nranks)

    def hcperf_busbw(self, variant, size, in_place=True):
        v = [p[1 if in_place else 0] for p in self.hcperf.get((variant, size), [])]
        return busbw(size, statistics.median(v) * 1e-6, self.nranks) if v else None

    def sizes(self):
        s = set(size for _, size in self.hcperf)
        if self.torch:
            s.update(r["bytes"] for r in self.torch["allreduce"])
        return sorted(s)

    def ddp_ms(self, model):
        if not self.torch:
            return None
        v = [r["seconds"] for r in self.torch["ddp"] if r["model"] == model]
        return statistics.median(v) * 1e3 if v else None

    def ddp_steps(self, model):
        return sum(1 for r in self.torch["ddp"] if r["model"] == model) if self.torch else 0


# hc-perf's runs: "heap" and "host" are --device heap and host with the torch ranks' segment size,
# the same memory and segment as "staged" and "empty"; "own" is host memory in hc-perf's own
# segment (about twice the buffer), which it gets by itself.
VARIANTS = ("heap", "host", "own")

HEADER = ("%10s %7s %7s %7s %6s %6s %8s %8s %8s %7s %7s %8s"
          % ("bytes", "gloo", "staged", "empty", "st/gl", "em/gl", "hcp-heap", "hcp-host",
             "hcp-own", "st/heap", "em/host", "own/host"))


def config_table(c, reps, perf_reps):
    lines = ["== %s: allreduce busbw (GB/s), fp32 sum; medians of %d repetitions (hc-perf: %d)"
             % (c.title, reps, perf_reps)]
    if c.torch_error:
        lines.append("   torch ranks FAILED: " + c.torch_error)
    if c.hcperf_error:
        lines.append("   hc-perf FAILED: " + c.hcperf_error)
    if c.torch:
        staged = max((r.get("staged_bytes_per_call", 0) for r in c.torch["allreduce"]
                      if r["kind"] == "empty"), default=0)
        if staged:
            lines.append("   note: the backend staged up to %d B per call of hetero_comm.empty "
                         "tensors (rank 0's staged_bytes())" % staged)
    lines.append(HEADER)
    for size in c.sizes():
        g, s, e = (c.torch_busbw(k, size) for k in ("gloo", "staged", "empty"))
        hp, hh, ho = (c.hcperf_busbw(v, size) for v in VARIANTS)
        lines.append("%10d %s %s %s %s %s %s %s %s %s %s %s" % (
            size, cell(g, 7), cell(s, 7), cell(e, 7), cell(ratio(s, g), 6), cell(ratio(e, g), 6),
            cell(hp, 8), cell(hh, 8), cell(ho, 8), cell(ratio(s, hp), 7), cell(ratio(e, hh), 7),
            cell(ratio(ho, hh), 8)))
    return lines


def ddp_table(configs, width, batch, params, steps_note):
    lines = ["== DDP step time (ms, median of %s): MLP 3 x Linear(%d, %d), %d parameters, batch %d"
             % (steps_note, width, width, params, batch),
             "%-22s %8s %8s %8s %10s %10s %10s %10s" % ("config", "local", "gloo", "hetero",
                                                        "gloo/het", "gloo-loc", "het-loc",
                                                        "loss-diff")]
    for c in configs:
        if not c.torch:
            lines.append("%-22s %s" % (c.title, "FAILED" if c.torch_error else "not run"))
            continue
        loc, g, h = c.ddp_ms("local"), c.ddp_ms("gloo"), c.ddp_ms("hetero")
        losses = c.torch.get("losses", {})
        diff = None
        if "gloo" in losses and "hetero" in losses and losses["gloo"]:
            diff = abs(losses["hetero"] - losses["gloo"]) / abs(losses["gloo"])
        lines.append("%-22s %s %s %s %s %s %s %s" % (
            c.title, cell(loc, 8), cell(g, 8), cell(h, 8), cell(ratio(g, h), 10),
            cell(g - loc if g is not None and loc is not None else None, 10),
            cell(h - loc if h is not None and loc is not None else None, 10),
            cell(diff, 10, "%.1e")))
    return lines


# Busbw ratio targets against Gloo, by configuration; None: shown, not judged (with one rank per
# daemon the issue expects hetero to equal Gloo today).
RATIO_TARGETS = (("d1n2", 3.0), ("d1n4", 3.0), ("d2n2", None), ("d2n4", 1.5))

# Overhead targets: the torch kind, the hc-perf variant on the same memory and segment size, the
# most its time may exceed hc-perf's (percent), and the memory in words.
OVERHEAD_TARGETS = (("staged", "heap", 10.0, "staged (heap)"),
                    ("empty", "host", 5.0, "hetero_comm.empty"))


def targets(configs, size=64 * MIB):
    """(lines, misses): each target at size with its measured value, limit and verdict. The
    overhead targets compare with hc-perf on the same memory and segment size; the last column
    gives the same figure against hc-perf with its own segment (hcp-own), for information."""
    rows = []
    by_key = {c.key: c for c in configs}

    def add(name, value, limit, higher_is_better, fmt, note=None):
        note_text = fmt % note if note is not None else "-"
        limit_text = "-"
        if limit is not None:
            limit_text = "%s %s" % (">=" if higher_is_better else "<=", fmt % limit)
        if value is None:
            rows.append((name, "-", limit_text, "SKIP", note_text))
            return
        if limit is None:
            rows.append((name, fmt % value, limit_text, "info", note_text))
            return
        ok = value >= limit if higher_is_better else value <= limit
        rows.append((name, fmt % value, limit_text, "PASS" if ok else "MISS", note_text))

    def over(reference, measured):  # torch time over hc-perf time, in percent
        r = ratio(reference, measured)
        return (r - 1) * 100 if r is not None else None

    for key, limit in RATIO_TARGETS:
        c = by_key.get(key)
        if c is None:
            continue
        g = c.torch_busbw("gloo", size)
        for kind in ("staged", "empty"):
            add("%s: hetero %s / gloo busbw" % (c.title, kind),
                ratio(c.torch_busbw(kind, size), g), limit, True, "%.2fx")
    for c in configs:
        own = c.hcperf_busbw("own", size)
        for kind, variant, limit, mem in OVERHEAD_TARGETS:
            t = c.torch_busbw(kind, size)
            add("%s: %s time over hcp-%s" % (c.title, mem, variant),
                over(c.hcperf_busbw(variant, size), t), limit, False, "%+.1f%%", over(own, t))
    width = max(len(r[0]) for r in rows) if rows else 10
    lines = ["== targets at %s (medians of this run; info: not judged)" % fmt_bytes(size),
             "%-*s %10s %10s  %-7s %10s" % (width, "target", "measured", "limit", "verdict",
                                            "vs hcp-own")]
    lines += ["%-*s %10s %10s  %-7s %10s" % (width, *r) for r in rows]
    return lines, sum(1 for r in rows if r[3] == "MISS")
