#!/usr/bin/env bash
# The main demo: distributed training on Fashion-MNIST with real processes,
# as TensorFlow's "putting it all together" trainer: one ps task and two
# worker tasks on free loopback ports, asynchronous updates, an MLP
# (784-256-128-10); it prints loss and examples/s as it trains and the test
# accuracy at the end (about 0.89; training takes 36-49 s on 2 cores once
# built, README.md).
# Extra arguments go to actorflow-train (e.g. --model softmax, --sync).
# Seed 000's replay: build/apps/seed000_shared_variable.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
build_dir=${ACTORFLOW_BUILD_DIR:-build}
# The demo's defaults, unless the arguments give their own.
given() {
  local a
  for a in "${args[@]}"; do
    [[ "$a" == "$1" || "$a" == "$1="* ]] && return 0
  done
  return 1
}
args=("$@")
defaults=()
given --local || defaults+=(--local 2)
given --model || defaults+=(--model mlp)
exec "$build_dir/apps/actorflow-train" "${defaults[@]}" "$@"
