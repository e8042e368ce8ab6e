#!/bin/bash
# Mooncake lab, step 1 on the device (after mc_check.sh): unpack vLLM 0.26.0
# (+ NIXL, unused here) from $LAB/parts into $LAB/site and start ONE prefill
# (8100, kv_producer, Mooncake bootstrap server :8998) and ONE decode (8200,
# kv_consumer), both MooncakeConnector with "mooncake_protocol": "tcp" (the
# transfer engine over loopback TCP, P2PHANDSHAKE: no metadata server),
# request logging, prompt-token details, DEBUG for the Mooncake connector's
# logger only, OpenTelemetry export to otlp_sink.py. Llama-8B shape, dummy
# weights. The decode starts once the prefill logged "init engine (profile,
# create kv cache" (vLLM sizes its KV cache from the device-wide free memory).
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
cp $H/logging.json $LAB/logging.json; rm -f $LAB/nologcfg
export LAB; . $H/env.sh; grep -o "export .*" $H/env.sh > $CAP/instances.env; echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH" >> $CAP/instances.env
python3 -c "import vllm, torch; from vllm.logger import init_logger; from mooncake.engine import TransferEngine; print('vllm', vllm.__version__, 'torch', torch.__version__, 'mooncake engine ok')" 2>&1 | tail -3
python3 -c "import vllm.logger" 2>/dev/null || { echo "logging.json refused: running without it"; unset VLLM_LOGGING_CONFIG_PATH; touch $LAB/nologcfg; }
OTLP_FORWARD=http://127.0.0.1:4319/v1/traces,http://127.0.0.1:4320/v1/traces setsid nohup python3 $H/../2p1d/otlp_sink.py $CAP/otlp.bin > $LAB/otlp.log 2>&1 &
KVCFG() { echo "{\"kv_connector\":\"MooncakeConnector\",\"kv_role\":\"$1\",\"kv_connector_extra_config\":{\"mooncake_protocol\":\"tcp\"}}"; }
COMMON="--served-model-name lab-8b --block-size 16 --load-format dummy --enforce-eager --max-model-len 8192 --gpu-memory-utilization ${GPU_UTIL:-0.29} --enable-log-requests --enable-prompt-tokens-details --host 127.0.0.1 --chat-template $S/chat-template.jinja --otlp-traces-endpoint http://127.0.0.1:4318/v1/traces"
cd $LAB
start() { # name port bootstrap-port role
  local cmd="env OTEL_SERVICE_NAME=vllm-$1 VLLM_MOONCAKE_BOOTSTRAP_PORT=$3 python3 -m vllm.entrypoints.cli.main serve $MODEL_DIR --port $2 $COMMON --kv-transfer-config '$(KVCFG $4)'"
  echo "$cmd" > $LAB/$1.cmd
  setsid nohup bash -c "exec $cmd" >> $LAB/vllm-$1.log 2>&1 &
  echo $! > $LAB/$1.pid; echo "$1 started at +${SECONDS}s (pid $!)"
}
engine_ready() {
  for i in $(seq 1 200); do
    grep -q "init engine (profile, create kv cache" $LAB/vllm-$1.log 2>/dev/null && { echo "$1 engine ready at +${SECONDS}s: $(grep -h -o 'Available KV cache memory: .*' $LAB/vllm-$1.log | tail -1)"; return 0; }
    kill -0 $(cat $LAB/$1.pid) 2>/dev/null || { echo "$1 DIED"; tail -60 $LAB/vllm-$1.log; return 1; }
    sleep 1
  done; echo "$1 engine not ready"; tail -40 $LAB/vllm-$1.log; return 1
}
healthy() {
  for i in $(seq 1 120); do curl -sf 127.0.0.1:$2/health >/dev/null && { echo "$1 healthy at +${SECONDS}s"; return 0; }; kill -0 $(cat $LAB/$1.pid) 2>/dev/null || { echo "$1 DIED"; tail -60 $LAB/vllm-$1.log; return 1; }; sleep 1; done
  echo "$1 not healthy"; tail -40 $LAB/vllm-$1.log; return 1
}
(python3 -m compileall -q -j 8 $LAB/site/vllm > /dev/null 2>&1 &)
start prefill 8100 8998 kv_producer; engine_ready prefill || exit 1
start decode 8200 8999 kv_consumer;  engine_ready decode || exit 1
healthy prefill 8100 && healthy decode 8200 || exit 1
for p in 8100 8200; do curl -s 127.0.0.1:$p/metrics > $CAP/metrics-idle-$p.txt; done
echo "bootstrap /query: $(curl -s -m 3 127.0.0.1:8998/query)"
nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv
grep -h -E "GPU KV cache size|Mooncake|mooncake" $LAB/vllm-*.log | cut -c1-300 | head -30
cat $LAB/*.cmd
