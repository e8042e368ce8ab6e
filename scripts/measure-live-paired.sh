#!/usr/bin/env bash
# Idle CPU of two pdtop builds in one run: one demo lab served at real speed
# on loopback, and each build's dashboard watching it at the same time in a
# tmux pane of 160x48 (two instances at 1 s, three logs tailed), so both
# see the same data on the same machine in the same minutes. CPU from
# /proc/PID/stat (utime + stime), per thread at the end.
# Usage: scripts/measure-live-paired.sh OLD_BIN NEW_BIN [SECONDS]
# (e.g. a release build of an older commit from a git worktree, and
# target/release/pdtop).
set -euo pipefail
old=${1:?usage: measure-live-paired.sh OLD_BIN NEW_BIN [SECONDS]}
new=${2:?usage: measure-live-paired.sh OLD_BIN NEW_BIN [SECONDS]}
secs=${3:-300}
# shellcheck source=scripts/demo-lab.sh
. "$(dirname "$0")/demo-lab.sh"
demo_lab "$new"
trap 'kill $lab 2>/dev/null; tmux kill-session -t pdtop-old 2>/dev/null; tmux kill-session -t pdtop-new 2>/dev/null; rm -f "$lab_out"' EXIT
tmux new-session -d -s pdtop-old -x 160 -y 48 "$old $watch_args"
tmux new-session -d -s pdtop-new -x 160 -y 48 "$new $watch_args"
sleep 3
pid_of() { tmux list-panes -t "$1" -F '#{pane_pid}'; }
po=$(pid_of pdtop-old)
pn=$(pid_of pdtop-new)
tick=$(getconf CLK_TCK)
cpu() { awk '{print $14 + $15}' "/proc/$1/stat"; }
o0=$(cpu "$po"); n0=$(cpu "$pn"); t0=$(date +%s.%N)
sleep "$secs"
o1=$(cpu "$po"); n1=$(cpu "$pn"); t1=$(date +%s.%N)
pct() { echo "scale=3; 100 * ($2 - $1) / $tick / ($t1 - $t0)" | bc; }
echo "seconds,old_cpu_pct_of_one_core,new_cpu_pct_of_one_core"
echo "$secs,$(pct "$o0" "$o1"),$(pct "$n0" "$n1")"
for p in "$po" "$pn"; do
  echo "threads of $(tr '\0' ' ' < "/proc/$p/cmdline" | cut -c1-60):"
  for t in /proc/"$p"/task/*; do echo "  $(cat "$t"/comm) $(awk '{print $14 + $15}' "$t"/stat) ticks"; done
done
