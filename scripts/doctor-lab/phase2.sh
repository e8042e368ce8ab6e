#!/bin/bash
# Phase 2 of the doctor lab, in one device call: the pair with both mistakes,
# `pdtop doctor` (text and --json) before any request; then the fix (prefill
# restarted with --block-size 16, the demo proxy replaced by miniproxy.py)
# and `pdtop doctor` again. Each state is also captured (capture.py), so a
# finding the doctor missed or got wrong can be reproduced from its inputs.
# Needs LAB (with parts/), LABSRC (the lab folder), PD (the pdtop binary), OUT.
set -u
H=$(cd "$(dirname "$0")" && pwd); LAB=${LAB:-$HOME/lab}; PD=${PD:?PD: the pdtop binary}
export LAB LABSRC
doctor() { # state: run pdtop doctor as a user would, text then JSON
  local args="--prefill 127.0.0.1:8100 --decode 127.0.0.1:8200 --proxy 127.0.0.1:8000 --prefill-log $LAB/vllm-prefill.log --decode-log $LAB/vllm-decode.log"
  { echo "\$ pdtop doctor $args"; $PD doctor $args; echo "[exit $?]"; } > $OUT/transcript-$1.txt 2>&1
  { $PD doctor $args --json; echo "[exit $?]"; } > $OUT/doctor-$1.json 2>&1
  cat $OUT/transcript-$1.txt
}
capture() { # state
  python3 $H/capture.py $LAB/cap/$1 prefill:8100:$LAB/vllm-prefill.log decode:8200:$LAB/vllm-decode.log --proxy 8000:$LAB/proxy.log > /dev/null
  cp $LAB/*.cmd $LAB/cap/$1/; rm -f $LAB/cap/$1/ps-forest.txt
}
$PD --version
MODE=mistakes bash $H/up.sh || { tail -n 80 $LAB/vllm-*.log $LAB/proxy.log > $OUT/failed-logs.txt 2>&1; exit 1; }
doctor mistakes; capture p2-mistakes
MODE=fixed WHAT=prefill bash $H/up.sh && MODE=fixed WHAT=proxy bash $H/up.sh || { tail -n 80 $LAB/vllm-*.log $LAB/proxy.log > $OUT/failed-logs.txt 2>&1; exit 1; }
doctor fixed; capture p2-fixed
tar -czf $OUT/p2-captures.tgz -C $LAB/cap p2-mistakes p2-fixed; ls -la $OUT
