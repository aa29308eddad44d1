#!/usr/bin/env bash
# Unit tests built with AddressSanitizer and UndefinedBehaviorSanitizer
# (GCC's, in build-sanitize, with ccache) and run with any report a
# failure: the graph, transport, actors and client layers (where bytes
# from the network are decoded and threads share state); with --all the
# kernels' tests and the integration tests too, with every program built
# the same way (at -O1 that took 6 more minutes to build and 3 to test
# here: too long for the README's test command, which runs this script
# without it).
# Suppressions (test/sanitize/) name what is CAF's, each with why.
set -euo pipefail
cd "$(dirname "$0")/.."
layers=(graph transport actors client)
[ "${1:-}" != "--all" ] || layers=(graph kernels transport actors client integration)
dir=${ACTORFLOW_SANITIZE_DIR:-build-sanitize}
if [ ! -f "$dir/build.ninja" ]; then
  # -O0: half of -O1's compile time here (task_actor.cpp: 34 s against
  # 73 s), which is most of this step; -g1: line numbers in reports.
  cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_CXX_FLAGS_RELEASE="-O0 -g1" -DACTORFLOW_SANITIZE=ON > /dev/null
fi
targets=()
names=
for layer in "${layers[@]}"; do
  targets+=("actorflow_${layer}_tests")
  names+=${names:+|}$layer
done
if [ "${1:-}" = "--all" ]; then
  cmake --build "$dir" # the seed examples' programs too
else
  cmake --build "$dir" --target "${targets[@]}"
fi
# Leaks are not checked: the process-wide actor system is never destroyed
# on purpose (docs/DESIGN.md, CAF configuration).
export ASAN_OPTIONS=detect_leaks=0:halt_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1:suppressions=$PWD/test/sanitize/ubsan.supp
ctest --test-dir "$dir" -R "^($names)\\." -j 2 --output-on-failure \
  --timeout 600 --no-tests=error
