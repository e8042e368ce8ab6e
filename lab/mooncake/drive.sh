#!/bin/bash
# Mooncake lab, step 2 on the device: vllm-router 0.1.17 in PD mode with
# --kv-connector mooncake in front (:8000, Prometheus :29000, stdout+stderr raw
# in proxy.log; it asks the prefill's bootstrap server :8998 for its engine_id
# at start-up), pdtop record from the start, driver.py (probes, `vllm bench
# serve` through the router, the prefill SIGKILLed mid-load and restarted;
# pdtop check started CHECK_AFTER s into the bench), then $OUT/capture.tar.xz.
# Needs: up.sh done, ROUTER_WHEELS (vllm_router + orjson wheels), PD (pdtop), SHARED_LAB.
set -u
H=$(cd "$(dirname "$0")" && pwd); S=$(cd "${SHARED_LAB:?set SHARED_LAB to shared/lab}" && pwd); LAB=${LAB:-$HOME/lab}
export CAP=$LAB/cap MODEL_DIR=${MODEL_DIR:-$S/models/llama-8b-shape} SEED_WORDS=$S/words.txt LAB SHARED_LAB=$S
. $H/env.sh   # the instances' environment: the driver restarts the prefill with it
PD=${PD:?set PD to the pdtop binary to run beside the lab}; chmod +x $PD
RW=$(cd "${ROUTER_WHEELS:?set ROUTER_WHEELS}" && pwd)
mkdir -p $LAB/rsite
[ -f $LAB/rsite/.done ] || { for w in $RW/*.whl; do python3 -c "import zipfile,sys; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])" $w $LAB/rsite; done; chmod +x $LAB/rsite/vllm_router.libs/* 2>/dev/null; touch $LAB/rsite/.done; }
export DECODES="decode"; PORTS="8100 8200"
DEC="--decode 127.0.0.1:8200 --prefill-log $LAB/vllm-prefill.log --decode-log $LAB/vllm-decode.log"
cd $LAB
for p in $PORTS; do curl -sf 127.0.0.1:$p/health >/dev/null && echo "$p healthy" || echo "$p NOT healthy"; done
RT="python3 -c 'from vllm_router.launch_router import main; main()' --vllm-pd-disaggregation --kv-connector mooncake --prefill http://127.0.0.1:8100 8998 --decode http://127.0.0.1:8200 --host 127.0.0.1 --port 8000 --prometheus-port 29000 --policy round_robin --request-timeout-secs ${RT_TIMEOUT:-75}"
echo "env PYTHONPATH=/lab/rsite:/lab/site $RT" > $LAB/proxy.cmd
setsid nohup env PYTHONPATH=$LAB/rsite:$LAB/site bash -c "exec $RT" >> $LAB/proxy.log 2>&1 &
echo $! > $LAB/router.pid
for i in $(seq 1 60); do curl -s -o /dev/null 127.0.0.1:29000/metrics && curl -s -o /dev/null 127.0.0.1:8000/health && break; sleep 1; done; echo "router up after ${i}s"
kill -0 $(cat $LAB/router.pid) 2>/dev/null || { echo "ROUTER DIED"; tail -30 $LAB/proxy.log; exit 1; }
sed 's/\x1b\[[0-9;]*m//g' $LAB/proxy.log | grep -i -E "mooncake|bootstrap|engine_id" | cut -c1-300 | head
curl -s 127.0.0.1:29000/metrics > $CAP/router-metrics-idle.txt; curl -s -m 5 127.0.0.1:8000/v1/models > $CAP/router-models.json
IN="--router 127.0.0.1:29000 --proxy-log $LAB/proxy.log --prefill 127.0.0.1:8100 $DEC --iface lo --model-config $MODEL_DIR/config.json"
DUR=${DUR:-260}
echo "$PD record -o $CAP/pdtop.pdrec $IN --otlp-listen 127.0.0.1:4320 --duration $DUR" > $CAP/pdtop-record.cmd
$PD record -o $CAP/pdtop.pdrec $IN --otlp-listen 127.0.0.1:4320 --duration $DUR > $CAP/pdtop-record.out 2>&1 &
RC=$!
sleep 1
T0=$(date +%s); export DRIVER_DEADLINE=$((T0 + DUR - 8))
export PD_CHECK="$PD check $IN --otlp-listen 127.0.0.1:4319 --json" PD_END=$((T0 + DUR - 2)) CHECK_AFTER=${CHECK_AFTER:-45}
export BENCH_NUM=${BENCH_NUM:-160} BENCH_RATE=${BENCH_RATE:-1.5} KILL_AFTER=${KILL_AFTER:-25} DOWN_S=${DOWN_S:-35}
timeout $((DUR-4)) python3 $H/driver.py > $CAP/driver.out 2>&1 < /dev/null
echo "driver rc=$? took $(( $(date +%s) - T0 ))s"
grep -v "^EVENT" $CAP/driver.out | tail -25; grep "^EVENT" $CAP/driver.out | cut -c1-300
CK=$(cat $CAP/pdtop-check.pid 2>/dev/null || echo 0)
while [ $CK != 0 ] && kill -0 $CK 2>/dev/null; do ps -o pid,rss,vsz,time,etime,args -p $CK,$RC > $CAP/pdtop-ps.tmp 2>&1 && cp $CAP/pdtop-ps.tmp $CAP/pdtop-ps.txt; sleep 2; done
wait $RC; echo "record rc=$?"; cat $CAP/pdtop-ps.txt 2>/dev/null; rm -f $CAP/pdtop-ps.tmp
for p in $PORTS; do curl -s -m 3 127.0.0.1:$p/metrics > $CAP/metrics-end-$p.txt; done
curl -s -m 3 127.0.0.1:29000/metrics > $CAP/router-metrics-end.txt
grep -E "^vllm_router_pd_(prefill|decode)_errors_total|^vllm_router_pd_errors_total|^vllm_router_retries|^vllm_router_cb_state|^vllm_router_pd_requests_total|^vllm_router_request_errors" $CAP/router-metrics-end.txt
cp $LAB/vllm-*.log $LAB/proxy.log $LAB/*.cmd $LAB/otlp.log $CAP/ 2>/dev/null; cp $MODEL_DIR/config.json $CAP/model-config.json
nvidia-smi > $CAP/nvidia-smi.txt 2>&1; python3 -m pip list 2>/dev/null > $CAP/pip-list.txt
python3 -c "import json;d=json.load(open('$CAP/pdtop-check.json'));print({k:d.get(k) for k in ('requests','verdict','silent_miss_ids','requests_metrics')})" 2>&1 | tail -3
head -c 600 $CAP/pdtop-check.err; tail -3 $CAP/pdtop-record.out
sed 's/\x1b\[[0-9;]*m//g' $LAB/proxy.log | grep -E "WARN|ERROR" | sed -E 's/[0-9a-f]{32}/<hex>/g; s/[0-9]{4}-[0-9-]+ [0-9:]+//' | cut -c1-220 | sort | uniq -c | sort -rn | head -12
for f in prefill decode; do echo "== $f mooncake warn/error:"; grep -E "^(WARNING|ERROR)" $LAB/vllm-$f.log | grep -i -E "mooncake|xfer|kv|transfer|bootstrap" | sed -E 's/^[A-Z]+ [0-9-]+ [0-9:]+ //; s/[0-9a-f]{32}/<hex>/g; s/[0-9a-f-]{36}/<uuid>/g' | cut -c1-240 | sort | uniq -c | sort -rn | head -12; done
for f in scrapes netdev; do xz -T0 -6 $CAP/$f.jsonl; done
(cd $LAB && tar -cf - cap | xz -T0 -6 > $OUT/capture.tar.xz); ls -la $OUT $CAP
