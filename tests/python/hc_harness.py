"""Private daemons and rank processes for the hetero_comm pytest suite.

The suite never touches a system daemon: each configuration starts its own hetero-commd processes
in a scratch folder (as scripts/demo does) and spawns its rank processes with torch's "spawn"
start method. Everything here runs in the pytest process except _rank_entry, which is the first
function of every rank process. A run has a hard deadline: leftovers are killed and the failure
names who was late, so a hung backend fails the suite instead of hanging it.
"""
import ctypes
import datetime
import faulthandler
import os
import pickle
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import warnings
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
READY_POLL_S = 0.05
READY_LIMIT_S = 10.0
STOP_LIMIT_S = 15.0
LOG_TAIL_CHARS = 6000


def build_dir():
    """The CMake build folder: $HC_BUILD_DIR (relative to the working folder) or <repo>/build."""
    value = os.environ.get("HC_BUILD_DIR")
    return Path(value).resolve() if value else REPO / "build"


def python_dir():
    return build_dir() / "python"


def why_unavailable(backends):
    """None when the suite can run the given backends, else the reason it cannot."""
    try:
        import torch  # noqa: F401
        import torch.distributed as dist
    except Exception as error:  # an ImportError, or a broken torch install
        return f"cannot import torch with {sys.executable}: {error}"
    if not dist.is_available():
        return "this torch build has no torch.distributed"
    if "hetero" in backends and not (python_dir() / "hetero_comm").is_dir():
        return (f"{python_dir() / 'hetero_comm'} does not exist: build the python package "
                f"(HC_BUILD_DIR={build_dir()})")
    return None


def selected_backends():
    """HC_TEST_BACKENDS (comma-separated, default "gloo,hetero"): "gloo" alone checks the suite's
    own expectations against PyTorch's Gloo before the hetero backend exists."""
    names = os.environ.get("HC_TEST_BACKENDS", "gloo,hetero")
    return [name.strip() for name in names.split(",") if name.strip()]


def need_backend(backend):
    """Skips the calling test when this run does not select `backend`."""
    import pytest
    if backend not in selected_backends():
        pytest.skip(f"backend {backend} not selected (HC_TEST_BACKENDS="
                    f"{','.join(selected_backends())})")


_scratch = None


def scratch_root():
    """One folder per pytest session holding every daemon's and run's files; conftest removes
    it when the session passed and names it when something failed."""
    global _scratch
    if _scratch is None:
        _scratch = Path(tempfile.mkdtemp(prefix="hc-pytest-"))
    return _scratch


def _tail(path, limit=LOG_TAIL_CHARS):
    try:
        text = Path(path).read_text(errors="replace")
    except OSError as error:
        return f"<cannot read {path}: {error}>"
    return text if len(text) <= limit else "...\n" + text[-limit:]


def _die_with_parent():
    # PR_SET_PDEATHSIG: a daemon must not outlive a pytest process that was killed outright.
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)
    except Exception:
        pass


class Daemons:
    """count private hetero-commd processes; the ones of a multi-daemon job reach each other over
    TCP on 127.0.0.1 (UCX_TLS=tcp,self), like separate nodes, proving membership with one token."""

    def __init__(self, count, workdir, extra_args=()):
        self.count = count
        self.extra_args = list(extra_args)  # more flags for every daemon ("--set", "k=v", ...)
        self.workdir = Path(workdir)
        self.procs = []
        self.sockets = [str(self.workdir / f"node{n}.sock") for n in range(count)]
        self.logs = [self.workdir / f"node{n}.log" for n in range(count)]
        self.exit_codes = []

    def start(self):
        binary = build_dir() / "daemon" / "hetero-commd"
        probe = build_dir() / "tests" / "integration" / "hc_rank_worker"
        for path in (binary, probe):
            if not os.access(path, os.X_OK):
                raise RuntimeError(f"{path} is not built")
        env = dict(os.environ, UCX_TLS="tcp,self")
        env.pop("HC_SOCKET", None)
        token = self.workdir / "cluster.token"
        token.write_bytes(secrets.token_bytes(32))
        token.chmod(0o600)
        for n in range(self.count):
            args = [str(binary), "--socket", self.sockets[n],
                    "--state-dir", str(self.workdir / f"state{n}")]
            if self.count > 1:
                args += ["--set", "peer.listen=127.0.0.1:0",
                         "--set", f"peer.token_file={token}"]
            args += self.extra_args
            (self.workdir / f"state{n}").mkdir(exist_ok=True)
            with open(self.logs[n], "wb") as log:
                self.procs.append(subprocess.Popen(
                    args, stdout=log, stderr=subprocess.STDOUT, env=env,
                    stdin=subprocess.DEVNULL, preexec_fn=_die_with_parent))
        for n in range(self.count):
            self._wait_ready(n, probe, env)
        return self

    def _wait_ready(self, n, probe, env):
        deadline = time.monotonic() + READY_LIMIT_S
        while time.monotonic() < deadline:
            if self.procs[n].poll() is not None:
                break
            probed = subprocess.run([str(probe), "--probe"],
                                    env=dict(env, HC_SOCKET=self.sockets[n]),
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                    timeout=READY_LIMIT_S)
            if probed.returncode == 0:
                return
            time.sleep(READY_POLL_S)
        self.stop()
        raise RuntimeError(f"hetero-commd {n} did not come up within {READY_LIMIT_S} s "
                           f"(exit {self.procs[n].returncode}); its log:\n{_tail(self.logs[n])}")

    def stop(self):
        """SIGTERM, then SIGKILL after STOP_LIMIT_S; returns each daemon's exit status."""
        for proc in self.procs:
            if proc.poll() is None:
                proc.terminate()
        codes = []
        for proc in self.procs:
            try:
                codes.append(proc.wait(STOP_LIMIT_S))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                codes.append(f"killed: still running {STOP_LIMIT_S} s after SIGTERM")
        self.exit_codes = codes
        return codes

    def log_text(self):
        return "\n".join(f"--- hetero-commd {n} log ({self.logs[n]}):\n{_tail(self.logs[n])}"
                         for n in range(self.count))


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class RankResult:
    rank: int
    finished: bool = False      # the rank wrote a result (a value or an exception)
    value: object = None
    error_type: str = None
    error_message: str = None
    traceback: str = None
    exitcode: object = None     # int, or a text when the harness had to kill the process
    log: str = ""

    @property
    def error(self):
        return None if self.error_type is None else f"{self.error_type}: {self.error_message}"


@dataclass
class Run:
    results: list
    workdir: Path
    elapsed_s: float
    daemons: object = None
    problems: list = field(default_factory=list)  # what the harness saw: late ranks, bad exits

    def values(self):
        """Each rank's return value, after assert_ok."""
        self.assert_ok()
        return [result.value for result in self.results]

    def report(self):
        lines = [f"run folder {self.workdir}, {self.elapsed_s:.1f} s"] + self.problems
        for result in self.results:
            state = "returned" if result.finished and not result.error_type else (
                result.error or "wrote no result")
            lines.append(f"=== rank {result.rank}: {state}; exit {result.exitcode}")
            if result.traceback:
                lines.append(result.traceback)
            lines.append(f"--- rank {result.rank} output:\n{result.log}")
        if self.daemons is not None:
            lines.append(self.daemons.log_text())
        return "\n".join(lines)

    def assert_ok(self):
        bad = self.problems or [r for r in self.results
                                if not r.finished or r.error_type or r.exitcode != 0]
        assert not bad, "rank processes failed\n" + self.report()


def _rank_socket(rank, nranks, sockets):
    if not sockets:
        return None
    per_daemon = -(-nranks // len(sockets))
    return sockets[rank // per_daemon]


def run_ranks(fn, nranks, sockets, backend, timeout_s, args=(), *, pg_timeout_s=60.0,
              store="file", daemons=None, env=None):
    """Runs fn(rank, nranks, *args) in nranks spawned processes, after init_process_group(backend)
    over a file://, tcp:// or env:// store. Returns a Run whose results hold each rank's return
    value or exception; never blocks past timeout_s (+ a few seconds to kill and collect)."""
    import torch.multiprocessing as mp

    workdir = Path(tempfile.mkdtemp(prefix=f"ranks-{getattr(fn, '__name__', 'fn')}-",
                                    dir=scratch_root()))
    if store == "file":
        init_method = f"file://{workdir / 'store'}"
    elif store in ("tcp", "env"):
        port = free_port()
        init_method = f"tcp://127.0.0.1:{port}" if store == "tcp" else "env://"
        env = dict(env or {}, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    else:
        raise ValueError(f"unknown store {store!r}")
    context = mp.get_context("spawn")
    started = time.monotonic()
    deadline = started + timeout_s
    procs = []
    for rank in range(nranks):
        spec = dict(fn=fn, rank=rank, nranks=nranks, backend=backend, args=tuple(args),
                    socket=_rank_socket(rank, nranks, sockets), init_method=init_method,
                    pg_timeout_s=pg_timeout_s, workdir=str(workdir), env=dict(env or {}),
                    hard_s=max(1.0, timeout_s - 2.0), pythonpath=str(python_dir()))
        proc = context.Process(target=_rank_entry, args=(spec,), name=f"hc-rank{rank}")
        proc.start()
        procs.append(proc)
    problems = []
    results = [RankResult(rank) for rank in range(nranks)]
    # Once every rank has reported, a rank that cannot exit (a stuck destructor) is a failure too.
    exit_deadline = None
    while any(proc.is_alive() for proc in procs) and time.monotonic() < deadline:
        if exit_deadline is None and all((workdir / f"result{r}.pkl").exists()
                                         for r in range(nranks)):
            exit_deadline = min(deadline, time.monotonic() + 15.0)
        if exit_deadline is not None and time.monotonic() > exit_deadline:
            break
        time.sleep(0.05)
    for rank, proc in enumerate(procs):
        if proc.is_alive():
            problems.append(f"rank {rank} still running after {time.monotonic() - started:.1f} s "
                            f"(limit {timeout_s} s): killed")
            proc.kill()
        proc.join(5.0)
        results[rank].exitcode = proc.exitcode
    for result in results:
        path = workdir / f"result{result.rank}.pkl"
        if path.exists():
            outcome = pickle.loads(path.read_bytes())
            result.finished = True
            result.value = outcome.get("value")
            result.error_type = outcome.get("error_type")
            result.error_message = outcome.get("error_message")
            result.traceback = outcome.get("traceback")
        result.log = _tail(workdir / f"rank{result.rank}.log")
    return Run(results, workdir, time.monotonic() - started, daemons, problems)


def _file_barrier(workdir, name, rank, nranks, limit_s):
    # Before init_process_group: spawning and importing torch on two cores can take longer than
    # the short store timeout that the timeout tests give their group.
    Path(workdir, f"{name}.{rank}").touch()
    end = time.monotonic() + limit_s
    while time.monotonic() < end:
        if all(Path(workdir, f"{name}.{r}").exists() for r in range(nranks)):
            return
        time.sleep(0.02)
    raise RuntimeError(f"harness barrier {name}: not every rank arrived within {limit_s} s")


def _watch_parent():
    # An orphaned rank (pytest killed) exits instead of holding the daemon's communicator open.
    parent = os.getppid()
    while True:
        time.sleep(1.0)
        if os.getppid() != parent:
            os._exit(70)


def _rank_entry(spec):
    rank, workdir = spec["rank"], spec["workdir"]
    log = open(Path(workdir, f"rank{rank}.log"), "w", buffering=1)
    os.dup2(log.fileno(), 1)
    os.dup2(log.fileno(), 2)
    sys.stdout = sys.stderr = log
    # A hang inside C++ never returns to Python: print every thread's stack before the parent's
    # deadline kills the process.
    faulthandler.dump_traceback_later(spec["hard_s"], exit=True, file=log)
    threading.Thread(target=_watch_parent, daemon=True).start()
    os.environ.update(spec["env"])
    if spec["socket"]:
        os.environ["HC_SOCKET"] = spec["socket"]
    if spec["pythonpath"] not in sys.path:
        sys.path.insert(0, spec["pythonpath"])
    warnings.filterwarnings("ignore", message=".*private function.*")
    outcome = {}
    try:
        import torch.distributed as dist
        if spec["backend"] == "hetero":
            import hetero_comm.torch  # noqa: F401  (registers the "hetero" backend)
        _file_barrier(workdir, "arrived", rank, spec["nranks"], spec["hard_s"])
        dist.init_process_group(spec["backend"], init_method=spec["init_method"], rank=rank,
                                world_size=spec["nranks"],
                                timeout=datetime.timedelta(seconds=spec["pg_timeout_s"]))
        outcome["value"] = spec["fn"](rank, spec["nranks"], *spec["args"])
    except BaseException as error:  # reported to the parent, which decides what it means
        outcome.update(error_type=type(error).__name__, error_message=str(error),
                       traceback=traceback.format_exc())
        print(outcome["traceback"], flush=True)
    tmp = Path(workdir, f"result{rank}.tmp")
    tmp.write_bytes(pickle.dumps(outcome))
    tmp.rename(Path(workdir, f"result{rank}.pkl"))
    print(f"rank {rank}: result written", flush=True)
    try:
        import torch.distributed as dist
        if dist.is_initialized():
            dist.destroy_process_group()
    except Exception as error:
        print(f"rank {rank}: destroy_process_group raised {error!r}", flush=True)
        sys.exit(3)
