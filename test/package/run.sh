#!/usr/bin/env bash
# Installs the build tree into a temporary prefix, then configures, builds
# and runs the consumer project against it.
set -euo pipefail
build_dir=$1
source_dir=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build_dir" --prefix "$tmp/prefix" > /dev/null
cmake -S "$source_dir/test/package" -B "$tmp/build" -G Ninja \
  -DCMAKE_PREFIX_PATH="$tmp/prefix" > /dev/null
cmake --build "$tmp/build" > /dev/null
"$tmp/build/consumer"
