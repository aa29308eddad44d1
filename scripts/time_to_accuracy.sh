#!/usr/bin/env bash
# Learning quality, measured (issue 35 §4): trains with `actorflow-train
# --local 2` (1 ps and 2 workers on loopback) and reports, for each run,
# the seconds of training until the chief's test accuracy first reached
# each threshold, the best and the last accuracy. The chief scores the
# 10000 test images every --eval_every of its steps; the seconds are the
# chief's since its first step, its scoring included.
#
#   scripts/time_to_accuracy.sh                  # softmax, mlp, cnn; async, sync
#   scripts/time_to_accuracy.sh cnn:async mlp:sync   # some runs
#
# Each run's log: $OUT/<model>-<mode>.log (default /tmp/actorflow-tta).
# Steps and scoring interval per model below (cnn: 14000 global steps,
# about 11 minutes on 2 cores asynchronously, 26 synchronously; all six
# runs ~45 minutes). Extra trainer flags: TRAIN_FLAGS.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${ACTORFLOW_BUILD_DIR:-build}/apps/actorflow-train
out=${OUT:-/tmp/actorflow-tta}
mkdir -p "$out"
if [ ! -x "$bin" ]; then
  echo "time_to_accuracy.sh: $bin is missing: run scripts/demo.sh or scripts/test.sh first" >&2
  exit 2
fi

runs=("$@")
[ ${#runs[@]} -gt 0 ] || runs=(softmax:async softmax:sync mlp:async mlp:sync cnn:async cnn:sync)

# model -> "global steps, chief steps between scorings, thresholds"
declare -A steps=([softmax]=15000 [mlp]=20000 [cnn]=14000)
declare -A every=([softmax]=500 [mlp]=1000 [cnn]=500)
declare -A thresholds=([softmax]="0.80 0.84" [mlp]="0.85 0.88 0.89 0.90"
                       [cnn]="0.88 0.90 0.91 0.92")

for run in "${runs[@]}"; do
  model=${run%%:*}
  mode=${run##*:}
  if [ -z "${steps[$model]:-}" ] || { [ "$mode" != async ] && [ "$mode" != sync ]; }; then
    echo "time_to_accuracy.sh: unknown run '$run' (MODEL:MODE, MODEL one of softmax, mlp, cnn; MODE async or sync)" >&2
    exit 2
  fi
done

printf '%-8s %-6s %8s %8s %8s  %s\n' model mode best last seconds \
  "seconds to each test accuracy"
for run in "${runs[@]}"; do
  model=${run%%:*}
  mode=${run##*:}
  flags=(--local 2 --model "$model" --train_steps "${steps[$model]}"
         --eval_every "${every[$model]}" --log_every 1000)
  [ "$mode" = sync ] && flags+=(--sync)
  # shellcheck disable=SC2206
  flags+=(${TRAIN_FLAGS:-})
  log="$out/$model-$mode.log"
  if ! "$bin" "${flags[@]}" > "$log" 2>&1; then
    echo "time_to_accuracy.sh: $model $mode failed, see $log" >&2
    tail -5 "$log" >&2
    exit 1
  fi
  # "worker/0: worker 0: step S (global G) test accuracy A after T s"
  python3 - "$log" "${thresholds[$model]}" "$model" "$mode" <<'EOF'
import re, sys
log, thresholds, model, mode = sys.argv[1], sys.argv[2].split(), sys.argv[3], sys.argv[4]
text = open(log).read()
scores = [(float(a), float(t)) for a, t in re.findall(
    r"worker/0: worker 0: step \d+ \(global \d+\) test accuracy ([0-9.]+) after ([0-9.]+) s", text)]
final = re.findall(r"test accuracy: ([0-9.]+)", text)
done = re.findall(r"worker/0: worker 0: done: .*?, ([0-9.]+) s", text)
last = float(final[-1]) if final else float("nan")
best = max([a for a, _ in scores] + [last])
reached = []
for th in thresholds:
    t = next((t for a, t in scores if a >= float(th)), None)
    if t is None and last >= float(th) and done:
        t = float(done[-1])
    reached.append("%s: %s" % (th, "%.1f" % t if t is not None else "-"))
print("%-8s %-6s %8.4f %8.4f %8s  %s" % (model, mode, best, last,
      done[-1] if done else "-", ", ".join(reached)))
EOF
done
