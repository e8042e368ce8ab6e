#!/bin/bash
# Start a real vLLM 0.26.0 NixlConnector pair on one GPU (prefill :8100
# kv_producer, decode :8200 kv_consumer, dummy weights) and a proxy on :8000,
# as daemons, for `pdtop doctor`. One instance after the other: vLLM sizes its
# KV cache from the device-wide free memory, so two profiles must not overlap.
#
#   MODE=mistakes (default): two deliberate mistakes that leave the pair running
#     1. vLLM's disagg_proxy_demo.py in front of NixlConnector (it passes no
#        kv_transfer_params: every request is prefilled twice, silently);
#     2. prefill --block-size 32, decode --block-size 16: NIXL's decode side
#        needs its block size divisible by the prefill's, so the first
#        transfer fails its handshake; nothing says so at start-up.
#   MODE=fixed: the lab's miniproxy.py (passes kv_transfer_params) and
#     --block-size 16 on both.
#   UCX=<devices>: UCX_NET_DEVICES for both instances (unset if empty). With
#     UCX=ifb0 (an interface that is down) NIXL 1.5.1 cannot create its UCX
#     backend and the engine dies at start-up: see the README.
#   WHAT=all|pair|prefill|decode|proxy (default all): what to (re)start; a
#     restarted part is stopped first (by the pid saved at its start).
#
# Needs: $LAB/parts/site.part.* (from ../../../shared/lab/prepare.sh with
# NIXL=1), LABSRC = a copy of the lab folder (models/, vllm/, miniproxy.py),
# python3 with torch 2.11 + CUDA 13.
set -u
H=$(cd "$(dirname "$0")" && pwd)
LAB=${LAB:-$HOME/lab}; LABSRC=${LABSRC:?LABSRC: the lab folder}; MODE=${MODE:-mistakes}; WHAT=${WHAT:-all}
MODEL_DIR=${MODEL_DIR:-$LABSRC/models/qwen3-8b-shape}
UCX=${UCX:-}
mkdir -p $LAB/site $LAB/bin
if [ ! -f $LAB/site/.done ]; then
  cat $LAB/parts/site.part.* | xz -dc -T0 | tar -x -C $LAB/site && touch $LAB/site/.done || { echo "could not unpack"; exit 1; }
  echo "unpacked: $(du -sm $LAB/site | cut -f1) MB at +${SECONDS}s"
  (python3 -m compileall -q -j 8 $LAB/site/vllm > /dev/null 2>&1 &)
fi
# The `vllm` console script as pip writes it (entry point vllm.entrypoints.cli.main:main),
# so /proc/PID/cmdline reads as a user's `vllm serve ...` does.
PY=$(command -v python3)
printf '#!%s\n# -*- coding: utf-8 -*-\nimport re\nimport sys\nfrom vllm.entrypoints.cli.main import main\nif __name__ == "__main__":\n    sys.argv[0] = re.sub(r"(-script\\.pyw|\\.exe)?$", "", sys.argv[0])\n    sys.exit(main())\n' "$PY" > $LAB/bin/vllm
chmod +x $LAB/bin/vllm
# A clean environment: what the machine needs to run CUDA programs plus the lab's
# own variables, so the captured /proc/PID/environ holds nothing else.
KEEP=()
while IFS= read -r -d '' kv; do
  case "${kv%%=*}" in
    PATH|HOME|LANG|LC_*|LD_LIBRARY_PATH|CUDA_*|NVIDIA_*|NCCL_*|TORCH_*|NVSHMEM_*|HOSTNAME|USER) KEEP+=("$kv");;
  esac
done < <(env -0)
KEEP+=(PATH=$LAB/bin:$PATH VLLM_USE_FLASHINFER_SAMPLER=0 PYTHONPATH=$LAB/site PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1)
if [ "$MODE" = fixed ]; then PREFILL_BLOCK=16; else PREFILL_BLOCK=32; fi
[ -n "$UCX" ] && KEEP+=(UCX_NET_DEVICES=$UCX)
COMMON="--served-model-name lab-8b --load-format dummy --enforce-eager --max-model-len 8192 --gpu-memory-utilization 0.40 --enable-log-requests --host 127.0.0.1"
stop() { # name: end what was started under that name (its process group), wait for its ports to close
  [ -f $LAB/$1.pid ] || return 0
  local p=$(cat $LAB/$1.pid); kill -TERM -- -$p 2>/dev/null
  for i in $(seq 1 30); do kill -0 $p 2>/dev/null || break; sleep 1; done
  kill -KILL -- -$p 2>/dev/null; sleep 1; rm -f $LAB/$1.pid; echo "$1 stopped at +${SECONDS}s"
}
start() { # name port role side-channel-port block-size
  local kv="{\"kv_connector\":\"NixlConnector\",\"kv_role\":\"$3\"}"
  echo "$MODE: VLLM_NIXL_SIDE_CHANNEL_PORT=$4 UCX_NET_DEVICES=${UCX:-(unset)} vllm serve $MODEL_DIR --port $2 --block-size $5 $COMMON --kv-transfer-config '$kv'" >> $LAB/$1.cmd
  env -i "${KEEP[@]}" VLLM_NIXL_SIDE_CHANNEL_HOST=127.0.0.1 VLLM_NIXL_SIDE_CHANNEL_PORT=$4 \
    setsid $LAB/bin/vllm serve $MODEL_DIR --port $2 --block-size $5 $COMMON --kv-transfer-config "$kv" >> $LAB/vllm-$1.log 2>&1 < /dev/null &
  echo $! > $LAB/$1.pid; echo "$1 started at +${SECONDS}s (pid $!, block size $5, UCX_NET_DEVICES=${UCX:-unset})"
}
engine_ready() { # name: its engine has its KV cache (the next start-up may profile)
  for i in $(seq 1 200); do
    [ "$(grep -c "init engine (profile, create kv cache" $LAB/vllm-$1.log 2>/dev/null)" -gt "${ENGINE_SEEN:-0}" ] && { echo "$1 engine ready at +${SECONDS}s"; return 0; }
    kill -0 $(cat $LAB/$1.pid) 2>/dev/null || { echo "$1 DIED"; tail -40 $LAB/vllm-$1.log; return 1; }
    sleep 1
  done; echo "$1 engine not ready"; tail -30 $LAB/vllm-$1.log; return 1
}
healthy() { # name port
  for i in $(seq 1 120); do curl -sf 127.0.0.1:$2/health > /dev/null && { echo "$1 healthy at +${SECONDS}s"; return 0; }
    kill -0 $(cat $LAB/$1.pid) 2>/dev/null || { echo "$1 DIED"; tail -40 $LAB/vllm-$1.log; return 1; }; sleep 1; done
  echo "$1 not healthy"; tail -30 $LAB/vllm-$1.log; return 1
}
instance() { # name port role side-channel-port block-size
  local seen=$(grep -c "init engine (profile, create kv cache" $LAB/vllm-$1.log 2>/dev/null); stop $1
  start $1 $2 $3 $4 $5; ENGINE_SEEN=${seen:-0} engine_ready $1 && healthy $1 $2
}
proxy() {
  stop proxy
  if [ "$MODE" = fixed ]; then script=$LABSRC/miniproxy.py; else script=$LABSRC/vllm/disagg_proxy_demo.py; fi
  echo "$MODE: $script" >> $LAB/proxy.cmd
  env -i "${KEEP[@]}" setsid python3 $script --model lab-8b --prefill 127.0.0.1:8100 --decode 127.0.0.1:8200 --port 8000 >> $LAB/proxy.log 2>&1 < /dev/null &
  echo $! > $LAB/proxy.pid
  for i in $(seq 1 60); do curl -s -o /dev/null 127.0.0.1:8000/ && { echo "proxy ($(basename $script)) up at +${SECONDS}s"; return 0; }; sleep 1; done
  echo "proxy did not come up"; tail -20 $LAB/proxy.log; return 1
}
cd $LAB
case $WHAT in
  all) instance prefill 8100 kv_producer 5600 $PREFILL_BLOCK && instance decode 8200 kv_consumer 5601 16 && proxy || exit 1;;
  pair) stop proxy; instance prefill 8100 kv_producer 5600 $PREFILL_BLOCK && instance decode 8200 kv_consumer 5601 16 && proxy || exit 1;;
  prefill) instance prefill 8100 kv_producer 5600 $PREFILL_BLOCK || exit 1;;
  decode) instance decode 8200 kv_consumer 5601 16 || exit 1;;
  proxy) proxy || exit 1;;
esac
nvidia-smi --query-gpu=memory.used,memory.total --format=csv,noheader
