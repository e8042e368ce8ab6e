#!/bin/bash
# Phase 1 of the doctor lab, in one device call: start the pair with both
# mistakes (up.sh, MODE=mistakes), then capture it before any request is sent
# (capture.py) and pack the capture as $OUT/$SCENARIO.tgz.
# Needs LAB (with parts/), LABSRC (the lab folder), OUT.
set -u
H=$(cd "$(dirname "$0")" && pwd); LAB=${LAB:-$HOME/lab}; SCENARIO=${SCENARIO:-nixl-demo-proxy-block-mismatch}
echo "interfaces: $(for i in /sys/class/net/*; do echo -n "$(basename $i)=$(cat $i/operstate 2>/dev/null) "; done)"
MODE=mistakes bash $H/up.sh || { tail -n 80 $LAB/vllm-*.log $LAB/proxy.log > $OUT/failed-logs.txt 2>&1; exit 1; }
python3 $H/capture.py $LAB/cap/$SCENARIO prefill:8100:$LAB/vllm-prefill.log decode:8200:$LAB/vllm-decode.log --proxy 8000:$LAB/proxy.log
cp $LAB/*.cmd $LAB/cap/$SCENARIO/ 2>/dev/null
tar -czf $OUT/$SCENARIO.tgz -C $LAB/cap $SCENARIO && ls -la $OUT
grep -h -i -E "ucx|nixl|warn|error" $LAB/vllm-prefill.log | head -30
