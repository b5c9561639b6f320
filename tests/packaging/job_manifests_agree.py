"""Checks the mixed-vendor DDP manifests (deploy/kubernetes/ddp-mixed-*.yaml) against the daemon.

For each of ddp-mixed-job.yaml (a headless Service and Indexed Jobs) and ddp-mixed-vcjob.yaml (a
Volcano Job):
- both vendors are there: one pod asks for nvidia.com/gpu, one for amd.com/gpu, and each pod's
  node selector, tolerations, image and shim library are of its own vendor;
- every HC_* variable is one the daemon reads (its settings as `hetero-commd --print-config`
  lists them, and the short names in README.md's table) or one README.md says clients read;
- HC_SOCKET is the DaemonSet's --socket, and its folder is a hostPath of the DaemonSet's host
  folder;
- SHIM_LIBRARY is the vendor's library as shim/README.md names it, in the shim's folder of the install
  deploy/kubernetes/README.md describes; PYTHONPATH is that install's HC_PYTHON_INSTALL_DIR;
- DDP_BACKEND is python/'s backend name or "nccl"; the workload comes from the ConfigMap the
  README creates from python/examples, with flags the example has;
- rendezvous: MASTER_ADDR is rank 0's DNS name as the Service (Indexed Jobs) or Volcano's svc
  plugin makes it, MASTER_PORT is the job's port and none of the daemon's, the ranks cover
  0..WORLD_SIZE-1 once;
- every name, port, path and variable the manifests set appears in deploy/kubernetes/README.md.
Usage: job_manifests_agree.py HETERO_COMMD SOURCE_DIR WORK_DIR
"""
import os
import posixpath
import re
import subprocess
import sys

import yaml

daemon, src, work = sys.argv[1:4]
kdir = os.path.join(src, "deploy", "kubernetes")
errors = []
VENDORS = {"nvidia": "nvidia.com/gpu", "amd": "amd.com/gpu"}
IMAGE_WORD = {"nvidia": "cuda", "amd": "rocm"}
# Set by Kubernetes or Volcano, or the standard env:// and loader variables: not ours to document.
PROVIDED = {"JOB_COMPLETION_INDEX", "VK_TASK_INDEX", "RANK", "LD_PRELOAD"}


def check(ok, message):
    if not ok:
        errors.append(message)
    return ok


def read(*parts):
    with open(os.path.join(src, *parts)) as f:
        return f.read()


def load_all(name):
    with open(os.path.join(kdir, name)) as f:
        return [d for d in yaml.safe_load_all(f) if d is not None]


readme = read("deploy", "kubernetes", "README.md")
top_readme = read("README.md")
shim_readme = read("shim", "README.md")

# --- What the daemon and the clients read -----------------------------------------------------
empty = os.path.join(work, "empty.toml")
open(empty, "w").close()
env = {k: v for k, v in os.environ.items() if not k.startswith("HC_")}
run = subprocess.run([daemon, "--print-config", "--config", empty],
                     env=env, capture_output=True, text=True)
if run.returncode != 0:
    sys.exit(f"FAIL: hetero-commd --print-config failed: {run.stderr.strip()}")
daemon_env, section = set(), None
for line in run.stdout.splitlines():
    if m := re.match(r"^\[([a-z0-9_.]+)\]$", line):
        section = m.group(1)
    elif section and (m := re.match(r"^([a-z0-9_]+) = ", line)):
        daemon_env.add(("HC_" + section + "_" + m.group(1)).replace(".", "_").upper())
check(len(daemon_env) > 20, f"--print-config listed only {len(daemon_env)} settings")
# The short names in the configuration table: `key` (`HC_X`, --flag).
daemon_env |= set(re.findall(r"^\| `[a-z_.]+` \(`(HC_[A-Z_]+)`", top_readme, re.M))
clients_line = re.search(r"^Clients read (.*?)\(", top_readme, re.M | re.S)
client_env = set(re.findall(r"`(HC_[A-Z_]+)`", clients_line.group(1))) if clients_line else set()
check("HC_SOCKET" in client_env, "README.md's \"Clients read ...\" line names no HC_SOCKET")

# --- The DaemonSet and the daemon's ports -----------------------------------------------------
(daemonset,) = load_all("daemonset.yaml")
ds_pod = daemonset["spec"]["template"]["spec"]
ds_box = next(c for c in ds_pod["containers"] if c["name"] == "hetero-commd")
ds_socket = ds_box["command"][ds_box["command"].index("--socket") + 1]
ds_volumes = {v["name"]: v for v in ds_pod["volumes"]}
ds_host_dir = next((ds_volumes[m["name"]].get("hostPath", {}).get("path")
                    for m in ds_box["volumeMounts"]
                    if m["mountPath"] == posixpath.dirname(ds_socket)), None)
check(ds_host_dir is not None, "the DaemonSet mounts no hostPath at its socket's folder")
daemon_ports = {p["containerPort"] for p in ds_box.get("ports", [])}
(configmap,) = load_all("configmap.yaml")
for toml in configmap.get("data", {}).values():
    daemon_ports |= {int(p) for p in re.findall(r'^\s*\w*listen\s*=\s*"[^"]*:(\d+)"', toml, re.M)}
check({7710, 50052, 9410} <= daemon_ports, f"the daemon's ports read as {sorted(daemon_ports)}")

# --- The install the images carry, as deploy/kubernetes/README.md describes it ---------------
prefix = re.search(r"cmake --install \S+ --prefix (/[^\s`]+)", readme)
pydir = re.search(r"-DHC_PYTHON_INSTALL_DIR=(\S+?)[`\s]", readme)
check(prefix is not None, "deploy/kubernetes/README.md shows no `cmake --install ... --prefix`")
check(pydir is not None, "deploy/kubernetes/README.md sets no -DHC_PYTHON_INSTALL_DIR")
check("HC_PYTHON_INSTALL_DIR" in read("python", "CMakeLists.txt"),
      "python/CMakeLists.txt has no HC_PYTHON_INSTALL_DIR")
prefix = prefix.group(1) if prefix else ""
pydir = pydir.group(1) if pydir else ""
# The shim's private folder under the image's prefix (shim/CMakeLists.txt: <libdir>/hetero-comm).
libdir = posixpath.join(prefix, "lib", "hetero-comm")
shim_lib = {"nvidia": "libnccl.so.2", "amd": "librccl.so.1"}
for name in shim_lib.values():
    check(f"`{name}`" in shim_readme, f"shim/README.md does not name {name}")
backend = re.search(r'^BACKEND = "(\w+)"', read("python", "hetero_comm", "torch.py"), re.M)
backend = backend.group(1) if check(backend, "python/hetero_comm/torch.py has no BACKEND") else ""


def documented(value, what):
    check(f"`{value}`" in readme or f"{value}`" in readme or f"`{value}" in readme,
          f"deploy/kubernetes/README.md does not mention {what} {value}")


def pod_env(box):
    return {e["name"]: e.get("value") for e in box.get("env", [])}


def check_pod(where, pod, vendor):
    """What holds for every trainer pod; returns its env."""
    box = pod["containers"][0]
    env = pod_env(box)
    limits = box.get("resources", {}).get("limits", {})
    gpus = {k: v for k, v in limits.items() if k.endswith("/gpu")}
    check(gpus == {VENDORS[vendor]: 1}, f"{where}: GPU limits {gpus}, not {VENDORS[vendor]}: 1")
    keys = list(pod.get("nodeSelector", {})) + [t["key"] for t in pod.get("tolerations", [])]
    check(keys and all(vendor in k for k in keys),
          f"{where}: node selector and tolerations {keys} are not all {vendor}'s")
    check(IMAGE_WORD[vendor] in box["image"], f"{where}: image {box['image']} is not a "
          f"{IMAGE_WORD[vendor]} image")
    documented(box["image"], "the image")
    for name in env:
        if name.startswith("HC_"):
            check(name in daemon_env or name in client_env,
                  f"{where}: {name} is read by neither hetero-commd nor its clients")
        if name not in PROVIDED:
            documented(name, "the variable")
    # The socket, from the DaemonSet's host folder.
    sock = env.get("HC_SOCKET")
    check(sock == ds_socket, f"{where}: HC_SOCKET {sock} is not the DaemonSet's {ds_socket}")
    volumes = {v["name"]: v for v in pod.get("volumes", [])}
    mount = next((m for m in box.get("volumeMounts", [])
                  if m["mountPath"] == posixpath.dirname(sock or "")), None)
    host = volumes.get(mount["name"], {}).get("hostPath", {}) if mount else {}
    check(host.get("path") == ds_host_dir, f"{where}: {posixpath.dirname(sock or '')} mounts "
          f"hostPath {host.get('path')}, not the DaemonSet's {ds_host_dir}")
    check(host.get("type") == "Directory",
          f"{where}: the socket's hostPath must be type Directory (the DaemonSet makes it)")
    documented(host.get("path"), "the host folder")
    # The shim and the Python package, where the image's install puts them.
    lib = env.get("SHIM_LIBRARY", "")
    check(lib == posixpath.join(libdir, shim_lib[vendor]),
          f"{where}: SHIM_LIBRARY {lib} is not {posixpath.join(libdir, shim_lib[vendor])}")
    documented(posixpath.dirname(lib), "the shim's folder")
    check(env.get("PYTHONPATH") == posixpath.join(prefix, pydir),
          f"{where}: PYTHONPATH {env.get('PYTHONPATH')} is not {posixpath.join(prefix, pydir)}")
    check(env.get("DDP_BACKEND") in (backend, "nccl"),
          f"{where}: DDP_BACKEND {env.get('DDP_BACKEND')} is neither {backend} nor nccl")
    script = box["command"][-1]
    check('LD_PRELOAD="$SHIM_LIBRARY"' in script, f"{where}: the shim is not preloaded for nccl")
    # The workload: the example, from the ConfigMap the README creates.
    cms = [(m, volumes[m["name"]]["configMap"]) for m in box.get("volumeMounts", [])
           if "configMap" in volumes.get(m["name"], {})]
    if check(len(cms) == 1, f"{where}: not one ConfigMap mounted"):
        m, cm = cms[0]
        check(f"kubectl create configmap {cm['name']} --from-file=python/examples/" in readme,
              f"{where}: the README does not create ConfigMap {cm['name']}")
        for item in cm.get("items", []):
            example = os.path.join(src, "python", "examples", item["key"])
            check(os.path.isfile(example), f"{where}: no python/examples/{item['key']}")
            path = posixpath.join(m["mountPath"], item["path"])
            check(path in script, f"{where}: the command does not run {path}")
            documented(m["mountPath"], "the workload's folder")
            if os.path.isfile(example):
                text = open(example).read()
                for flag in re.findall(r"(--[a-z-]+) ", script):
                    check(f'"{flag}"' in text, f"{where}: {item['key']} has no {flag}")
                check('"cuda"' in text, f"{where}: {item['key']} cannot train on cuda")
    # The rendezvous port: the job's, none of the daemon's.
    port = int(env.get("MASTER_PORT") or 0)
    check(port and port not in daemon_ports,
          f"{where}: MASTER_PORT {port} is missing or one of the daemon's {sorted(daemon_ports)}")
    for p in box.get("ports", []):
        check(p["containerPort"] == port, f"{where}: container port {p['containerPort']} "
              f"is not MASTER_PORT {port}")
    documented(str(port), "the port")
    return env


def check_ranks(where, pods):
    """pods: [(vendor, env, count)]: ranks RANK_BASE + index cover 0..WORLD_SIZE-1 once."""
    worlds = {int(e.get("WORLD_SIZE", 0)) for _, e, _ in pods}
    check(len(worlds) == 1, f"{where}: WORLD_SIZE differs between pods: {worlds}")
    ranks = sorted(int(e.get("RANK_BASE", -1)) + i for _, e, n in pods for i in range(n))
    check(ranks == list(range(max(worlds))), f"{where}: ranks {ranks} for world {worlds}")
    check({v for v, _, _ in pods} == set(VENDORS), f"{where}: not one pod of each vendor")
    for key in ("MASTER_ADDR", "MASTER_PORT", "DDP_BACKEND"):
        values = {e.get(key) for _, e, _ in pods}
        check(len(values) == 1, f"{where}: {key} differs between pods: {values}")


def vendor_of(pod):
    limits = pod["containers"][0].get("resources", {}).get("limits", {})
    return next((v for v, r in VENDORS.items() if r in limits), "none")


# --- ddp-mixed-job.yaml: a headless Service and one Indexed Job per vendor --------------------
docs = load_all("ddp-mixed-job.yaml")
services = [d for d in docs if d["kind"] == "Service"]
jobs = [d for d in docs if d["kind"] == "Job" and d["apiVersion"] == "batch/v1"]
check(len(services) == 1 and len(jobs) == 2, "ddp-mixed-job.yaml: not one Service and two Jobs")
svc = services[0] if services else {"metadata": {"name": ""}, "spec": {}}
svc_name = svc["metadata"]["name"]
check(svc["spec"].get("clusterIP") == "None", f"Service {svc_name} is not headless")
check(svc["spec"].get("publishNotReadyAddresses") is True,
      f"Service {svc_name} hides pods until ready: rank 1 could not resolve rank 0 at start")
svc_ports = [p["port"] for p in svc["spec"].get("ports", [])]
documented(svc_name, "the Service")
pods = []
for job in jobs:
    name, spec = job["metadata"]["name"], job["spec"]
    where = f"ddp-mixed-job.yaml {name}"
    documented(name, "the Job")
    check(spec.get("completionMode") == "Indexed", f"{where}: not Indexed (no stable hostname)")
    check(spec.get("backoffLimit") == 0, f"{where}: a rank must not restart alone")
    pod = spec["template"]["spec"]
    labels = spec["template"]["metadata"].get("labels", {})
    check(all(labels.get(k) == v for k, v in svc["spec"].get("selector", {}).items()),
          f"{where}: the Service does not select its pod")
    check(pod.get("subdomain") == svc_name, f"{where}: subdomain is not {svc_name}")
    check("JOB_COMPLETION_INDEX" in pod["containers"][0]["command"][-1],
          f"{where}: the rank does not add the completion index")
    env = check_pod(where, pod, vendor_of(pod))
    check(int(env.get("MASTER_PORT") or 0) in svc_ports, f"{where}: MASTER_PORT not on the Service")
    pods.append((vendor_of(pod), env, spec.get("completions", 1), name))
rank0 = next((n for _, e, _, n in pods if e.get("RANK_BASE") == "0"), "")
for _, env, _, name in pods:
    check(env.get("MASTER_ADDR") == f"{rank0}-0.{svc_name}", f"ddp-mixed-job.yaml {name}: "
          f"MASTER_ADDR {env.get('MASTER_ADDR')} is not rank 0's {rank0}-0.{svc_name}")
check_ranks("ddp-mixed-job.yaml", [p[:3] for p in pods])

# --- ddp-mixed-vcjob.yaml: a Volcano Job with a task per vendor -------------------------------
(vcjob,) = load_all("ddp-mixed-vcjob.yaml")
check(vcjob["apiVersion"] == "batch.volcano.sh/v1alpha1" and vcjob["kind"] == "Job",
      "ddp-mixed-vcjob.yaml is not a batch.volcano.sh/v1alpha1 Job")
vc_name, spec = vcjob["metadata"]["name"], vcjob["spec"]
documented(vc_name, "the Volcano Job")
check(spec.get("schedulerName") == "volcano", "the vcjob is not scheduled by volcano")
check({"svc", "env"} <= set(spec.get("plugins", {})), "the vcjob lacks the svc or env plugin")
tasks = spec.get("tasks", [])
check(spec.get("minAvailable") == sum(t.get("replicas", 1) for t in tasks),
      "minAvailable is not every replica: the ranks would not be gang-scheduled")
pods = []
for task in tasks:
    where = f"ddp-mixed-vcjob.yaml task {task['name']}"
    pod = task["template"]["spec"]
    check("VK_TASK_INDEX" in pod["containers"][0]["command"][-1],
          f"{where}: the rank does not add VK_TASK_INDEX")
    check(task["name"] == vendor_of(pod), f"{where}: runs a {vendor_of(pod)} pod")
    pods.append((vendor_of(pod), check_pod(where, pod, vendor_of(pod)), task.get("replicas", 1),
                 task["name"]))
rank0 = next((n for _, e, _, n in pods if e.get("RANK_BASE") == "0"), "")
for _, env, _, name in pods:
    # Volcano's svc plugin: hostname <job>-<task>-<index>, subdomain <job>.
    check(env.get("MASTER_ADDR") == f"{vc_name}-{rank0}-0.{vc_name}", f"ddp-mixed-vcjob.yaml "
          f"{name}: MASTER_ADDR {env.get('MASTER_ADDR')} is not {vc_name}-{rank0}-0.{vc_name}")
check_ranks("ddp-mixed-vcjob.yaml", [p[:3] for p in pods])

if errors:
    for e in errors:
        print("FAIL:", e, file=sys.stderr)
    sys.exit(1)
print("deploy/kubernetes/ddp-mixed-*.yaml agree with hetero-commd, the DaemonSet and the READMEs")
