"""Importing this module registers the torch.distributed backend "hetero"."""
import torch.distributed as dist

from hetero_comm import _C

BACKEND = "hetero"

# torch 1.13 refuses a second registration of one name; a reload must not fail.
if BACKEND.upper() not in dist.Backend._plugins:
    dist.Backend.register_backend(BACKEND, _C.create)
