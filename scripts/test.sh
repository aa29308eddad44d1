#!/usr/bin/env bash
# The whole test suite: unit tests per layer, multi-process integration
# tests, the seed examples and the installed-package consumer; then the
# graph, transport, actors and client unit tests under ASan and UBSan (sanitize.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
build_dir=${ACTORFLOW_BUILD_DIR:-build}
# ctest's output is kept in $build_dir/ctest.log. A Catch2 entry that
# matches no test case (a name catch_discover_tests split or mangled) exits 0,
# so its "No test cases matched" is looked for in every entry's output, which
# ctest writes to Testing/Temporary/LastTest.log even when the entry passes.
log="$build_dir/ctest.log"
last="$build_dir/Testing/Temporary/LastTest.log"
rm -f "$last"
status=0
ctest --test-dir "$build_dir" -j 2 --output-on-failure --timeout 300 2>&1 |
  tee "$log" || status=$?
if grep -s -e 'No test cases matched' -e 'No tests ran' "$log" "$last"; then
  echo "test.sh: a ctest entry ran no Catch2 test case (see $last)" >&2
  status=1
fi
scripts/check_test_count.sh "$build_dir" || status=1
# The unit tests again under ASan and UBSan (a build of their own).
scripts/sanitize.sh || status=1
exit "$status"
