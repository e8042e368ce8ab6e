#!/usr/bin/env bash
# Whether a capture's verdicts depend on when pdtop read its lines: the
# capture served live by the demo lab (no loop, at SPEED), watched by
# `pdtop check` started BEFORE seconds in, RUNS times. Each run prints the
# request counts and the reasons for "unknown"; runs that differ are a
# verdict that depends on read timing. Compare with
# `pdtop check --replay CAPTURE_DIR --json`.
# Usage: scripts/measure-live-verdicts.sh BIN CAPTURE_DIR [SPEED] [RUNS] [BEFORE]
# (e.g. target/release/pdtop ../shared/lab-captures/nixl-1p2d-cascade 4 5 0)
set -euo pipefail
bin=${1:?usage: measure-live-verdicts.sh BIN CAPTURE_DIR [SPEED] [RUNS] [BEFORE]}
cap=${2:?usage: measure-live-verdicts.sh BIN CAPTURE_DIR [SPEED] [RUNS] [BEFORE]}
speed=${3:-4}
runs=${4:-5}
before=${5:-0}
out=$(mktemp)
report=$(mktemp)
lab=
trap '[ -n "$lab" ] && kill "$lab" 2>/dev/null; rm -f "$out" "$report"' EXIT
for run in $(seq "$runs"); do
  "$bin" demo --serve-only --no-loop --speed "$speed" --capture "$cap" > "$out" &
  lab=$!
  sleep 2
  # The lab prints the flags to watch it on its second and third lines,
  # and where it sends the recorded spans (as the run had them) on another.
  args="$(sed -n 2p "$out") $(sed -n 3p "$out") $(grep -o -- '--otlp-listen [0-9.:]*' "$out" || true)"
  sleep "$before"
  # Long enough for the whole capture at this speed, with its tail settled.
  secs=$(python3 -c "
import json, sys
ts = [json.loads(l)['t'] for l in open(sys.argv[1] + '/events.jsonl') if l.strip()]
print(int((max(ts) - min(ts)) / float(sys.argv[2])) + 20)" "$cap" "$speed" 2>/dev/null || echo 60)
  # shellcheck disable=SC2086 # the lab's flags are words
  "$bin" check $args --duration "$secs" --json > "$report" 2>/dev/null || true
  kill "$lab" 2>/dev/null || true
  wait "$lab" 2>/dev/null || true
  lab=
  python3 - "$report" "$run" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
r = j["requests"]
keys = ["seen", "loaded", "silent_miss", "no_prefill", "error", "cancelled", "unknown"]
print(f"run {sys.argv[2]}: " + " ".join(f"{k}={r[k]}" for k in keys))
for u in j.get("unknown_reasons", []):
    print(f"    unknown x{u['count']}: {u['reason'][:110]}")
PY
done
