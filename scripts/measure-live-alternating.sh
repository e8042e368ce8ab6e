#!/usr/bin/env bash
# Idle CPU of two pdtop builds, each alone: for each round, a fresh demo lab
# served at real speed on loopback (always by LAB_BIN, so both builds watch
# the same server) and one build's dashboard watching it in a tmux pane of
# 160x48 (two instances at 1 s, three logs tailed); then the same for the
# other build. CPU from /proc/PID/task/*/schedstat (nanoseconds of run time,
# not the 4 ms ticks of /proc/PID/stat), and the threads' wake-ups (their
# time slices) per second.
#
# Alone, the builds do not share the machine's two cores with each other,
# as `measure-live-paired.sh` has them do; rounds alternate so that a
# window of a busy host costs both. On the 2-core VM one 30 to 40 s run of
# the same build varies by up to 30 %: compare the means of many rounds.
# Usage: scripts/measure-live-alternating.sh OLD_BIN NEW_BIN [SECONDS] [ROUNDS]
# (LAB_BIN: the lab's binary, by default OLD_BIN.)
set -euo pipefail
old=${1:?usage: measure-live-alternating.sh OLD_BIN NEW_BIN [SECONDS] [ROUNDS]}
new=${2:?usage: measure-live-alternating.sh OLD_BIN NEW_BIN [SECONDS] [ROUNDS]}
secs=${3:-40}
rounds=${4:-6}
lab_bin=${LAB_BIN:-$old}
ran() { cat /proc/"$1"/task/*/schedstat 2>/dev/null | awk '{s += $1} END {print s + 0}'; }
slices() { cat /proc/"$1"/task/*/schedstat 2>/dev/null | awk '{s += $3} END {print s + 0}'; }
# shellcheck source=scripts/demo-lab.sh
. "$(dirname "$0")/demo-lab.sh"
one() {
  local bin=$1 pid r0 w0 t0 r1 w1 t1
  demo_lab "$lab_bin"
  tmux new-session -d -s pdtop-alternating -x 160 -y 48 "$bin $watch_args"
  sleep 3
  pid=$(tmux list-panes -t pdtop-alternating -F '#{pane_pid}')
  r0=$(ran "$pid"); w0=$(slices "$pid"); t0=$(date +%s.%N)
  sleep "$secs"
  r1=$(ran "$pid"); w1=$(slices "$pid"); t1=$(date +%s.%N)
  tmux kill-session -t pdtop-alternating
  kill "$lab"; wait "$lab" 2>/dev/null || true
  rm -f "$lab_out"
  echo "$(echo "scale=3; ($r1 - $r0) / 10000000 / ($t1 - $t0)" | bc),$(echo "scale=1; ($w1 - $w0) / ($t1 - $t0)" | bc)"
}
trap 'tmux kill-session -t pdtop-alternating 2>/dev/null || true' EXIT
echo "round,old_cpu_pct,old_wakeups_per_s,new_cpu_pct,new_wakeups_per_s"
sum_o=0; sum_n=0
for ((r = 1; r <= rounds; r++)); do
  o=$(one "$old"); n=$(one "$new")
  echo "$r,$o,$n"
  sum_o=$(echo "$sum_o + ${o%,*}" | bc); sum_n=$(echo "$sum_n + ${n%,*}" | bc)
done
echo "mean,$(echo "scale=3; $sum_o / $rounds" | bc),,$(echo "scale=3; $sum_n / $rounds" | bc),"
