#!/usr/bin/env bash
# Issue 4's acceptance run, reproducible: 1 ps and 2 workers of
# actorflow-train (MLP by default) on loopback, the ps killed with SIGKILL
# once worker 0 has made KILL_AT local steps, started again 3 s later; the
# workers recover (the chief restores the latest checkpoint) and the chief
# prints the test accuracy. Extra arguments go to the workers (e.g.
# --sync, --model softmax). Logs: $OUT (default /tmp/actorflow-crash).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh > /dev/null
bin=${ACTORFLOW_BUILD_DIR:-build}/apps/actorflow-train
out=${OUT:-/tmp/actorflow-crash}
kill_at=${KILL_AT:-4000}
rm -rf "$out"
mkdir -p "$out/ckpt"

# A loopback port nothing listens on.
free_port() {
  while :; do
    local p=$((20000 + RANDOM % 40000))
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
      echo "$p"
      return
    fi
  done
}
ps_port=$(free_port); w0_port=$(free_port); w1_port=$(free_port)
cluster=(--ps_hosts "127.0.0.1:$ps_port"
         --worker_hosts "127.0.0.1:$w0_port,127.0.0.1:$w1_port")
pids=()
cleanup() { kill "${pids[@]}" 2>/dev/null || true; }
trap cleanup EXIT

model=(--model mlp)
case " $* " in *" --model"*) model=() ;; esac

start=$SECONDS
"$bin" "${cluster[@]}" --job_name ps --task_index 0 > "$out/ps-1.log" 2>&1 &
ps_pid=$!; pids+=("$ps_pid")
for t in 0 1; do
  "$bin" "${cluster[@]}" --job_name worker --task_index "$t" "${model[@]}" \
    --checkpoint_dir "$out/ckpt" --save_steps 1000 "$@" \
    > "$out/worker-$t.log" 2>&1 &
  pids+=("$!")
done
w0=${pids[1]}; w1=${pids[2]}
for _ in $(seq 1200); do
  grep -q "worker 0: step $kill_at " "$out/worker-0.log" && break
  kill -0 "$w0" 2>/dev/null || break
  sleep 0.5
done
kill -9 "$ps_pid"
wait "$ps_pid" 2>/dev/null || true
echo "crash_recovery: killed the ps (SIGKILL) after $((SECONDS - start)) s"
sleep 3
"$bin" "${cluster[@]}" --job_name ps --task_index 0 > "$out/ps-2.log" 2>&1 &
ps_pid=$!; pids+=("$ps_pid")
echo "crash_recovery: started the ps again after $((SECONDS - start)) s"
status=0
wait "$w0" || status=$?
wait "$w1" || status=$?
echo "crash_recovery: workers done after $((SECONDS - start)) s (status $status)"
grep -hE "An error was raised|restored|done:|test accuracy" \
  "$out/worker-0.log" "$out/worker-1.log" | cut -c1-160
exit "$status"
