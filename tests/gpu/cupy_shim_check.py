#!/usr/bin/env python3
"""One rank of CuPy's NCCL binding (cupy.cuda.nccl) over hetero-comm's shim.

scripts/gpu-check (stage 1, step cupy) runs two of these on GPU 0 with
LD_PRELOAD=libnccl.so.2 of the kit:

    cupy_shim_check.py --rank R --nranks N --id-file PATH [--timeout SECONDS]

Rank 0 writes the NCCL unique id to PATH, the others read it there. One
float32 allreduce (sum) of 1 Mi + 3 elements on a CuPy stream, checked on the
host; prints "WRONG ..." when it is not right and "#wrong N" last; exits 0
only when N is 0.
"""
import argparse
import faulthandler
import json
import os
import sys
import time

import cupy
import numpy
from cupy.cuda import nccl

COUNT = (1 << 20) + 3


def pattern(n, rank):
    # Small integers: float32 sums of a few ranks are exact, so a result can
    # be compared for equality.
    return numpy.arange(n) % 13 + 2 * rank + 1


def exchange_id(rank, path, seconds):
    if rank == 0:
        uid = nccl.get_unique_id()
        # Written aside and renamed: a reader never sees half an id.
        with open(path + ".tmp", "w") as f:
            json.dump(list(uid), f)
        os.rename(path + ".tmp", path)
        return uid
    deadline = time.monotonic() + seconds
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            raise TimeoutError(f"no unique id in {path} after {seconds} s")
        time.sleep(0.05)
    with open(path) as f:
        return tuple(json.load(f))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rank", type=int, required=True)
    parser.add_argument("--nranks", type=int, default=2)
    parser.add_argument("--id-file", required=True)
    parser.add_argument("--timeout", type=float, default=50.0)
    args = parser.parse_args()
    sys.stdout.reconfigure(line_buffering=True)
    # A hang in C code (NCCL calls, the shim) never returns to Python: a
    # watchdog thread in C prints every thread's stack and exits instead.
    faulthandler.dump_traceback_later(args.timeout, exit=True)

    device = cupy.cuda.Device(0)
    device.use()
    print(f"cupy {cupy.__version__}, nccl {nccl.get_version()}")
    uid = exchange_id(args.rank, args.id_file, args.timeout / 2)
    comm = nccl.NcclCommunicator(args.nranks, uid, args.rank)

    send = cupy.asarray(pattern(COUNT, args.rank), dtype=cupy.float32)
    recv = cupy.full(COUNT, -1, dtype=cupy.float32)
    stream = cupy.cuda.Stream(non_blocking=True)
    # The buffers were filled on the default stream and the allreduce runs on
    # another one, which does not wait for it.
    device.synchronize()
    comm.allReduce(send.data.ptr, recv.data.ptr, COUNT, nccl.NCCL_FLOAT32,
                   nccl.NCCL_SUM, stream.ptr)
    stream.synchronize()

    want = sum(pattern(COUNT, r) for r in range(args.nranks))
    got = cupy.asnumpy(recv)
    bad = numpy.flatnonzero(got != want.astype(numpy.float32))
    if bad.size:
        i = bad[0]
        print(f"WRONG allreduce sum float32 n={COUNT}: {bad.size} wrong; "
              f"first at {i}: got {got[i]} want {want[i]}")
    comm.destroy()
    print(f"#wrong {bad.size}")
    return 0 if bad.size == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
