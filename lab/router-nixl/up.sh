#!/bin/bash
# Router-NIXL 1P2D lab, step 1: unpack vLLM 0.26.0 + NIXL (shared/lab's
# prepare.sh with NIXL=1) from the parts in $LAB/parts and start ONE prefill
# (8100, kv_producer) and TWO decode instances (8200 kv_consumer with the
# default kv_load_failure_policy "fail"; 8201 kv_consumer with
# "kv_load_failure_policy":"recompute"), all NixlConnector (UCX over tcp/lo
# inside one machine), request logging, prompt-token details and OpenTelemetry
# export to otlp_sink.py, as daemons. Each instance is started once the
# previous one has logged "init engine (profile, create kv cache ...) took":
# vLLM sizes its KV cache from the device-wide free memory, so two start-ups
# must not profile at the same time.
set -u
H=$(cd "$(dirname "$0")" && pwd); S=$(cd "${SHARED_LAB:?set SHARED_LAB to shared/lab}" && pwd); LAB=${LAB:-$HOME/lab}; mkdir -p $LAB
export CAP=$LAB/cap MODEL_DIR=${MODEL_DIR:-$S/models/llama-8b-shape}
rm -rf $CAP; mkdir -p $CAP $LAB/site
for p in $(pgrep -f "vllm.entrypoints.cli.main serve|otlp_sink.py|VLLM::EngineCore|vllm_router"); do echo "ending leftover $p"; kill -9 $p; done
if [ ! -f $LAB/site/.done ]; then
  ls -la $LAB/parts
  cat $LAB/parts/site.part.* | xz -dc -T0 | tar -x -C $LAB/site && touch $LAB/site/.done || { echo "could not unpack"; exit 1; }
  echo "unpacked: $(du -sm $LAB/site | cut -f1) MB at +${SECONDS}s"
fi
export LAB; . $H/env.sh; grep -o "export .*" $H/env.sh > $CAP/instances.env
python3 -c "import vllm, torch, nixl; print('vllm', vllm.__version__, 'torch', torch.__version__, 'nixl ok')" 2>&1 | tail -2
# the sink keeps every export body and forwards a copy to pdtop's receivers (check 4319, record 4320; started in drive.sh)
OTLP_FORWARD=http://127.0.0.1:4319/v1/traces,http://127.0.0.1:4320/v1/traces setsid nohup python3 $H/../2p1d/otlp_sink.py $CAP/otlp.bin > $LAB/otlp.log 2>&1 &
CONNECTOR=${CONNECTOR:-NixlConnector}; TOPO=${TOPO:-1p2d}   # TOPO=1p1d: no decode2 (the NixlPushConnector run)
KVCFG() { # role [extra json]
  echo "{\"kv_connector\":\"$CONNECTOR\",\"kv_role\":\"$1\"${2:+,$2}}"; }
COMMON="--served-model-name lab-8b --block-size 16 --load-format dummy --enforce-eager --max-model-len 8192 --gpu-memory-utilization ${GPU_UTIL:-0.29} --enable-log-requests --enable-prompt-tokens-details --host 127.0.0.1 --chat-template $S/chat-template.jinja --otlp-traces-endpoint http://127.0.0.1:4318/v1/traces"
cd $LAB
start() { # name port side-channel-port role [extra kv json]
  local cmd="env OTEL_SERVICE_NAME=vllm-$1 VLLM_NIXL_SIDE_CHANNEL_PORT=$3 python3 -m vllm.entrypoints.cli.main serve $MODEL_DIR --port $2 $COMMON --kv-transfer-config '$(KVCFG $4 "${5:-}")'"
  echo "$cmd" > $LAB/$1.cmd
  setsid nohup bash -c "exec $cmd" >> $LAB/vllm-$1.log 2>&1 &
  echo $! > $LAB/$1.pid; echo "$1 started at +${SECONDS}s (pid $!)"
}
engine_ready() { # name: its EngineCore has its KV cache and finished warm-up
  for i in $(seq 1 200); do
    grep -q "init engine (profile, create kv cache" $LAB/vllm-$1.log 2>/dev/null && { echo "$1 engine ready at +${SECONDS}s: $(grep -h -o 'Available KV cache memory: .*' $LAB/vllm-$1.log | tail -1)"; return 0; }
    kill -0 $(cat $LAB/$1.pid) 2>/dev/null || { echo "$1 DIED"; tail -40 $LAB/vllm-$1.log; return 1; }
    sleep 1
  done; echo "$1 engine not ready"; tail -30 $LAB/vllm-$1.log; return 1
}
healthy() { # name port
  for i in $(seq 1 120); do curl -sf 127.0.0.1:$2/health >/dev/null && { echo "$1 healthy at +${SECONDS}s"; return 0; }; kill -0 $(cat $LAB/$1.pid) 2>/dev/null || { echo "$1 DIED"; tail -40 $LAB/vllm-$1.log; return 1; }; sleep 1; done
  echo "$1 not healthy"; tail -30 $LAB/vllm-$1.log; return 1
}
# byte-compile vLLM beside the first start-up (it would otherwise compile every module it imports, alone)
(python3 -m compileall -q -j 8 $LAB/site/vllm > /dev/null 2>&1 &)
start prefill 8100 5600 kv_producer;   engine_ready prefill || exit 1
start decode 8200 5601 kv_consumer;    engine_ready decode || exit 1
if [ $TOPO = 1p2d ]; then
  start decode2 8201 5602 kv_consumer '"kv_load_failure_policy":"recompute"'; engine_ready decode2 || exit 1
  healthy prefill 8100 && healthy decode 8200 && healthy decode2 8201 || exit 1; PORTS="8100 8200 8201"
else
  rm -f $LAB/decode2.cmd; healthy prefill 8100 && healthy decode 8200 || exit 1; PORTS="8100 8200"
fi
for p in $PORTS; do curl -s 127.0.0.1:$p/metrics > $CAP/metrics-idle-$p.txt; done
nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv
grep -h -E "GPU KV cache size" $LAB/vllm-*.log
cat $LAB/*.cmd
