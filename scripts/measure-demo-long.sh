#!/usr/bin/env bash
# The dashboard on the demo over a long run, as a user sees it: pdtop demo in
# a tmux pane, and once a minute its RSS, its CPU time and the pane's text.
# Usage: scripts/measure-demo-long.sh MINUTES OUTDIR [SPEED] [COLSxROWS]
#   e.g. scripts/measure-demo-long.sh 120 /tmp/demo-2h 2 120x40
# Writes OUTDIR/samples.csv (minute,rss_kib,cpu_s) and OUTDIR/screen-MMM.txt.
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: measure-demo-long.sh MINUTES OUTDIR [SPEED] [COLSxROWS]" >&2; exit 2; }
minutes=$1 out=$2 speed=${3:-2} size=${4:-120x40}
bin=${PDTOP:-$(git rev-parse --show-toplevel)/target/release/pdtop}
session=pdtop-long-$$
mkdir -p "$out"
tmux new-session -d -s "$session" -x "${size%x*}" -y "${size#*x}" "$bin demo --speed $speed"
sleep 2
pid=$(pgrep -f -n "$bin demo --speed $speed")
tick=$(getconf CLK_TCK)
echo "minute,rss_kib,cpu_s" >"$out/samples.csv"
for ((m = 0; m <= minutes; m++)); do
  [ -d "/proc/$pid" ] || { echo "pdtop exited at minute $m" >&2; exit 1; }
  rss=$(awk '/^VmRSS/ {print $2}' "/proc/$pid/status")
  cpu=$(awk -v t="$tick" '{printf "%.2f", ($14 + $15) / t}' "/proc/$pid/stat")
  echo "$m,$rss,$cpu" >>"$out/samples.csv"
  tmux capture-pane -p -t "$session" >"$out/screen-$(printf %03d "$m").txt"
  ((m < minutes)) && sleep 60
done
tmux send-keys -t "$session" q
sleep 2
tmux kill-session -t "$session" 2>/dev/null || true
echo "done: $out/samples.csv"
