"""hc-perf at the placements of bench/torch. `--device host` buffers are hc_mem_alloc memory in the
client's segment (zero copy, as hetero_comm.empty tensors); `--device heap` buffers are the
process's own memory, which the client stages through its segment (as plain torch tensors). One
launch per size, repetition, memory and segment size; each gives the out-of-place and the in-place
time (torch's all_reduce is in place). hc-perf asks for a segment of about twice the buffer unless
HC_SEGMENT_BYTES is set; segment_bytes sets it, and hc-perf's speed depends on it."""

import os
import subprocess

from . import daemons


def command(build, sockets, nranks, size, warmup, iters, device="host"):
    cmd = [os.path.join(build, "bench", "hc-perf"), "--device", device]
    if len(sockets) == 1:
        cmd += ["-s", sockets[0]]
    else:
        cmd += ["--sockets", ",".join(sockets)]
    cmd += ["-N", str(nranks), "-b", str(size), "-e", str(size), "-o", "allreduce", "-d", "float",
            "-w", str(warmup), "-n", str(iters), "-c", "0", "-m", "0", "-T", "120"]
    return cmd


def parse_row(text, size):
    """(out-of-place us, in-place us) of the row of size bytes in an nccl-tests table."""
    for line in text.splitlines():
        if line.startswith("#") or not line.strip():
            continue
        f = line.split()
        if len(f) >= 13 and f[0] == str(size):
            return float(f[5]), float(f[9])
    raise ValueError("no row of %d B in hc-perf's output" % size)


def run(build, sockets, nranks, size, warmup, iters, log_path, device="host", segment_bytes=None,
        timeout=300):
    """(out-of-place us, in-place us); raises RuntimeError naming the log on failure."""
    cmd = command(build, sockets, nranks, size, warmup, iters, device)
    env = dict(os.environ)
    env.update(daemons.UCX_ENV)
    env.pop("HC_SEGMENT_BYTES", None)
    if segment_bytes:
        env["HC_SEGMENT_BYTES"] = str(segment_bytes)
    try:
        done = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env,
                              timeout=timeout, stdin=subprocess.DEVNULL)
        text = done.stdout.decode(errors="replace")
    except subprocess.TimeoutExpired as e:
        text = (e.stdout or b"").decode(errors="replace")
        done = None
    with open(log_path, "a") as f:
        seg = "HC_SEGMENT_BYTES=%d " % segment_bytes if segment_bytes else ""
        f.write("$ " + seg + " ".join(cmd) + "\n" + text + "\n")
    if done is None:
        raise RuntimeError("hc-perf ran past %d s (log %s)" % (timeout, log_path))
    if done.returncode != 0:
        raise RuntimeError("hc-perf exited with status %d (log %s)" % (done.returncode, log_path))
    try:
        return parse_row(text, size)
    except ValueError as e:
        raise RuntimeError("%s (log %s)" % (e, log_path))
