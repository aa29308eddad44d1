#!/usr/bin/env bash
# Fuzzes the decoders of bytes from the network (test/fuzz/fuzz_targets.hpp)
# with libFuzzer, each for a bounded time:
#   scripts/fuzz.sh [SECONDS] [TARGET...]   (default 60 s each; targets
#                                            wire, tensor_frame, caf_message,
#                                            monitor_filter)
#   scripts/fuzz.sh --seeds                 rewrite test/fuzz/corpus from
#                                            real traffic (make_seeds)
# Builds build-fuzz/ with Debian's clang (AddressSanitizer, UBSan). Starts
# from test/fuzz/corpus/<target> (new inputs that add coverage are kept
# in build-fuzz/corpus/, not committed). A crash leaves its input in
# test/fuzz/regressions/<target>/, which the test suite replays from then
# on (commit it with the fix); the script then fails.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = "--seeds" ]; then
  scripts/setup.sh > /dev/null
  build_dir=${ACTORFLOW_BUILD_DIR:-build}
  cmake --build "$build_dir" --target actorflow_make_seeds
  rm -rf test/fuzz/corpus
  "$build_dir/test/actorflow_make_seeds" test/fuzz/corpus
  exit 0
fi
seconds=${1:-60}
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(wire tensor_frame caf_message monitor_filter)
command -v clang++ > /dev/null || scripts/install_packages.sh clang
scripts/install_packages.sh cmake ninja-build ccache libcaf-dev
fuzz_dir=build-fuzz
if [ ! -f "$fuzz_dir/build.ninja" ]; then
  CC=clang CXX=clang++ cmake -S . -B "$fuzz_dir" -G Ninja \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo -DACTORFLOW_FUZZ=ON \
    -DACTORFLOW_NATIVE_ARCH=OFF
fi
cmake --build "$fuzz_dir" -j "$(nproc)"
status=0
for target in "${targets[@]}"; do
  corpus=$fuzz_dir/corpus/$target
  crashes=test/fuzz/regressions/$target
  mkdir -p "$corpus" "$crashes"
  echo "fuzz: $target for $seconds s"
  # -rss_limit_mb: a decoder must refuse what it cannot hold rather than
  # allocate it (the frames' limits are 1 GiB of head, 64 GiB of data
  # announced; none is allocated before the bytes are there).
  if ! "$fuzz_dir/test/fuzz/fuzz_$target" "$corpus" "test/fuzz/corpus/$target" \
       -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=10 \
       -artifact_prefix="$crashes/" -print_final_stats=1 \
       > "$fuzz_dir/$target.log" 2>&1; then
    echo "fuzz: $target FAILED, input kept in $crashes (log: $fuzz_dir/$target.log)" >&2
    tail -40 "$fuzz_dir/$target.log" >&2
    status=1
  else
    grep -E "^(stat::number_of_executed_units|stat::peak_rss_mb)|cov:" \
      "$fuzz_dir/$target.log" | tail -3
  fi
done
exit "$status"
