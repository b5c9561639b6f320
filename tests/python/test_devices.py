"""hetero_comm.devices() lists the node's GPUs as the daemon reports them (hc_get_devices).

The daemon runs with one simulated NVIDIA and one simulated AMD device of a known memory size,
copying and reducing at 0.1 and 0.05 GB/s (devices.sim.device_mbps); each query runs in a fresh
interpreter, so this process never holds a connection to a daemon the fixture stops. The daemon
measures the weights in the background after it starts: the test waits for that (10 s at most)
before it looks at them. The README's example (python/examples/split_batch_by_weight.py) runs
against the same daemon.
"""
import json
import os
import subprocess
import sys
import tempfile
import time

import pytest

pytest.importorskip("torch")

import hc_harness  # noqa: E402

SIM_MEMORY = 3 << 30
MEASURE_LIMIT_S = 10.0
KEYS = {"id", "vendor", "backend", "model", "pci_bus_id", "memory_bytes", "numa_node", "measured",
        "weight", "h2d_gbps", "d2h_gbps", "reduce_gbps", "rate_gbps", "note"}

QUERY = """
import json, time
import hetero_comm
deadline = time.monotonic() + {limit}
rows = hetero_comm.devices()
while {wait} and not all(r["measured"] for r in rows) and time.monotonic() < deadline:
    time.sleep(0.1)
    rows = hetero_comm.devices()
print(json.dumps(rows))
"""


@pytest.fixture(scope="module")
def sim_daemon():
    hc_harness.need_backend("hetero")
    workdir = tempfile.mkdtemp(prefix="devices-", dir=hc_harness.scratch_root())
    daemons = hc_harness.Daemons(1, workdir, extra_args=[
        "--set", "devices.sim.nvidia=1", "--set", "devices.sim.amd=1",
        "--set", f"devices.sim.memory_bytes={SIM_MEMORY}",
        "--set", "devices.sim.device_mbps=100,50"]).start()
    yield daemons
    codes = daemons.stop()
    if any(code != 0 for code in codes):
        pytest.fail(f"hetero-commd exit statuses after SIGTERM: {codes}\n{daemons.log_text()}")


def client_env(daemons):
    env = dict(os.environ, HC_SOCKET=daemons.sockets[0])
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(hc_harness.python_dir()), env.get("PYTHONPATH", "")) if p)
    return env


def query(daemons, wait_measured):
    code = QUERY.format(limit=MEASURE_LIMIT_S, wait=bool(wait_measured))
    done = subprocess.run([sys.executable, "-c", code], env=client_env(daemons),
                          capture_output=True, text=True, timeout=MEASURE_LIMIT_S + 60)
    assert done.returncode == 0, f"{done.stderr}\n{daemons.log_text()}"
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_lists_both_sim_devices(sim_daemon):
    rows = query(sim_daemon, wait_measured=False)
    assert [r["id"] for r in rows] == ["sim-nvidia:0", "sim-amd:0"], rows
    for row, vendor in zip(rows, ("nvidia", "amd")):
        assert set(row) == KEYS
        assert row["vendor"] == vendor
        assert row["backend"] == "sim"
        assert row["memory_bytes"] == SIM_MEMORY
        assert row["pci_bus_id"] == ""
        assert isinstance(row["measured"], bool)
        assert row["weight"] >= 0


def test_weights_once_measured(sim_daemon):
    start = time.monotonic()
    rows = query(sim_daemon, wait_measured=True)
    assert all(r["measured"] for r in rows), (
        f"not measured within {MEASURE_LIMIT_S} s of asking "
        f"({time.monotonic() - start:.1f} s): {[r['note'] for r in rows]}")
    for row in rows:
        assert 0 < row["weight"] <= 1.0, row
        assert row["rate_gbps"] > 0, row
    weights = {r["id"]: r["weight"] for r in rows}
    assert weights["sim-nvidia:0"] == pytest.approx(1.0)
    # Configured 100 vs 50 MB/s. The daemon's own tests hold the ratio to 10% (measuring again when
    # a busy machine disturbed it); here it only has to come through Python in order.
    assert weights["sim-amd:0"] == pytest.approx(0.5, abs=0.15)


def test_readme_example_splits_a_batch_by_weight(sim_daemon):
    rows = query(sim_daemon, wait_measured=True)
    assert all(r["measured"] for r in rows), [r["note"] for r in rows]
    example = hc_harness.REPO / "python" / "examples" / "split_batch_by_weight.py"
    done = subprocess.run([sys.executable, str(example), "96"], env=client_env(sim_daemon),
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    shares = json.loads(done.stdout.strip().splitlines()[-1])
    assert set(shares) == {"sim-nvidia:0", "sim-amd:0"}, shares
    assert sum(shares.values()) == 96, shares
    # The slower GPU gets about half the faster one's share (weights 1.0 and about 0.5).
    assert shares["sim-amd:0"] / shares["sim-nvidia:0"] == pytest.approx(0.5, abs=0.2), shares
