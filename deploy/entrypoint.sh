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
#   ACTORFLOW_JOIN              a Deployment's pod (elastic worker): the
#                               host:port of a task of the running cluster
#                               to join through (--join); no TF_CONFIG is
#                               derived, and the task listens at
#                               ACTORFLOW_TASK_ADDRESS (default
#                               "$ACTORFLOW_BIND_HOST:$ACTORFLOW_PORT")
#
# entrypoint.sh --print-tf-config prints the TF_CONFIG it would use (with
# ACTORFLOW_JOIN: {"join": ..., "task_address": ...}) and exits. A missing or bad setting exits with status 2 and says which.
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

if [[ -n ${ACTORFLOW_JOIN:-} ]]; then
  # An elastic worker: the running cluster gives it its index.
  port=${ACTORFLOW_PORT:-2222}
  [[ $port =~ ^[0-9]+$ ]] && ((port >= 1 && port <= 65535)) ||
    die "ACTORFLOW_PORT: expected a port number, got '$port'"
  task_address=${ACTORFLOW_TASK_ADDRESS:-}
  if [[ -z $task_address ]]; then
    [[ -n ${ACTORFLOW_BIND_HOST:-} ]] ||
      die "ACTORFLOW_JOIN: the task's address needs ACTORFLOW_TASK_ADDRESS or ACTORFLOW_BIND_HOST (the pod's IP)"
    task_address=$ACTORFLOW_BIND_HOST:$port
  fi
  if [[ ${1:-} == --print-tf-config ]]; then
    echo "{\"join\": \"$ACTORFLOW_JOIN\", \"task_address\": \"$task_address\"}"
    exit 0
  fi
  echo "entrypoint: joining through $ACTORFLOW_JOIN as $task_address" >&2
  unset TF_CONFIG
  set -- --join "$ACTORFLOW_JOIN" --task_address "$task_address" \
    --job_name "${ACTORFLOW_JOB:-worker}" "$@"
  if [[ -n ${ACTORFLOW_BIND_HOST:-} ]]; then
    set -- --bind_host "$ACTORFLOW_BIND_HOST" "$@"
  fi
  exec "${ACTORFLOW_COMMAND:-actorflow-train}" "$@"
fi
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
