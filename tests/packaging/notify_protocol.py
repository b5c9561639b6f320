"""hetero-commd under a stand-in for systemd: what hetero-commd.service and .socket rely on.

activation: the daemon gets a listening SEQPACKET socket as fd 3 (LISTEN_FDS=1, LISTEN_PID),
  as hetero-commd.socket has systemd pass it (non-blocking only if the service says
  NonBlocking=yes),
  and must serve it instead of binding the path itself: send READY=1 from its main pid
  (NotifyAccess=main), take a client, then send STOPPING=1 on SIGTERM and exit 0.
watchdog: when the unit sets WatchdogSec=, systemd kills a daemon that does not send
  WATCHDOG=1 within that time. With WATCHDOG_USEC of 2 s the daemon must ping at least every
  second (half the interval, as sd_watchdog_enabled(3) advises) while idle. Skipped (77) when
  the unit sets no WatchdogSec=.
Usage: notify_protocol.py activation|watchdog HETERO_COMMD SERVICE_TEMPLATE WORK_DIR
"""
import os
import shutil
import signal
import socket
import struct
import sys
import tempfile
import time

mode, daemon, unit_template, work = sys.argv[1:5]
WATCHDOG_USEC = 2_000_000


def fail(message, log=None):
    if log and os.path.exists(log):
        with open(log) as f:
            sys.stderr.write("--- daemon log ---\n" + f.read() + "--- end ---\n")
    print("FAIL:", message, file=sys.stderr)
    sys.exit(1)


def unit_sets(key, value=None):
    """Whether the service template sets key (to value, when given)."""
    with open(unit_template) as f:
        for line in f:
            if line.startswith(key + "=") and value in (None, line.strip().split("=", 1)[1]):
                return True
    return False


if mode == "watchdog" and not unit_sets("WatchdogSec"):
    print("SKIP: hetero-commd.service sets no WatchdogSec=")
    sys.exit(77)

# Sockets under /tmp: a build tree's path may exceed sun_path's 108 bytes.
tmp = tempfile.mkdtemp(prefix="hc-notify-")
log = os.path.join(work, "daemon.log")
notify_path = os.path.join(tmp, "notify")
client_path = os.path.join(tmp, "hetero-commd.sock")
empty_config = os.path.join(tmp, "hetero-commd.toml")
open(empty_config, "w").close()

notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
notify.bind(notify_path)
notify.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)

listener = None
if mode == "activation":
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    listener.bind(client_path)
    listener.listen(16)
    # systemd passes the socket non-blocking only when the service says NonBlocking=yes.
    listener.setblocking(not unit_sets("NonBlocking", "yes"))
    inode_before = os.stat(client_path).st_ino

env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "NOTIFY_SOCKET": notify_path}
if mode == "watchdog":
    env["WATCHDOG_USEC"] = str(WATCHDOG_USEC)

pid = os.fork()
if pid == 0:
    # The child becomes the daemon, set up the way systemd starts a service.
    try:
        logfd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(logfd, 1)
        os.dup2(logfd, 2)
        if listener is not None:
            os.dup2(listener.fileno(), 3)
            env.update(LISTEN_FDS="1", LISTEN_PID=str(os.getpid()))
        # An empty config file: whatever /etc/hetero-comm holds on this machine stays out.
        os.execve(daemon, [daemon, "--socket", client_path, "--config", empty_config], env)
    finally:
        os._exit(127)

messages = []  # (sender pid, monotonic time, message)


def receive(deadline):
    """Collects notify messages until deadline; returns those received."""
    got = []
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return got
        notify.settimeout(left)
        try:
            data, ancillary, _, _ = notify.recvmsg(4096, socket.CMSG_SPACE(12))
        except socket.timeout:
            return got
        sender = None
        for level, kind, payload in ancillary:
            if level == socket.SOL_SOCKET and kind == socket.SCM_CREDENTIALS:
                sender = struct.unpack("iII", payload[:12])[0]
        for line in data.decode(errors="replace").splitlines():
            got.append((sender, time.monotonic(), line))
            messages.append(got[-1])


def wait_for(line, seconds):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for m in receive(min(deadline, time.monotonic() + 0.2)):
            if m[2] == line:
                return m
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done:
            fail(f"hetero-commd exited before sending {line}", log)
    return None


def stop(expect_clean):
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 15
    status = None
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        receive(time.monotonic() + 0.1)
    else:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        fail("hetero-commd did not stop within 15 s of SIGTERM", log)
    if expect_clean and not (os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0):
        fail(f"hetero-commd ended with wait status {status} after SIGTERM, expected exit 0", log)


try:
    ready = wait_for("READY=1", 20)
    if ready is None:
        stop(False)
        fail("no READY=1 within 20 s (Type=notify would time out)", log)
    if ready[0] != pid:
        stop(False)
        fail(f"READY=1 came from pid {ready[0]}, not the main pid {pid} (NotifyAccess=main)", log)

    if mode == "activation":
        with open(log) as f:
            text = f.read()
        if "using the client socket passed by systemd" not in text:
            stop(False)
            fail("the daemon did not take the socket passed in LISTEN_FDS", log)
        if os.stat(client_path).st_ino != inode_before:
            stop(False)
            fail("the daemon replaced the socket file instead of serving the passed socket", log)
        client = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        client.settimeout(5)
        client.connect(client_path)
        client.close()
        stop(True)
        if not any(m[2] == "STOPPING=1" and m[0] == pid for m in messages):
            fail("no STOPPING=1 from the main pid on SIGTERM", log)
        print("READY=1 and STOPPING=1 from the main pid; the passed socket was served")
    else:
        # Idle after READY=1: count pings over 3 s (three half-intervals of the 2 s watchdog).
        window = receive(time.monotonic() + 3.0)
        pings = [m for m in window if m[2] == "WATCHDOG=1" and m[0] == pid]
        stop(False)
        if len(pings) < 2:
            fail(f"{len(pings)} WATCHDOG=1 in 3 s with WATCHDOG_USEC={WATCHDOG_USEC}: the unit's "
                 "WatchdogSec= would have systemd kill and restart an idle daemon", log)
        print(f"{len(pings)} WATCHDOG=1 in 3 s with a 2 s watchdog")
finally:
    shutil.rmtree(tmp, ignore_errors=True)
