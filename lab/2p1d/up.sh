#!/bin/bash
# 2P1D lab (pdtop's own, from shared/lab/2p2d), step 1: unpack vLLM 0.26.0
# (no NIXL: the ExampleConnector needs none) from the parts in $LAB/parts
# and start TWO prefill (8100, 8101, kv_producer) and ONE decode (8200,
# kv_consumer) instance on the one
# GPU, all with the ExampleConnector and ONE shared directory ($KVDIR), request
# logging, prompt-token details and OpenTelemetry export to otlp_sink.py, as
# daemons. Each instance is started once the previous one has logged "init
# engine (profile, create kv cache ...) took": vLLM sizes its KV cache from the
# device-wide free memory, so two start-ups must not profile at the same time.
set -u
H=$(cd "$(dirname "$0")" && pwd); S=${SHARED_LAB:?set SHARED_LAB to shared/lab}; LAB=${LAB:-$HOME/lab}; mkdir -p $LAB
export CAP=$LAB/cap KVDIR=$LAB/kv MODEL_DIR=${MODEL_DIR:-$S/models/qwen3-8b-shape}
rm -rf $CAP $KVDIR; mkdir -p $CAP $KVDIR $LAB/site
if [ ! -f $LAB/site/.done ]; then
  cat $LAB/parts/site.part.* | xz -dc -T0 | tar -x -C $LAB/site && touch $LAB/site/.done || { echo "could not unpack"; exit 1; }
  echo "unpacked: $(du -sm $LAB/site | cut -f1) MB at +${SECONDS}s"
fi
export LAB; . $H/env.sh; grep -o "export .*" $H/env.sh > $CAP/instances.env
# the sink keeps every export body and forwards a copy to pdtop's receivers (check 4319, record 4320; started in drive.sh)
OTLP_FORWARD=http://127.0.0.1:4319/v1/traces,http://127.0.0.1:4320/v1/traces setsid nohup python3 $H/otlp_sink.py $CAP/otlp.bin > $LAB/otlp.log 2>&1 &
KVCFG() { echo "{\"kv_connector\":\"ExampleConnector\",\"kv_role\":\"$1\",\"kv_connector_extra_config\":{\"shared_storage_path\":\"$KVDIR\"}}"; }
COMMON="--served-model-name lab-8b --block-size 16 --load-format dummy --enforce-eager --max-model-len 8192 --gpu-memory-utilization 0.25 --enable-log-requests --enable-prompt-tokens-details --host 127.0.0.1 --chat-template $S/chat-template.jinja --otlp-traces-endpoint http://127.0.0.1:4318/v1/traces"
cd $LAB
start() { # name port role
  local cmd="env OTEL_SERVICE_NAME=vllm-$1 python3 -m vllm.entrypoints.cli.main serve $MODEL_DIR --port $2 $COMMON --kv-transfer-config '$(KVCFG $3)'"
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
start prefill 8100 kv_producer;  engine_ready prefill || exit 1
start prefill2 8101 kv_producer; engine_ready prefill2 || exit 1
start decode 8200 kv_consumer;   engine_ready decode || exit 1
healthy prefill 8100 && healthy prefill2 8101 && healthy decode 8200 || exit 1
for p in 8100 8101 8200; do curl -s 127.0.0.1:$p/metrics > $CAP/metrics-idle-$p.txt; done
nvidia-smi --query-gpu=memory.used,memory.total --format=csv
grep -h -E "GPU KV cache size" $LAB/vllm-*.log
