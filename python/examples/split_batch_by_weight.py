"""Shares a global batch among this node's GPUs in proportion to the speed weights hetero-commd
measured (hetero_comm.devices()), and prints {device id: samples}. A framework would give each
local rank the share of the GPU it runs on. Usage: split_batch_by_weight.py [BATCH] (default 96).
"""
import json
import sys

import hetero_comm

batch = int(sys.argv[1]) if len(sys.argv) > 1 else 96

gpus = [d for d in hetero_comm.devices() if d["measured"]]
total = sum(d["weight"] for d in gpus)
shares = {d["id"]: int(batch * d["weight"] / total) for d in gpus}
fastest = max(gpus, key=lambda d: d["weight"])
shares[fastest["id"]] += batch - sum(shares.values())  # what rounding down left over

print(json.dumps(shares))
