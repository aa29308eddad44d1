#!/usr/bin/env python3
"""Checks deploy/ as Kubernetes and Docker would read it, against the
entrypoint that derives TF_CONFIG in each pod.

usage: check_deploy.py SOURCE_DIR [BINARY ...]

- every StatefulSet has a headless Service of its name (clusterIP None,
  the same selector, the task port), its selector matches its pods' labels,
  and its name is what the entrypoint's default address template expects
  ("<ACTORFLOW_NAME>-<job>");
- every pod env agrees on the replica counts (they are the StatefulSets'
  replicas) and the port (the containers' and the Services' "task" port);
- the entrypoint, run with each pod's env and HOSTNAME, derives the TF_CONFIG
  of that task: every pod's DNS name "<sts>-<i>.<service>:<port>";
- every Deployment (elastic workers) joins through a Service's task port
  with the pod's IP as its address, and no StatefulSet selects its pods;
- the Dockerfile's entrypoint is deploy/entrypoint.sh, and its runtime
  packages hold every shared library BINARY needs (objdump, ldd, dpkg -S).

Prints one line per check; exits 1 at the first failure."""

import json
import os
import re
import subprocess
import sys

import yaml

source_dir = sys.argv[1]
binaries = sys.argv[2:]
entrypoint = os.path.join(source_dir, "deploy", "entrypoint.sh")


def fail(message):
    print("FAIL: " + message)
    sys.exit(1)


def check(condition, message):
    if not condition:
        fail(message)
    print("ok: " + message)


with open(os.path.join(source_dir, "deploy", "k8s", "actorflow.yaml")) as f:
    docs = [d for d in yaml.safe_load_all(f) if d]
services = {d["metadata"]["name"]: d for d in docs if d["kind"] == "Service"}
sets = {d["metadata"]["name"]: d for d in docs if d["kind"] == "StatefulSet"}
check(len(sets) >= 2, "StatefulSets: " + ", ".join(sorted(sets)))


def env_of(container):
    """The container's env with a value; those from the pod (fieldRef)
    are checked on their own below."""
    return {e["name"]: str(e["value"]) for e in container.get("env", [])
            if "value" in e}


def field_refs(container):
    return {e["name"]: e["valueFrom"]["fieldRef"]["fieldPath"]
            for e in container.get("env", [])
            if "fieldRef" in e.get("valueFrom", {})}


def port_named(ports, name, key):
    for p in ports:
        if p.get("name") == name:
            return int(p[key])
    fail("no port named " + name + " in " + json.dumps(ports))


pods = {}
for name, sts in sets.items():
    spec = sts["spec"]
    template = spec["template"]
    container = template["spec"]["containers"][0]
    env = env_of(container)
    job = env.get("ACTORFLOW_JOB")
    check(job is not None, name + ": sets ACTORFLOW_JOB (" + str(job) + ")")
    prefix = env.get("ACTORFLOW_NAME", "actorflow")
    check(name == prefix + "-" + job,
          name + ": named <ACTORFLOW_NAME>-<job> as the entrypoint expects")
    labels = template["metadata"]["labels"]
    check(all(labels.get(k) == v
              for k, v in spec["selector"]["matchLabels"].items()),
          name + ": its selector matches its pods' labels")
    svc = services.get(spec["serviceName"])
    check(svc is not None and spec["serviceName"] == name,
          name + ": serviceName is a Service of its own name")
    check(svc["spec"].get("clusterIP") == "None",
          name + ": its Service is headless (pods get DNS names)")
    check(svc["spec"]["selector"] == spec["selector"]["matchLabels"],
          name + ": its Service selects its pods")
    port = int(env.get("ACTORFLOW_PORT", "2222"))
    check(port_named(container["ports"], "task", "containerPort") == port
          and port_named(svc["spec"]["ports"], "task", "port") == port,
          name + ": the container and the Service expose ACTORFLOW_PORT "
          + str(port))
    check(field_refs(container).get("ACTORFLOW_BIND_HOST")
          == "status.podIP",
          name + ": the task listens on the pod's IP only "
          "(ACTORFLOW_BIND_HOST from status.podIP)")
    pods[name] = (job, int(spec["replicas"]), env)

# Every pod agrees on the cluster's shape.
replicas = {job: n for job, n, env in pods.values()}
for name, (job, n, env) in pods.items():
    for other, count in replicas.items():
        var = "ACTORFLOW_" + other.upper() + "_REPLICAS"
        check(int(env.get(var, {"ps": 1, "worker": 2}[other])) == count,
              name + ": " + var + " is " + str(count)
              + ", the StatefulSet's replicas")
ports = {env.get("ACTORFLOW_PORT", "2222") for _, _, env in pods.values()}
check(len(ports) == 1, "every pod has the same port " + str(ports))

# What the entrypoint derives in each pod.
expected_cluster = {
    job: ["%s-%d.%s:%s" % (name, i, name, next(iter(ports)))
          for i in range(n)]
    for name, (job, n, env) in pods.items()}
for name, (job, n, env) in pods.items():
    for i in range(n):
        pod_env = {k: v for k, v in os.environ.items()
                   if not k.startswith("ACTORFLOW_") and k != "TF_CONFIG"}
        pod_env.update(env)
        pod_env["HOSTNAME"] = "%s-%d" % (name, i)
        out = subprocess.run(["bash", entrypoint, "--print-tf-config"],
                             env=pod_env, capture_output=True, text=True)
        check(out.returncode == 0, pod_env["HOSTNAME"] + ": entrypoint ran "
              + out.stderr.strip())
        tf_config = json.loads(out.stdout)
        check(tf_config == {"cluster": expected_cluster,
                            "task": {"type": job, "index": i}},
              pod_env["HOSTNAME"] + ": TF_CONFIG " + out.stdout.strip())

# Elastic workers (Deployments): they join through a Service's task port
# and give the pod's IP and the port as their address.
deployments = [d for d in docs if d["kind"] == "Deployment"]
check(len(deployments) >= 1, "a Deployment of elastic workers: "
      + ", ".join(d["metadata"]["name"] for d in deployments))
the_port = next(iter(ports))
for dep in deployments:
    name = dep["metadata"]["name"]
    spec = dep["spec"]
    template = spec["template"]
    container = template["spec"]["containers"][0]
    env = env_of(container)
    labels = template["metadata"]["labels"]
    check(all(labels.get(k) == v
              for k, v in spec["selector"]["matchLabels"].items()),
          name + ": its selector matches its pods' labels")
    check(not any(all(labels.get(k) == v for k, v in
                      sts["spec"]["selector"]["matchLabels"].items())
                  for sts in sets.values()),
          name + ": no StatefulSet (or its Service) selects its pods")
    join = env.get("ACTORFLOW_JOIN", "")
    host, _, join_port = join.rpartition(":")
    check(host in services and join_port == the_port
          and port_named(services[host]["spec"]["ports"], "task", "port")
          == int(the_port),
          name + ": joins through a Service's task port (" + join + ")")
    check(env.get("ACTORFLOW_PORT", "2222") == the_port
          and port_named(container["ports"], "task", "containerPort")
          == int(the_port),
          name + ": listens on the cluster's port " + the_port)
    check(field_refs(container).get("ACTORFLOW_BIND_HOST") == "status.podIP",
          name + ": its address is the pod's IP (ACTORFLOW_BIND_HOST)")
    pod_env = {k: v for k, v in os.environ.items()
               if not k.startswith("ACTORFLOW_") and k != "TF_CONFIG"}
    pod_env.update(env)
    pod_env["ACTORFLOW_BIND_HOST"] = "10.1.2.3"
    pod_env["HOSTNAME"] = name + "-5d8f7c9b6-x2x9q"
    out = subprocess.run(["bash", entrypoint, "--print-tf-config"],
                         env=pod_env, capture_output=True, text=True)
    check(out.returncode == 0
          and json.loads(out.stdout) == {"join": join,
                                         "task_address": "10.1.2.3:"
                                         + the_port},
          name + ": the entrypoint joins " + out.stdout.strip()
          + out.stderr.strip())

# Only the cluster's own pods reach a task's port.
policies = [d for d in docs if d["kind"] == "NetworkPolicy"]
check(len(policies) == 1, "a NetworkPolicy guards the pods")
policy = policies[0]["spec"]
check(all(policy["podSelector"]["matchLabels"].items()
          <= sts["spec"]["template"]["metadata"]["labels"].items()
          for sts in list(sets.values()) + deployments),
      "the NetworkPolicy selects every task's pods")
task_rules = [r for r in policy["ingress"]
              if any(int(p["port"]) == int(next(iter(ports)))
                     for p in r.get("ports", []))]
check(len(task_rules) == 1
      and all(f.get("podSelector", {}).get("matchLabels")
              == policy["podSelector"]["matchLabels"]
              for f in task_rules[0]["from"]),
      "the task port admits the cluster's pods only")

# The image.
with open(os.path.join(source_dir, "deploy", "Dockerfile")) as f:
    dockerfile = f.read()
stages = re.split(r"^FROM ", dockerfile, flags=re.M)
runtime = stages[-1]
check(re.search(r"^COPY deploy/entrypoint.sh (\S+)$", runtime, re.M)
      is not None, "the Dockerfile copies deploy/entrypoint.sh")
installed = re.search(r"COPY deploy/entrypoint.sh (\S+)", runtime).group(1)
entry = json.loads(re.search(r"^ENTRYPOINT (.*)$", runtime, re.M).group(1))
check(os.path.basename(installed) == entry[0],
      "the image's ENTRYPOINT is the entrypoint script (" + entry[0] + ")")
install = re.search(r"apt-get install[^\n]*\n((?:.*\\\n)*)", runtime).group(0)
packages = set(re.findall(r"\b(lib[a-z0-9.+-]+|zlib1g|dataset-[a-z-]+)\b",
                          install))
check("dataset-fashion-mnist" in packages, "the image has the training data")
# Whether the image's build stage turns the bench's gRPC peer on.
peers_in_image = any("ACTORFLOW_BENCH_PEERS=ON" in st for st in stages[:-1])
# What debian:12-slim has already.
base = {"libc6", "libstdc++6", "libgcc-s1", "libcrypt1", "zlib1g"}
# The libraries a binary needs directly (NEEDED); what those need in turn
# comes with their packages' dependencies.
for binary in binaries:
    needed = set(re.findall(r"NEEDED\s+(\S+)", subprocess.run(
        ["objdump", "-p", binary], capture_output=True, text=True,
        check=True).stdout))
    libs = subprocess.run(["ldd", binary], capture_output=True, text=True,
                          check=True).stdout
    for soname, path in re.findall(r"^\s*(\S+) => (/\S+)", libs, re.M):
        if soname not in needed:
            continue
        owner = subprocess.run(["dpkg", "-S", os.path.realpath(path)],
                               capture_output=True, text=True)
        if owner.returncode != 0:
            owner = subprocess.run(["dpkg", "-S", path],
                                   capture_output=True, text=True)
        if owner.returncode != 0:
            fail(binary + " links " + path + ", which no package owns")
        package = owner.stdout.split(":")[0]
        # The bench's gRPC peer (ACTORFLOW_BENCH_PEERS, which the test
        # build turns on) is not built into the image: its libraries are
        # the test build's, not the image's.
        if (os.path.basename(binary) == "actorflow-bench"
                and not peers_in_image
                and re.match(r"lib(grpc|protobuf|absl|upb|gpr|address_sorting|re2|cares)",
                             package)):
            continue
        check(package in packages or package in base,
              os.path.basename(binary) + ": " + os.path.basename(path)
              + " comes with " + package)
print("deploy: all checks passed")
