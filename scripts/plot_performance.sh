#!/usr/bin/env bash
# The plot of docs/PERFORMANCE.md: fetch throughput against tensor size,
# actorflow (a session on the worker task fetching a variable from the ps
# process) and the raw TCP baseline measured in the same bench run.
#
#   scripts/plot_performance.sh                  # run the bench's fetch sweep
#   scripts/plot_performance.sh results.jsonl    # plot saved JSON lines
#
# Writes docs/performance_fetch.png (or $PLOT_OUT) and, after a bench run,
# the JSON lines it plotted next to it (docs/performance_fetch.jsonl).
# Installs gnuplot-nox from Debian if it is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install_packages.sh gnuplot-nox

out=${PLOT_OUT:-docs/performance_fetch.png}
if [ $# -ge 1 ]; then
  input=$1
  [ -r "$input" ] || { echo "plot_performance: cannot read $input" >&2; exit 2; }
else
  build_dir=${ACTORFLOW_BUILD_DIR:-build}
  bench="$build_dir/apps/actorflow-bench"
  if [ ! -x "$bench" ]; then
    scripts/setup.sh >&2
  fi
  input=${out%.png}.jsonl
  "$bench" --only fetch_remote --json-only > "$input.tmp"
  mv "$input.tmp" "$input"
fi

# One row per size: bytes, actorflow MB/s, raw TCP MB/s. The bench's own
# lines are flat objects with fixed keys, so sed can take them apart.
data=$(mktemp)
trap 'rm -f "$data"' EXIT
sed -n 's/.*"name":"fetch_remote_\([0-9]*\)\([KM]\)iB","value":\([0-9.e+-]*\),.*"baseline_value":\([0-9.e+-]*\),.*/\1 \2 \3 \4/p' \
    "$input" \
  | awk '{ bytes = $1 * ($2 == "K" ? 1024 : 1048576); print bytes, $3, $4 }' \
  | sort -n > "$data"
if [ ! -s "$data" ]; then
  echo "plot_performance: no fetch_remote_* figures with values in $input" >&2
  exit 1
fi

gnuplot <<GNUPLOT
set terminal pngcairo size 900,560 font "sans,11" noenhanced
set output "$out"
set title "Fetching a tensor from another process (loopback, request/reply)"
set xlabel "tensor size"
set ylabel "throughput (MB/s, 10^6 bytes)"
set logscale x 2
set xrange [724:95000000]
set logscale y 10
set xtics ("1 KiB" 1024, "4 KiB" 4096, "16 KiB" 16384, "64 KiB" 65536, \
           "256 KiB" 262144, "1 MiB" 1048576, "4 MiB" 4194304, \
           "16 MiB" 16777216, "64 MiB" 67108864)
set grid xtics ytics mytics
set key bottom right
plot "$data" using 1:3 with linespoints lw 2 pt 7 title "raw TCP (TCP_NODELAY), same bytes", \
     "$data" using 1:2 with linespoints lw 2 pt 5 title "actorflow: sess.run(variable on /job:ps)"
GNUPLOT
echo "plot_performance: wrote $out" >&2
