"""Private hetero-commd daemons for one configuration, started and stopped like scripts/demo."""

import os
import signal
import socket
import subprocess
import time

# The daemons talk over TCP on 127.0.0.1 as separate nodes would (UCX would pick shared memory
# between processes of one host otherwise).
UCX_ENV = {"UCX_TLS": "tcp,self", "UCX_NET_DEVICES": "lo"}


class DaemonError(RuntimeError):
    pass


def free_port():
    """A TCP port on 127.0.0.1 that was free a moment ago (for the rendezvous store)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class DaemonSet:
    """count daemons in folder/; node n listens on folder/nodeN.sock, logs to logs/nodeN.log."""

    def __init__(self, build, folder, logs, count, settings=()):
        self.build = build
        self.settings = list(settings)  # extra "key=value" for --set, on every daemon
        self.folder = folder
        self.logs = logs
        self.count = count
        self.procs = []
        self.sockets = [os.path.join(folder, "node%d.sock" % n) for n in range(count)]
        self.log_paths = [os.path.join(logs, "node%d.log" % n) for n in range(count)]

    def env(self):
        env = dict(os.environ)
        env.update(UCX_ENV)
        return env

    def start(self, ready_timeout=20.0):
        os.makedirs(self.folder, exist_ok=True)
        token = os.path.join(self.folder, "cluster.token")
        # The cluster token the daemons prove membership with (it never travels).
        fd = os.open(token, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(os.urandom(32))
        daemon = os.path.join(self.build, "daemon", "hetero-commd")
        for n in range(self.count):
            cmd = [daemon, "--socket", self.sockets[n],
                   "--state-dir", os.path.join(self.folder, "state%d" % n),
                   "--set", "peer.listen=127.0.0.1:0",
                   "--set", "peer.token_file=" + token]
            for kv in self.settings:
                cmd += ["--set", kv]
            with open(self.log_paths[n], "wb") as log:
                self.procs.append(subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT,
                                                   stdin=subprocess.DEVNULL, env=self.env()))
        for n in range(self.count):
            self._wait_ready(n, ready_timeout)

    def _wait_ready(self, n, timeout):
        worker = os.path.join(self.build, "tests", "integration", "hc_rank_worker")
        env = self.env()
        env["HC_SOCKET"] = self.sockets[n]
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.procs[n].poll() is not None:
                break
            probe = subprocess.run([worker, "--probe"], env=env, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL)
            if probe.returncode == 0:
                return
            time.sleep(0.05)
        raise DaemonError("hetero-commd of node %d did not come up; its log: %s"
                          % (n, self.log_paths[n]))

    def stop(self, grace=15.0):
        """SIGTERM, then SIGKILL after grace seconds. Returns the problems (empty when clean)."""
        problems = []
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + grace
        for n, p in enumerate(self.procs):
            try:
                p.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
                problems.append("hetero-commd of node %d still ran %.0f s after SIGTERM (killed)"
                                % (n, grace))
                continue
            if p.returncode != 0:
                problems.append("hetero-commd of node %d exited with status %d (log %s)"
                                % (n, p.returncode, self.log_paths[n]))
        self.procs = []
        return problems

    def kill(self):
        for p in self.procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        self.procs = []
