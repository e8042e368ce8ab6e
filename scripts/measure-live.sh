#!/usr/bin/env bash
# Measures the live dashboard's CPU and resident memory while it watches two
# loopback instances (the demo lab, served at real speed) at 1 s refresh,
# tailing their three logs. Needs tmux. Usage: scripts/measure-live.sh [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-300}
cargo build --release --quiet
bin=target/release/pdtop
# shellcheck source=scripts/demo-lab.sh
. scripts/demo-lab.sh
demo_lab "$bin"
trap 'kill $lab 2>/dev/null; tmux kill-session -t pdtop-measure 2>/dev/null; rm -f "$lab_out"' EXIT
tmux new-session -d -s pdtop-measure -x 160 -y 48 "$bin $watch_args"
sleep 2
pid=$(tmux list-panes -t pdtop-measure -F '#{pane_pid}')
tick=$(getconf CLK_TCK)
cpu() { awk '{print $14 + $15}' "/proc/$pid/stat"; }
rss() { awk '/VmRSS/ {print $2}' "/proc/$pid/status"; }
c0=$(cpu); r0=$(rss); t0=$(date +%s.%N)
echo "t_s,cpu_pct_of_one_core,rss_kib"
for ((i = 1; i <= secs / 10; i++)); do
  sleep 10
  c=$(cpu); t=$(date +%s.%N)
  echo "$((i * 10)),$(echo "scale=2; 100 * ($c - $c0) / $tick / ($t - $t0)" | bc),$(rss)"
done
echo "start rss ${r0} KiB"
