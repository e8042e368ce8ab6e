# The environment every instance of the Mooncake lab runs with (sourced by
# up.sh and drive.sh, so that the restarted prefill gets the same one). LAB
# must be set; $LAB/mc holds the trimmed mooncake-transfer-engine-cuda13 0.3.14
# (mc_check.sh put it there) and $LAB/mc/cudart.dir names the folder of
# libcudart.so.13 on this machine.
export VLLM_USE_FLASHINFER_SAMPLER=0 PYTHONPATH=$LAB/site:$LAB/mc PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1
export OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=http/protobuf OTEL_BSP_SCHEDULE_DELAY=500
# Mooncake: the libraries the wheel does not bundle (libibverbs/libmlx5/libnuma/libcurl from nixl_cu13.libs, plain-name links)
export LD_LIBRARY_PATH=$LAB/mc/syslibs:$(cat $LAB/mc/cudart.dir 2>/dev/null)${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
# get_ip() for the transfer engine, side channel and bootstrap registration; 30 s instead of 480 s before the
# prefill frees blocks no decode asked for (the decode's zmq receive times out 60 s after that: 90 s)
export VLLM_HOST_IP=127.0.0.1 VLLM_MOONCAKE_ABORT_REQUEST_TIMEOUT=${MC_ABORT_S:-30}
# INFO as usual, DEBUG for the Mooncake connector only (its per-request success lines are debug)
[ -f $LAB/nologcfg ] || export VLLM_LOGGING_CONFIG_PATH=$LAB/logging.json
