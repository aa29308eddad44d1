#!/usr/bin/env bash
# The whole test suite: unit tests per layer, multi-process integration
# tests, the seed examples and the installed-package consumer.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
build_dir=${ACTORFLOW_BUILD_DIR:-build}
ctest --test-dir "$build_dir" -j 2 --output-on-failure --timeout 300
