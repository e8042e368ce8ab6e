#!/bin/bash
# 2P1D lab, step 2: vLLM 0.26.0's own disagg_proxy_demo.py in front
# (--prefill P1 P2 --decode D; ADMIN_API_KEY set so that /instances/add
# works), pdtop record watching from the start, pdtop check started MID-LOAD
# (CHECK_AFTER seconds into the driver: it reads the logs' past, `--since`),
# then driver.py, then pack $OUT/capture.tar.xz.
set -u
H=$(cd "$(dirname "$0")" && pwd); S=${SHARED_LAB:?set SHARED_LAB to shared/lab}; LAB=${LAB:-$HOME/lab}
export CAP=$LAB/cap KVDIR=$LAB/kv MODEL_DIR=${MODEL_DIR:-$S/models/qwen3-8b-shape} SEED_WORDS=$S/words.txt LAB SHARED_LAB=$S
. $H/env.sh   # the instances' environment: the driver restarts prefill2 with it
PD=${PD:?set PD to the pdtop binary to run beside the lab}; chmod +x $PD
cd $LAB
for p in 8100 8101 8200; do curl -sf 127.0.0.1:$p/health >/dev/null && echo "$p healthy" || echo "$p NOT healthy"; done
export ADMIN_API_KEY=lab-admin-key
PX="python3 $S/vllm/disagg_proxy_demo.py --model lab-8b --prefill 127.0.0.1:8100 127.0.0.1:8101 --decode 127.0.0.1:8200 --port 8000"
echo "env ADMIN_API_KEY=... $PX" > $LAB/proxy.cmd
setsid nohup $PX >> $LAB/proxy.log 2>&1 &
echo $! > $LAB/demo_proxy.pid
for i in $(seq 1 30); do curl -s -o /dev/null 127.0.0.1:8000/status && break; sleep 1; done; echo "demo proxy up after ${i}s"
kill -0 $(cat $LAB/demo_proxy.pid) 2>/dev/null || { echo "DEMO PROXY DIED"; tail -20 $LAB/proxy.log; exit 1; }
IN="--prefill 127.0.0.1:8100 127.0.0.1:8101 --decode 127.0.0.1:8200 --prefill-log $LAB/vllm-prefill.log $LAB/vllm-prefill2.log --decode-log $LAB/vllm-decode.log --proxy-log $LAB/proxy.log --kv-dir $KVDIR --iface lo --model-config $MODEL_DIR/config.json"
DUR=${DUR:-170}
echo "$PD record -o $CAP/pdtop.pdrec $IN --otlp-listen 127.0.0.1:4320 --duration $DUR" > $CAP/pdtop-record.cmd
$PD record -o $CAP/pdtop.pdrec $IN --otlp-listen 127.0.0.1:4320 --duration $DUR > $CAP/pdtop-record.out 2>&1 &
RC=$!
sleep 1
T0=$(date +%s); export DRIVER_DEADLINE=$((T0 + DUR - 12))
timeout $((DUR-6)) python3 $H/driver.py > $CAP/driver.out 2>&1 &
DRV=$!
# pdtop opened mid-load: the load has run CHECK_AFTER seconds.
CHECK_AFTER=${CHECK_AFTER:-45}; sleep $CHECK_AFTER
echo "$PD check $IN --otlp-listen 127.0.0.1:4319 --duration $((DUR - CHECK_AFTER)) --json (started $CHECK_AFTER s into the load)" > $CAP/pdtop-check.cmd
$PD check $IN --otlp-listen 127.0.0.1:4319 --duration $((DUR - CHECK_AFTER)) --json > $CAP/pdtop-check.json 2> $CAP/pdtop-check.err &
CK=$!
wait $DRV; echo "driver rc=$? took $(( $(date +%s) - T0 ))s"
grep -v "^EVENT" $CAP/driver.out | tail -30; grep "^EVENT" $CAP/driver.out | grep -E "prefill2_fault|readd" | cut -c1-400
while kill -0 $CK 2>/dev/null; do ps -o pid,rss,vsz,time,etime,args -p $CK,$RC > $CAP/pdtop-ps.tmp 2>&1 && cp $CAP/pdtop-ps.tmp $CAP/pdtop-ps.txt; sleep 2; done
wait $CK; echo "check rc=$?"; wait $RC; echo "record rc=$?"; cat $CAP/pdtop-ps.txt; rm -f $CAP/pdtop-ps.tmp
for p in 8100 8101 8200; do curl -s -m 3 127.0.0.1:$p/metrics > $CAP/metrics-end-$p.txt; done
cp $LAB/vllm-*.log $LAB/proxy.log $LAB/*.cmd $LAB/otlp.log $CAP/ 2>/dev/null; cp $MODEL_DIR/config.json $CAP/model-config.json
ls -la --time-style=+%s.%N -R $KVDIR 2>&1 | xz -6 > $CAP/kvdir-listing.txt.xz; du -sh $KVDIR
nvidia-smi > $CAP/nvidia-smi.txt 2>&1; python3 -m pip list 2>/dev/null > $CAP/pip-list.txt
python3 -c "import json;d=json.load(open('$CAP/pdtop-check.json'));print({k:d.get(k) for k in ('requests','verdict','silent_miss_ids','requests_metrics')})" 2>&1 | tail -3
head -c 600 $CAP/pdtop-check.err; tail -3 $CAP/pdtop-record.out
for f in scrapes netdev kvdir-folders; do xz -T0 -6 $CAP/$f.jsonl; done
(cd $LAB && tar -cf - cap | xz -T0 -6 > $OUT/capture.tar.xz); ls -la $OUT $CAP
