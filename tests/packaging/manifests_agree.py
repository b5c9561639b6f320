"""Checks deploy/kubernetes against itself, the systemd units and hetero-commd.

- the ConfigMap the DaemonSet mounts exists, and its TOML passes `hetero-commd --check-config`
  together with the HC_* variables the DaemonSet sets (with a sample node address);
- the daemon's --socket is the socket unit's path, its folder is a hostPath mount of that same
  host folder, and tmpfiles.d creates it;
- --config names the mounted ConfigMap file;
- the gRPC probes use the container's health port (50052), liveness asks about the server ("")
  only, and the pod keeps the host namespaces and the capability set the README describes.
Usage: manifests_agree.py HETERO_COMMD SOURCE_DIR WORK_DIR
"""
import os
import posixpath
import subprocess
import sys

import yaml

daemon, src, work = sys.argv[1:4]
errors = []


def check(ok, message):
    if not ok:
        errors.append(message)


def load(name):
    with open(os.path.join(src, "deploy", "kubernetes", name)) as f:
        docs = [d for d in yaml.safe_load_all(f) if d is not None]
    if len(docs) != 1:
        sys.exit(f"FAIL: {name} holds {len(docs)} documents, expected 1")
    return docs[0]


def unit_value(path, key):
    with open(os.path.join(src, path)) as f:
        for line in f:
            if line.startswith(key + "="):
                return line.strip().split("=", 1)[1]
    sys.exit(f"FAIL: {path} has no {key}=")


configmap = load("configmap.yaml")
daemonset = load("daemonset.yaml")
check(configmap.get("kind") == "ConfigMap", "configmap.yaml is not a ConfigMap")
check(daemonset.get("kind") == "DaemonSet", "daemonset.yaml is not a DaemonSet")

pod = daemonset["spec"]["template"]["spec"]
container = next(c for c in pod["containers"] if c["name"] == "hetero-commd")
args = container["command"]
mounts = {m["name"]: m for m in container.get("volumeMounts", [])}
volumes = {v["name"]: v for v in pod.get("volumes", [])}


def flag(name):
    check(name in args, f"the container command has no {name}")
    return args[args.index(name) + 1] if name in args else ""


def mount_of(path):
    """The (volume, mount) whose mountPath is the folder holding path."""
    for name, m in mounts.items():
        if m["mountPath"] == posixpath.dirname(path):
            return volumes.get(name), m
    return None, None


# Configuration: the file --config names comes from the ConfigMap in configmap.yaml.
config_path = flag("--config")
volume, _ = mount_of(config_path)
check(volume is not None, f"no volume is mounted at {posixpath.dirname(config_path)}")
sources = (volume or {}).get("projected", {}).get("sources", [])
cm_items = [s["configMap"] for s in sources if "configMap" in s]
check(len(cm_items) == 1, "the config volume projects no single ConfigMap")
toml_text = None
if cm_items:
    cm = cm_items[0]
    check(cm["name"] == configmap["metadata"]["name"],
          f"the DaemonSet mounts ConfigMap {cm['name']}, configmap.yaml defines "
          f"{configmap['metadata']['name']}")
    item = next((i for i in cm.get("items", [])
                 if i["path"] == posixpath.basename(config_path)), None)
    check(item is not None, f"no ConfigMap item is projected as {config_path}")
    if item:
        toml_text = configmap.get("data", {}).get(item["key"])
        check(toml_text is not None, f"configmap.yaml has no key {item['key']}")
check(configmap["metadata"].get("namespace") == daemonset["metadata"].get("namespace"),
      "the ConfigMap and the DaemonSet are in different namespaces")

if toml_text is not None:
    toml_file = os.path.join(work, "hetero-commd.toml")
    with open(toml_file, "w") as f:
        f.write(toml_text)
    env = {k: v for k, v in os.environ.items() if not k.startswith("HC_")}
    for e in container.get("env", []):
        if e["name"].startswith("HC_") and "value" in e:
            env[e["name"]] = e["value"].replace("$(NODE_IP)", "10.0.0.1")
    run = subprocess.run([daemon, "--check-config", "--config", toml_file],
                         env=env, capture_output=True, text=True)
    check(run.returncode == 0,
          f"hetero-commd --check-config rejects the ConfigMap's TOML with the DaemonSet's "
          f"environment: {run.stderr.strip()}")

# The client socket: the socket unit's path, in a host folder the workloads share.
socket = flag("--socket")
listen = unit_value("systemd/hetero-commd.socket", "ListenSequentialPacket")
check(socket == listen, f"the DaemonSet's --socket {socket} is not the socket unit's {listen}")
volume, m = mount_of(socket)
host_path = (volume or {}).get("hostPath", {}).get("path")
check(host_path == posixpath.dirname(listen),
      f"{posixpath.dirname(socket)} is not the hostPath {posixpath.dirname(listen)}")
with open(os.path.join(src, "systemd", "tmpfiles.d", "hetero-comm.conf")) as f:
    made = [line.split()[1] for line in f if line.strip() and not line.startswith("#")]
check(posixpath.dirname(listen) in made, f"tmpfiles.d does not create {posixpath.dirname(listen)}")

# Health: kubelet gRPC probes on the container's health port.
ports = {p["name"]: p["containerPort"] for p in container.get("ports", [])}
check(ports.get("health") == 50052, "the container's health port is not 50052")
for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
    grpc = container.get(probe, {}).get("grpc")
    check(grpc is not None, f"{probe} is not a grpc probe")
    if grpc:
        check(grpc.get("port") == ports.get("health"), f"{probe} does not probe the health port")
check(container.get("livenessProbe", {}).get("grpc", {}).get("service") == "",
      "liveness must ask about the server (service \"\") and never about peers")

# Namespaces and privileges, as the README describes them.
for key in ("hostNetwork", "hostIPC", "hostPID"):
    check(pod.get(key) is True, f"{key} is not true")
security = container.get("securityContext", {})
check(security.get("privileged") is False, "the container is not privileged: false")
check(security.get("allowPrivilegeEscalation") is False, "privilege escalation is allowed")
caps = security.get("capabilities", {})
check(caps.get("drop") == ["ALL"], "capabilities are not dropped to none")
check(caps.get("add") == ["IPC_LOCK"], f"added capabilities are {caps.get('add')}, not IPC_LOCK")
check("requests" in container.get("resources", {}), "the container requests no resources")

if errors:
    for e in errors:
        print("FAIL:", e, file=sys.stderr)
    sys.exit(1)
print("deploy/kubernetes agrees with the units and hetero-commd")
