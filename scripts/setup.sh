#!/usr/bin/env bash
# Installs what actorflow needs from Debian's packages (only what is
# missing), then configures and builds into ./build. Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(g++ cmake ninja-build ccache pkg-config
          libcaf-dev libeigen3-dev libboost-serialization-dev catch2
          nlohmann-json3-dev zlib1g-dev dataset-fashion-mnist
          libncurses-dev tmux)
scripts/install_packages.sh "${packages[@]}"

build_dir=${ACTORFLOW_BUILD_DIR:-build}
if [ ! -f "$build_dir/build.ninja" ]; then
  cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo
fi
cmake --build "$build_dir" -j "$(nproc)"
