#!/usr/bin/env bash
# The container's entrypoint: derives TF_CONFIG from the pod Kubernetes
# starts (a StatefulSet per job, a headless Service per job) and runs the
# trainer (or ACTORFLOW_COMMAND) with the arguments given.
#
# A pod of StatefulSet "actorflow-worker" is named "actorflow-worker-<i>"
# (its HOSTNAME) and reachable as "actorflow-worker-<i>.actorflow-worker"
# through the headless Service of the same name; the cluster is every such
# address of every job, on one port.
#
# Environment:
#   ACTORFLOW_JOB               this pod's job: ps or worker (required)
#   HOSTNAME                    "<name>-<ordinal>" (Kubernetes sets it): the
#                               ordinal is the task index
#   ACTORFLOW_PS_REPLICAS       tasks of job ps (default 1)
#   ACTORFLOW_WORKER_REPLICAS   tasks of job worker (default 2)
#   ACTORFLOW_PORT              every task's port (default 2222)
#   ACTORFLOW_NAME              prefix of the StatefulSets and Services
#                               (default actorflow)
#   ACTORFLOW_ADDRESS_TEMPLATE  a task's address (default
#                               "{name}-{job}-{index}.{name}-{job}:{port}");
#                               ACTORFLOW_PS_ADDRESS_TEMPLATE and
#                               ACTORFLOW_WORKER_ADDRESS_TEMPLATE override it
#                               for one job
#   ACTORFLOW_COMMAND           what to run (default actorflow-train)
#   ACTORFLOW_BIND_HOST         the address the task listens on (--bind_host;
#                               the manifests give the pod's IP, so that a
#                               task starts although its DNS name may not
#                               resolve yet); default: its address's host
#   TF_CONFIG                   if set, used as it is (nothing is derived)
#
# entrypoint.sh --print-tf-config prints the TF_CONFIG it would use and
# exits. A missing or bad setting exits with status 2 and says which.
set -euo pipefail

die() {
  echo "entrypoint: $*" >&2
  exit 2
}

# A count of tasks from $1 (its value in $2, default $3).
replicas() {
  local value=${2:-$3}
  [[ $value =~ ^[0-9]+$ ]] && ((value >= 1)) ||
    die "$1: expected a positive number of tasks, got '$value'"
  echo "$value"
}

# Task $2 of job $1's address, from its template.
address() {
  local job=$1 index=$2 var template
  var="ACTORFLOW_${job^^}_ADDRESS_TEMPLATE"
  template=${!var:-${ACTORFLOW_ADDRESS_TEMPLATE:-"{name}-{job}-{index}.{name}-{job}:{port}"}}
  template=${template//\{name\}/$name}
  template=${template//\{job\}/$job}
  template=${template//\{index\}/$index}
  echo "${template//\{port\}/$port}"
}

derive_tf_config() {
  name=${ACTORFLOW_NAME:-actorflow}
  port=${ACTORFLOW_PORT:-2222}
  [[ $port =~ ^[0-9]+$ ]] && ((port >= 1 && port <= 65535)) ||
    die "ACTORFLOW_PORT: expected a port number, got '$port'"
  local -A count
  count[ps]=$(replicas ACTORFLOW_PS_REPLICAS "${ACTORFLOW_PS_REPLICAS:-}" 1)
  count[worker]=$(replicas ACTORFLOW_WORKER_REPLICAS \
                           "${ACTORFLOW_WORKER_REPLICAS:-}" 2)
  local job=${ACTORFLOW_JOB:-}
  [[ $job == ps || $job == worker ]] ||
    die "ACTORFLOW_JOB: expected ps or worker, got '$job'"
  local host=${HOSTNAME:-}
  [[ $host =~ -([0-9]+)$ ]] ||
    die "HOSTNAME: expected a StatefulSet pod's name ending in -<ordinal>, got '$host'"
  local index=$((10#${BASH_REMATCH[1]}))
  ((index < count[$job])) ||
    die "HOSTNAME $host: task $index of job $job, which has ${count[$job]} tasks"
  local cluster="" j i list
  for j in ps worker; do
    list=""
    for ((i = 0; i < count[$j]; ++i))
    do
      list+="${list:+, }\"$(address "$j" "$i")\""
    done
    cluster+="${cluster:+, }\"$j\": [$list]"
  done
  echo "{\"cluster\": {$cluster}, \"task\": {\"type\": \"$job\", \"index\": $index}}"
}

if [[ -z ${TF_CONFIG:-} ]]; then
  TF_CONFIG=$(derive_tf_config)
fi
export TF_CONFIG
if [[ ${1:-} == --print-tf-config ]]; then
  echo "$TF_CONFIG"
  exit 0
fi
echo "entrypoint: TF_CONFIG=$TF_CONFIG" >&2
if [[ -n ${ACTORFLOW_BIND_HOST:-} ]]; then
  set -- --bind_host "$ACTORFLOW_BIND_HOST" "$@"
fi
exec "${ACTORFLOW_COMMAND:-actorflow-train}" "$@"
