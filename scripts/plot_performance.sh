#!/usr/bin/env bash
# The plots of docs/PERFORMANCE.md, from actorflow-bench's JSON lines:
#   docs/performance_fetch.png  fetch throughput against tensor size:
#       actorflow, the best this host does on the same path (raw TCP, or
#       shared memory where the fetch takes the ring), TensorFlow's
#       transport (the gRPC peer) and TCP's streaming ceiling;
#   docs/performance_scale.png  steps/s of one ps against the number of
#       worker processes, and the step's cost against the number of
#       variables (with what linear growth from one variable would be);
#   docs/performance_netsim.png  the fetch sweep across the simulated
#       network's links (actorflow-bench --netsim: 10g and 1g), against
#       raw TCP and the gRPC peer across the same links and the links'
#       rate (only when the input has netsim_* figures: a bench run here
#       does not measure them, being root-only and ~15 minutes;
#       `actorflow-bench --netsim --json-only > netsim.jsonl` then
#       `scripts/plot_performance.sh netsim.jsonl`).
#
#   scripts/plot_performance.sh                  # run the bench's groups
#   scripts/plot_performance.sh results.jsonl    # plot saved JSON lines
#
# Writes the two PNGs into docs/ (or $PLOT_DIR) and, after a bench run,
# the JSON lines it plotted (docs/performance_plots.jsonl). Installs
# gnuplot-nox from Debian if it is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install_packages.sh gnuplot-nox python3

dir=${PLOT_DIR:-docs}
if [ $# -ge 1 ]; then
  input=$1
  [ -r "$input" ] || { echo "plot_performance: cannot read $input" >&2; exit 2; }
else
  build_dir=${ACTORFLOW_BUILD_DIR:-build}
  bench="$build_dir/apps/actorflow-bench"
  if [ ! -x "$bench" ]; then
    scripts/setup.sh >&2
  fi
  input=$dir/performance_plots.jsonl
  "$bench" --only fetch_remote,peers,scale --json-only > "$input.tmp"
  mv "$input.tmp" "$input"
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# Tables for gnuplot, one per plot; empty when the input has no such
# figures.
python3 - "$input" "$work" <<'PY'
import json, re, sys
src, out = sys.argv[1], sys.argv[2]
figs = {}
for line in open(src):
    line = line.strip()
    if line.startswith('{'):
        try:
            j = json.loads(line)
        except ValueError:
            continue
        if j.get('value') is not None:
            figs[j['name']] = j
def size_of(label):
    n, unit = re.fullmatch(r'(\d+)([KM])iB', label).groups()
    return int(n) * (1024 if unit == 'K' else 1048576)
with open(f'{out}/fetch.dat', 'w') as f:
    for name, j in sorted(figs.items()):
        m = re.fullmatch(r'fetch_remote_(\d+[KM]iB)', name)
        if not m:
            continue
        label = m.group(1)
        tcp = j['baseline_value'] if j.get('path') == 'tcp' else '?'
        ring = j['baseline_value'] if j.get('path') == 'ring' else '?'
        peer = figs.get(f'peer_grpc_fetch_{label}', {}).get('baseline_value') or '?'
        f.write(f"{size_of(label)} {j['value']} {tcp} {ring} {peer}\n")
ceiling = figs.get('tcp_stream_ceiling', {}).get('value')
with open(f'{out}/ceiling', 'w') as f:
    f.write(str(ceiling) if ceiling else '')
with open(f'{out}/fanin.dat', 'w') as f:
    for name, j in figs.items():
        m = re.fullmatch(r'scale_fanin_(\d+)workers?', name)
        if m:
            f.write(f"{m.group(1)} {j['value']}\n")
for p in ('10g', '1g'):
    with open(f'{out}/netsim_{p}.dat', 'w') as f:
        for name, j in sorted(figs.items()):
            m = re.fullmatch(rf'netsim_{p}_fetch_remote_(\d+[KM]iB)', name)
            if not m:
                continue
            label = m.group(1)
            peer = figs.get(f'netsim_{p}_peer_grpc_fetch_{label}',
                            {}).get('baseline_value') or '?'
            f.write(f"{size_of(label)} {j['value']} {j['baseline_value']} {peer}\n")
with open(f'{out}/vars.dat', 'w') as f:
    for name, j in figs.items():
        m = re.fullmatch(r'scale_vars_(\d+)', name)
        if m:
            f.write(f"{m.group(1)} {j['value']} {j['baseline_value']}\n")
PY
for t in fetch fanin vars netsim_10g netsim_1g; do
  sort -n "$work/$t.dat" -o "$work/$t.dat"
done
ceiling=$(cat "$work/ceiling")

if [ -s "$work/fetch.dat" ]; then
  ceiling_plot=""
  if [ -n "$ceiling" ]; then
    ceiling_plot=", $ceiling with lines lw 1 dt 2 lc rgb 'gray40' title 'TCP streaming ceiling (stream loop or iperf3)'"
  fi
  gnuplot <<GNUPLOT
set terminal pngcairo size 960,600 font "sans,11" noenhanced
set output "$dir/performance_fetch.png"
set title "Fetching a tensor from another process of this host"
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
set datafile missing "?"
plot "$work/fetch.dat" using 1:3 with linespoints lw 2 pt 7 title "raw TCP, best of polling and blocking (same bytes)", \
     "$work/fetch.dat" using 1:4 with points ps 2 pt 9 title "shared memory, 2 processes (where actorflow takes the ring)", \
     "$work/fetch.dat" using 1:5 with linespoints lw 2 pt 13 title "gRPC peer: TF-style RecvTensor (better of unary and streaming)", \
     "$work/fetch.dat" using 1:2 with linespoints lw 2 pt 5 title "actorflow: sess.run(variable on /job:ps)"$ceiling_plot
GNUPLOT
  echo "plot_performance: wrote $dir/performance_fetch.png" >&2
else
  echo "plot_performance: no fetch_remote_* figures in $input" >&2
fi

if [ -s "$work/fanin.dat" ] && [ -s "$work/vars.dat" ]; then
  gnuplot <<GNUPLOT
set terminal pngcairo size 1100,480 font "sans,11" noenhanced
set output "$dir/performance_scale.png"
set multiplot layout 1,2
set title "One ps, N worker processes doing small steps"
set xlabel "worker processes"
set ylabel "steps/s, all workers"
set logscale x 2
set xrange [0.8:20]
set xtics (1, 2, 4, 8, 16)
set grid
set key bottom right
set yrange [0:*]
plot "$work/fanin.dat" using 1:2 with linespoints lw 2 pt 7 title "actorflow (2 cores in all)"
unset logscale
set title "One step updating N variables over 4 ps tasks"
set xlabel "variables"
set ylabel "us per step"
set logscale x 10
set logscale y 10
set xrange [0.8:1300]
set xtics (1, 10, 100, 1000)
set yrange [*:*]
set key top left
plot "$work/vars.dat" using 1:3 with lines lw 1 dt 2 lc rgb "gray40" title "linear from one variable", \
     "$work/vars.dat" using 1:2 with linespoints lw 2 pt 7 title "actorflow"
unset multiplot
GNUPLOT
  echo "plot_performance: wrote $dir/performance_scale.png" >&2
else
  echo "plot_performance: no scale_* figures in $input" >&2
fi

if [ -s "$work/netsim_10g.dat" ] || [ -s "$work/netsim_1g.dat" ]; then
  panel() { # data file, title, link rate in MB/s
    cat <<PANEL
set title "$2"
plot "$1" using 1:3 with linespoints lw 2 pt 7 title "raw TCP request/reply across the links", \
     "$1" using 1:4 with linespoints lw 2 pt 13 title "gRPC peer: TF-style RecvTensor", \
     "$1" using 1:2 with linespoints lw 2 pt 5 title "actorflow: sess.run(variable on /job:ps)", \
     $3 with lines lw 1 dt 2 lc rgb "gray40" title "the links' rate"
PANEL
  }
  gnuplot <<GNUPLOT
set terminal pngcairo size 1200,520 font "sans,11" noenhanced
set output "$dir/performance_netsim.png"
set multiplot layout 1,2
set xlabel "tensor size"
set ylabel "throughput (MB/s, 10^6 bytes)"
set logscale x 2
set xrange [724:95000000]
set logscale y 10
set xtics ("1K" 1024, "16K" 16384, "256K" 262144, "4M" 4194304, "64M" 67108864)
set grid xtics ytics mytics
set key bottom right
set datafile missing "?"
$(panel "$work/netsim_10g.dat" "Across simulated hosts: 100 us, 10 Gbit/s links" 1250)
$(panel "$work/netsim_1g.dat" "Across simulated hosts: 1 ms, 1 Gbit/s links" 125)
unset multiplot
GNUPLOT
  echo "plot_performance: wrote $dir/performance_netsim.png" >&2
fi
