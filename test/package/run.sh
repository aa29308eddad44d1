#!/usr/bin/env bash
# The installed package as a user gets it: installs the build tree into a
# temporary prefix, checks that it is lean (no debug info in the programs,
# no seed examples among the commands), builds and runs the consumer
# project against it, then builds the installed example
# (share/actorflow/examples) as a project of its own and trains it across
# three processes (a ps and two workers) on free loopback ports.
#   run.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build_dir=$1
source_dir=$2
tmp=$(mktemp -d)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do
    kill "$pid" 2> /dev/null || true
  done
  wait 2> /dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT
fail() {
  echo "package: $*" >&2
  exit 1
}
prefix=$tmp/prefix
cmake --install "$build_dir" --prefix "$prefix" > /dev/null

# Lean: the commands only, without debug info.
commands=$(cd "$prefix/bin" && ls)
[ "$commands" = "$(printf 'actorflow-bench\nactorflow-console\nactorflow-make-certs\nactorflow-node\nactorflow-train')" ] ||
  fail "bin/ holds: $commands"
for program in "$prefix"/bin/* "$prefix"/lib/*.a; do
  if readelf -S "$program" | grep -q '\.debug_info'; then
    fail "$program still has debug info"
  fi
done
echo "package: installed $(du -sm "$prefix" | cut -f1) MB, programs" \
     "$(du -cm "$prefix"/bin/* | tail -1 | cut -f1) MB"

cmake -S "$source_dir/test/package" -B "$tmp/build" -G Ninja \
  -DCMAKE_PREFIX_PATH="$prefix" > /dev/null
cmake --build "$tmp/build" > /dev/null
"$tmp/build/consumer"

# The installed example, built as a user would build it.
cmake -S "$prefix/share/actorflow/examples" -B "$tmp/examples" -G Ninja \
  -DCMAKE_PREFIX_PATH="$prefix" > /dev/null
cmake --build "$tmp/examples" > /dev/null
# Below the kernel's ephemeral range, as apps/support/.../free_ports.hpp picks
# them: a port the kernel hands out itself cannot take one meanwhile.
read -r ps w0 w1 < <(python3 -c '
import random, socket
low = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
socks = []
while len(socks) < 3:
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", random.randrange(10000, low) if low > 11000 else 0))
        socks.append(s)
    except OSError:
        s.close()
print(*[s.getsockname()[1] for s in socks])')
cluster="{\"ps\": [\"127.0.0.1:$ps\"], \"worker\": [\"127.0.0.1:$w0\", \"127.0.0.1:$w1\"]}"
example=$tmp/examples/linear_regression
timeout 120 "$example" --cluster "$cluster" --job_name ps --task_index 0 \
  > "$tmp/ps.log" 2>&1 &
pids+=($!)
for i in 0 1; do
  timeout 120 "$example" --cluster "$cluster" --job_name worker \
    --task_index $i --train_steps 1500 > "$tmp/worker$i.log" 2>&1 &
  pids+=($!)
done
for i in 0 1; do
  if ! wait "${pids[$((i + 1))]}"; then
    cat "$tmp/ps.log" "$tmp/worker0.log" "$tmp/worker1.log" >&2
    fail "worker $i of the example failed"
  fi
done
cat "$tmp/worker0.log"
grep -q "worker 1: [0-9]* steps" "$tmp/worker1.log" ||
  fail "worker 1 did not train: $(cat "$tmp/worker1.log")"
# Both workers' batches moved one set of variables on the ps to the line
# the data came from.
line=$(grep '^learned: ' "$tmp/worker0.log") || fail "the chief printed no result"
python3 - "$line" << 'PY' || fail "the example did not learn the line: $line"
import re, sys
w1, w2, b = map(float, re.findall(r"= (-?[0-9.]+)", sys.argv[1])[:3])
sys.exit(0 if abs(w1 - 2) < 0.1 and abs(w2 + 3) < 0.1 and abs(b - 0.5) < 0.1
         else 1)
PY
echo "package: ok"
