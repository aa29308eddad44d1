#!/usr/bin/env bash
# The main demo: seed 000 replayed with real processes (a private engine,
# then a two-task cluster of actorflow-node processes sharing a variable,
# and the placement traces).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
build_dir=${ACTORFLOW_BUILD_DIR:-build}
exec "$build_dir/apps/seed000_shared_variable" "$@"
