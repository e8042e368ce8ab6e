# The environment every instance of this lab runs with (sourced by up.sh and
# drive.sh, so that the restarted prefill gets the same one). LAB must be set.
# Each instance adds its own VLLM_NIXL_SIDE_CHANNEL_PORT (see up.sh).
export VLLM_USE_FLASHINFER_SAMPLER=0 PYTHONPATH=$LAB/site PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1
export OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=http/protobuf OTEL_BSP_SCHEDULE_DELAY=500
export VLLM_NIXL_SIDE_CHANNEL_HOST=127.0.0.1 UCX_LOG_LEVEL=info
