#!/usr/bin/env bash
# Measures pdtop watching a fleet of INSTANCES (default 64: 32 prefill, 32
# decode) at 1 s refresh, first straight at the endpoints, then through a
# Prometheus server that scrapes them every second: CPU and peak resident
# memory of pdtop, the HTTP requests per second it sends and the bytes per
# second it receives. pdtop runs as `pdtop check` (the dashboard's
# collectors and state, without drawing; scripts/measure-live.sh measures
# the drawing). The fleet is scripts/fleet-lab.py: one process replaying the
# recorded qwen3 pair's scrapes on INSTANCES loopback ports.
# Needs python3, curl, GNU time (/usr/bin/time) and prometheus.
# Usage: scripts/measure-fleet.sh [SECONDS] [INSTANCES]
# Environment: PDTOP_BIN=path measures that binary instead of building
# target/release/pdtop; PDTOP_BIN_B=path also runs a second build through
# the same server at the same time (a paired A/B: same fleet, same minutes;
# the server's request and byte counts are then the sum of both);
# DIRECT=0 skips the run straight at the endpoints; PERF=file records a
# profile of the (first) build's run through the server with `perf record`
# (its CPU figure then includes perf's own).
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-60}
n=${2:-64}
half=$((n / 2))
if [ -n "${PDTOP_BIN:-}" ]; then
  bin=$(realpath "$PDTOP_BIN")
else
  cargo build --release --quiet
  bin=$PWD/target/release/pdtop
fi
bin_b=${PDTOP_BIN_B:+$(realpath "$PDTOP_BIN_B")}
work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

scripts/fleet-lab.py tests/fixtures/lab-captures/qwen3-shape-restart "$half" "$half" > "$work/fleet" &
pids+=($!)
until grep -q ready "$work/fleet" 2>/dev/null; do sleep 0.2; done
mapfile -t prefill < <(awk '$1 == "prefill" {print $2}' "$work/fleet")
mapfile -t decode < <(awk '$1 == "decode" {print $2}' "$work/fleet")
lab=${prefill[0]}

# $1: label, $2: binary; the rest: pdtop's arguments.
start_pdtop() {
  local label=$1 exe=$2 pre=()
  shift 2
  if [ "$label" = prometheus ] && [ -n "${PERF:-}" ]; then
    pre=(perf record -q -F 999 --call-graph dwarf,16384 -o "$(realpath "$PERF")" --)
  fi
  /usr/bin/time -f "%U %S %M %e" -o "$work/$label.time" "${pre[@]}" "$exe" check --json --interval 1 --duration "$secs" "$@" \
    > "$work/$label.json" 2> "$work/$label.err" || true
}
# $1: label. Prints "cpu_pct rss_kib elapsed_s".
result() {
  read -r u s m e < <(tail -1 "$work/$1.time")
  echo "$(echo "scale=1; 100 * ($u + $s) / $e" | bc) $m $e"
}
run_pdtop() {
  start_pdtop "$1" "$bin" "${@:2}"
  result "$1"
}
lab_count() { curl -s "http://$lab/fleet-lab/requests" | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["requests"], d["bytes"])'; }

# 1. Straight at the endpoints.
if [ "${DIRECT:-1}" != 0 ]; then
  read -r r0 b0 < <(lab_count)
  read -r cpu rss el < <(run_pdtop direct --prefill "${prefill[@]}" --decode "${decode[@]}")
  read -r r1 b1 < <(lab_count)
  direct_rps=$(echo "scale=1; ($r1 - $r0) / $el" | bc)
  direct_kbps=$(echo "scale=0; ($b1 - $b0) / $el / 1024" | bc)
  echo "direct:     $n instances, pdtop cpu ${cpu}% of one core, peak rss $((rss / 1024)) MiB, ${direct_rps} req/s, ${direct_kbps} KiB/s received"
fi

# 2. Through Prometheus (scrape interval 1 s), once it scrapes every target.
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
quote() { printf "'%s'," "$@" | sed 's/,$//'; }
cat > "$work/prometheus.yml" <<YAML
global: {scrape_interval: 1s, scrape_timeout: 1s}
scrape_configs:
  - job_name: vllm-prefill
    static_configs: [{targets: [$(quote "${prefill[@]}")]}]
  - job_name: vllm-decode
    static_configs: [{targets: [$(quote "${decode[@]}")]}]
YAML
prometheus --config.file="$work/prometheus.yml" --storage.tsdb.path="$work/data" \
  --web.listen-address="127.0.0.1:$port" --log.level=warn 2> "$work/prometheus.log" &
prom=$!
pids+=("$prom")
api="http://127.0.0.1:$port/api/v1/query"
until curl -sf "$api?query=count(up==1)" | grep -q "\"$n\"\]"; do sleep 0.5; done
sleep 5
# What pdtop asks the server: the query and targets handlers' counters, read
# from the server's own /metrics (not through a query, which would count).
prom_count() {
  curl -s "http://127.0.0.1:$port/metrics" | awk '
    /^prometheus_http_requests_total\{.*handler="\/api\/v1\/(query|targets)"/ {r += $NF}
    /^prometheus_http_response_size_bytes_sum\{handler="\/api\/v1\/(query|targets)"/ {b += $NF}
    END {print r + 0; print b + 0}'
}
prom_cpu() { awk '{print $14 + $15}' "/proc/$prom/stat"; }
mapfile -t before < <(prom_count)
pc0=$(prom_cpu)
prom_args=(--prometheus "http://127.0.0.1:$port" --prefill-match '{job="vllm-prefill"}' --decode-match '{job="vllm-decode"}')
if [ -n "$bin_b" ]; then
  start_pdtop prometheus-b "$bin_b" "${prom_args[@]}" &
  pb=$!
fi
read -r cpu rss el < <(run_pdtop prometheus "${prom_args[@]}")
if [ -n "$bin_b" ]; then
  wait "$pb"
  read -r cpu_b rss_b _ < <(result prometheus-b)
fi
pc1=$(prom_cpu)
mapfile -t after < <(prom_count)
prom_rps=$(echo "scale=1; (${after[0]} - ${before[0]}) / $el" | bc)
prom_kbps=$(echo "scale=0; (${after[1]} - ${before[1]}) / $el / 1024" | bc)
prom_pct=$(echo "scale=1; 100 * ($pc1 - $pc0) / $(getconf CLK_TCK) / $el" | bc)
echo "prometheus: $n instances, pdtop cpu ${cpu}% of one core, peak rss $((rss / 1024)) MiB, ${prom_rps} req/s, ${prom_kbps} KiB/s received (the server itself: ${prom_pct}% cpu)"
if [ -n "$bin_b" ]; then
  echo "  (paired: $bin, and at the same time $bin_b: cpu ${cpu_b}% of one core, peak rss $((rss_b / 1024)) MiB; requests and bytes are both together)"
fi
for f in direct prometheus prometheus-b; do
  [ -f "$work/$f.json" ] || continue
  python3 - "$work/$f.json" "$f" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
inst = r["instances"]
print(f"  {sys.argv[2]}: {len(inst)} instances, {sum(i['up'] for i in inst)} up, "
      f"{sum(i['scrapes_ok'] for i in inst)} good scrapes, {sum(i['scrapes_failed'] for i in inst)} failed, "
      f"requests seen {r['requests']['seen']}, verdict {r['verdict']}")
PY
done
