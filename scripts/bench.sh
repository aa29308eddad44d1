#!/usr/bin/env bash
# The benchmarks (docs/PERFORMANCE.md): installs what is missing and builds
# (scripts/setup.sh), then runs actorflow-bench with the given arguments,
# e.g. scripts/bench.sh --quick, scripts/bench.sh --only fetch_remote.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh >&2
build_dir=${ACTORFLOW_BUILD_DIR:-build}
exec "$build_dir/apps/actorflow-bench" "$@"
