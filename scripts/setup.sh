#!/usr/bin/env bash
# Installs what actorflow needs from Debian's packages (only what is
# missing), then configures and builds into ./build. Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(g++ cmake ninja-build ccache pkg-config
          libcaf-dev libeigen3-dev libboost-serialization-dev catch2
          nlohmann-json3-dev zlib1g-dev dataset-fashion-mnist
          libncurses-dev tmux libcpp-httplib-dev chromium python3-yaml
          doxygen libcli11-dev libspdlog-dev libssl-dev openssl
          libgrpc++-dev libprotobuf-dev protobuf-compiler
          protobuf-compiler-grpc iperf3 strace iproute2
          pybind11-dev python3-dev python3-numpy python3-pytest
          python3-torch)
scripts/install_packages.sh "${packages[@]}"

# From the npm registry, as each package-lock.json pins them: the console
# web UI's front-end library (uPlot) and, for its browser test,
# playwright-core (which drives Debian's chromium; it downloads no browser).
for web in apps/console/web test/integration/web; do
  # npm writes node_modules/.package-lock.json when it installs: again
  # only when package-lock.json changed since.
  if [ ! "$web/node_modules/.package-lock.json" -nt "$web/package-lock.json" ]; then
    command -v npm > /dev/null || scripts/install_packages.sh nodejs npm
    npm ci --prefix "$web" --no-audit --no-fund --loglevel=error
  fi
done

build_dir=${ACTORFLOW_BUILD_DIR:-build}
# The bench's gRPC peer (grpc++, protobuf) is built too: the bench's
# --quick run in the tests measures it. A build directory configured
# before it existed is configured again.
if [ ! -f "$build_dir/build.ninja" ] \
   || ! grep -q '^ACTORFLOW_BENCH_PEERS:BOOL=ON' "$build_dir/CMakeCache.txt"; then
  cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DACTORFLOW_BENCH_PEERS=ON
fi
cmake --build "$build_dir" -j "$(nproc)"
