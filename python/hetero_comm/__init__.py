"""hetero-comm for PyTorch: the c10d backend "hetero" over the node's hetero-commd.

    import hetero_comm.torch          # registers the backend
    torch.distributed.init_process_group("hetero", ...)

CPU tensors only; GPU jobs keep PyTorch's NCCL backend and load hetero-comm's libnccl.so.2.
"""
import contextlib as _contextlib

import torch as _torch  # the extension links libtorch: load it first

from hetero_comm import _C

__all__ = ["empty", "shared_memory", "staged_bytes", "memory_path", "devices"]


def empty(*size, dtype=_torch.float32):
    """An uninitialised CPU tensor in the daemon's shared memory, which collectives read and
    write in place (no staging copy). size as for torch.empty: ints or one tuple."""
    if len(size) == 1 and isinstance(size[0], (tuple, list, _torch.Size)):
        size = tuple(size[0])
    numel = 1
    for n in size:
        numel *= int(n)
    return _C.empty(numel, dtype).view(size)


@_contextlib.contextmanager
def shared_memory(min_bytes=1 << 16):
    """While the block runs, CPU tensors of at least min_bytes are allocated in the daemon's
    shared memory (torch's allocator takes the rest, and whatever the segment cannot hold), so
    collectives on them go without a copy. Wrap what allocates communication buffers, such as
    DistributedDataParallel(model), whose gradient buckets are made when it is constructed.

    Process-wide while it runs (every thread's allocations). Memory from the segment is not
    inherited by a forked child (MADV_DONTFORK): DataLoader workers must not read such tensors
    unless they are spawned rather than forked."""
    _C.push_shared_allocator(int(min_bytes))
    try:
        yield
    finally:
        _C.pop_shared_allocator()


def staged_bytes():
    """Bytes this process has handed to hetero-commd from memory not made by empty(): the
    client copies those through its staging area."""
    return _C.staged_bytes()


def memory_path():
    """How host memory not made by empty() reaches the daemon (libhcclient's words)."""
    return _C.memory_path()


def devices():
    """The node's GPUs as its hetero-commd found them, in the daemon's order: one dict each with
    id ("nvidia:0", "sim-amd:0"), vendor, backend ("cuda", "hip", "sim", "none"), model,
    pci_bus_id, memory_bytes (0 unknown), numa_node (-1 unknown), measured (bool), weight,
    h2d_gbps, d2h_gbps, reduce_gbps, rate_gbps and note.

    weight is the device's staging + kernel rate relative to the node's fastest measured GPU
    (1.0); 0 while not measured, and note says why. The daemon measures in the background
    shortly after it starts, so an early call may find measured False with note "measuring"."""
    return _C.devices()
