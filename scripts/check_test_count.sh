#!/usr/bin/env bash
# Checks that ctest runs every Catch2 test case once and nothing else:
# for each Catch2 binary ctest knows about (actorflow_<layer>_tests,
# registered by catch_discover_tests with TEST_PREFIX "<layer>." in
# test/CMakeLists.txt and test/integration/CMakeLists.txt), the ctest entries
# whose command is that binary must be exactly "<layer>." + each name the
# binary lists with --list-test-names-only. A name with ';' is split into
# several entries by catch_discover_tests, and such entries "pass" with
# "No test cases matched". Names Catch2 or CMake would mangle are rejected
# too. Entries that run other programs (the seed examples, package.consumer)
# are not counted.
#   scripts/check_test_count.sh [build-dir]   (default: $ACTORFLOW_BUILD_DIR
#                                              or build)
set -euo pipefail
export LC_ALL=C
build_dir=${1:-${ACTORFLOW_BUILD_DIR:-build}}
me=check_test_count
if [[ ! -d $build_dir ]]; then
  echo "$me: no build directory '$build_dir'" >&2
  exit 1
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
status=0
fail() {
  echo "$me: $*" >&2
  status=1
}

# "N: Test command: <exe> "arg"..." precedes "  Test #N: <name>".
ctest --test-dir "$build_dir" -N -V >"$tmp/ctest" 2>"$tmp/ctest.err" || {
  cat "$tmp/ctest.err" >&2
  echo "$me: ctest -N failed in '$build_dir'" >&2
  exit 1
}
command_re='^([0-9]+): Test command: (.*)$'
name_re='^ *Test +#([0-9]+): (.*)$'
catch_re='^(.*/(actorflow_[a-z0-9_]+_tests))( .*)?$'
declare -A command_of=() path_of=()
while IFS= read -r line; do
  if [[ $line =~ $command_re ]]; then
    command_of[${BASH_REMATCH[1]}]=${BASH_REMATCH[2]}
  elif [[ $line =~ $name_re ]]; then
    name=${BASH_REMATCH[2]}
    command=${command_of[${BASH_REMATCH[1]}]-}
    if [[ $command =~ $catch_re ]]; then
      path_of[${BASH_REMATCH[2]}]=${BASH_REMATCH[1]}
      printf '%s\n' "$name" >>"$tmp/entries.${BASH_REMATCH[2]}"
    elif [[ $name == *_NOT_BUILT* || -z $command || $command == " "* ]]; then
      fail "ctest entry '$name' has no executable (not built?)"
    fi
  fi
done <"$tmp/ctest"

# Every Catch2 binary in the build tree must be one ctest runs.
while IFS= read -r exe; do
  [[ -n ${path_of[${exe##*/}]-} ]] ||
    fail "$exe is built but ctest has no entry running it"
done < <(find "$build_dir" -type f -name 'actorflow_*_tests' -perm -u+x)
if [[ ${#path_of[@]} -eq 0 ]]; then
  fail "ctest in '$build_dir' runs no Catch2 binary (actorflow_*_tests)"
fi

for binary in $(printf '%s\n' "${!path_of[@]}" | sort); do
  path=${path_of[$binary]}
  prefix=${binary#actorflow_}
  prefix=${prefix%_tests}.
  # Catch2 2.x exits with the number of names listed (at most 255).
  rc=0
  (cd "${path%/*}" && "$path" --list-test-names-only) >"$tmp/listed" || rc=$?
  listed=$(grep -c '' "$tmp/listed" || true)
  if ((rc != (listed < 255 ? listed : 255))); then
    fail "$path --list-test-names-only exited $rc after $listed names"
    continue
  fi
  # Names starting with '#' are listed (and registered) in quotes.
  # shellcheck disable=SC1003
  bad=$(grep -n -e ';' -e '\\' -e '\[' -e ']' -e '^[#~*" ]' -e '[* ]$' \
    -e '^exclude:' "$tmp/listed" || true)
  if [[ -n $bad ]]; then
    fail "$binary: test case names with ';', '\\', '[', ']', a leading" \
      "'#', '~', '*', '\"' or blank, or a trailing '*' or blank," \
      "which catch_discover_tests or Catch2's test spec mangle:"
    printf '  %s\n' "$bad" >&2
  fi
  sed -e "s/^/$prefix/" "$tmp/listed" | sort >"$tmp/expected"
  sort "$tmp/entries.$binary" >"$tmp/actual"
  entries=$(grep -c '' "$tmp/actual" || true)
  if [[ $listed -ne $entries ]] || ! cmp -s "$tmp/expected" "$tmp/actual"
  then
    fail "$binary lists $listed test cases; the $entries ctest entries" \
      "running it do not match them one to one"
    comm -23 "$tmp/expected" "$tmp/actual" |
      sed 's/^/  no ctest entry:        /' >&2
    comm -13 "$tmp/expected" "$tmp/actual" |
      sed 's/^/  entry with no test case: /' >&2
  else
    echo "$me: $binary: $listed test cases, $entries ctest entries"
  fi
done
exit "$status"
