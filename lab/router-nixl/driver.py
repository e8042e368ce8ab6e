# pdtop's router-NIXL lab (issue 34: "vllm-router 0.1.17 in PD mode in front
# of NIXL 1P2D"). ONE prefill (8100) and TWO decode (8200 "decode",
# kv_load_failure_policy=fail; 8201 "decode2", recompute) vLLM 0.26.0
# instances, NixlConnector, behind vllm-router 0.1.17 --vllm-pd-disaggregation
# on :8000 (Prometheus :29000). Phases:
#   probe_pre     2 direct two-step probes (prefill max_tokens=1 with
#                 kv_transfer_params {"do_remote_decode": true}, then decode /
#                 decode2 with the returned params; X-Request-Id set), then 2
#                 through the router; the client reads
#                 usage.prompt_tokens_details.cached_tokens
#   bench         `vllm bench serve` through the router: random dataset,
#                 input ~200-600, output ~16-48, 2 requests/s, ids bench-<i>
#                 (--request-id-prefix bench-: sent as x-request-id)
#   probe_stale   KILL_AFTER-3 s into the bench: 2 prefill steps (probe-stale-0
#                 for decode, -1 for decode2) whose KV stays on the prefill
#   prefill_fault KILL_AFTER s into the bench: SIGKILL of the prefill's whole
#                 process group; then the 2 stale decode steps (decode must
#                 fail its load, decode2 must recompute)
#   probe_outage  3 through the router while the prefill is down
#   restart       DOWN_S s after the kill: the prefill started again with the
#                 same command line (appending to its log)
#   probe_after   once healthy: 2 direct two-step probes + 2 through the router
#   (bench keeps going until its NUM prompts are sent; pdtop check is started
#   CHECK_AFTER s into the bench and runs until PD_END)
# Records scrapes of the three instances AND the router's Prometheus every
# 0.5 s, /proc/net/dev every 0.5 s, per-probe client facts in requests.jsonl,
# the bench's own result file (bench.json, --save-detailed) and
# clock.json (unix time vs time.perf_counter(), to place the bench's
# start_times on the unix clock).
import json, os, random, signal, subprocess, threading, time
import requests
CAP = os.environ["CAP"]; LAB = os.environ["LAB"]; MODEL = "lab-8b"; MODEL_DIR = os.environ["MODEL_DIR"]
DECODES = os.environ.get("DECODES", "decode decode2").split()   # "decode" alone: the 1P1D (NixlPushConnector) run
INST = {"prefill": "127.0.0.1:8100", "decode": "127.0.0.1:8200", "decode2": "127.0.0.1:8201", "router": "127.0.0.1:29000"}
INST = {k: v for k, v in INST.items() if k in ("prefill", "router") or k in DECODES}
ROUTER = "127.0.0.1:8000"
T_START = time.time()
DEADLINE = float(os.environ.get("DRIVER_DEADLINE", T_START + 270))
PD_END = float(os.environ.get("PD_END", DEADLINE + 6))
CHECK_AFTER = float(os.environ.get("CHECK_AFTER", 45)); KILL_AFTER = float(os.environ.get("KILL_AFTER", 35))
DOWN_S = float(os.environ.get("DOWN_S", 45)); NUM = int(os.environ.get("BENCH_NUM", 360)); RATE = os.environ.get("BENCH_RATE", "2")
words = open(os.environ["SEED_WORDS"]).read().split()
ev = open(f"{CAP}/events.jsonl", "a")
def mark(**k):
    k["t"] = time.time(); ev.write(json.dumps(k) + "\n"); ev.flush(); print("EVENT", json.dumps(k), flush=True)
json.dump({"unix": time.time(), "perf_counter": time.perf_counter(), "monotonic": time.monotonic()}, open(f"{CAP}/clock.json", "w"))
stop = False
def poller():
    f = open(f"{CAP}/scrapes.jsonl", "a"); nd = open(f"{CAP}/netdev.jsonl", "a")
    while not stop:
        t = time.time()
        for name, hp in INST.items():
            try:
                r = requests.get(f"http://{hp}/metrics", timeout=2)
                f.write(json.dumps({"t": t, "instance": name, "status": r.status_code, "text": r.text}) + "\n")
            except Exception as e:
                f.write(json.dumps({"t": t, "instance": name, "error": str(e)[:300]}) + "\n")
        f.flush()
        nd.write(json.dumps({"t": t, "text": open("/proc/net/dev").read()}) + "\n"); nd.flush()
        time.sleep(max(0, 0.5 - (time.time() - t)))
def text(nwords, salt):
    rnd = random.Random(salt); return " ".join(rnd.choice(words) for _ in range(nwords))
def rec_write(rec):
    with open(f"{CAP}/requests.jsonl", "a") as f: f.write(json.dumps(rec) + "\n")
def stream(hp, body, rid, timeout=60):
    """POST a streamed completion; the client's facts."""
    t0 = time.time(); ttft = None; usage = None; n = 0; other = []; resp_id = None; finish = None; txt = ""
    r = requests.post(f"http://{hp}/v1/completions", json=body, headers={"X-Request-Id": rid}, stream=True, timeout=timeout)
    out = {"status": r.status_code, "resp_headers": {k: v for k, v in r.headers.items() if k.lower() in ("x-request-id", "content-type", "server")}}
    if r.status_code != 200:
        out.update({"error": r.text[:500], "total_ms": (time.time()-t0)*1e3}); return out
    try:
        for line in r.iter_lines():
            if not line: continue
            line = line.decode(errors="replace")
            if not line.startswith("data:"): other.append(line[:300]); continue
            d = line[5:].strip()
            if d == "[DONE]": out["done"] = True; break
            try: j = json.loads(d)
            except Exception: other.append(d[:300]); continue
            if "error" in j and not j.get("choices"): other.append(d[:300])
            resp_id = resp_id or j.get("id")
            if j.get("usage"): usage = j["usage"]
            for c in j.get("choices") or []:
                if c.get("text"):
                    txt += c["text"]
                    if ttft is None: ttft = (time.time() - t0) * 1e3
                    n += 1
                if c.get("finish_reason"): finish = c["finish_reason"]
    except Exception as e:
        out["stream_exception"] = repr(e)[:300]
    out.update({"ttft_ms": ttft, "chunks_with_text": n, "text_chars": len(txt), "finish_reason": finish, "usage": usage,
                "resp_id": resp_id, "total_ms": (time.time()-t0)*1e3, "other": other[:3]})
    return out
def prefill_step(rid, prompt):
    """The toy proxy's first hop: max_tokens=1, do_remote_decode."""
    body = {"model": MODEL, "prompt": prompt, "max_tokens": 1, "stream": False,
            "kv_transfer_params": {"do_remote_decode": True, "do_remote_prefill": False, "remote_engine_id": None,
                                   "remote_block_ids": None, "remote_host": None, "remote_port": None}}
    t0 = time.time()
    try:
        r = requests.post(f"http://{INST['prefill']}/v1/completions", json=body, headers={"X-Request-Id": rid}, timeout=60)
        j = r.json() if r.headers.get("content-type", "").startswith("application/json") else {}
        return {"prefill_status": r.status_code, "prefill_ms": (time.time()-t0)*1e3, "prefill_resp_id": j.get("id"),
                "prefill_usage": j.get("usage"), "kv_transfer_params": j.get("kv_transfer_params"),
                "prefill_error": None if r.status_code == 200 else r.text[:300]}
    except Exception as e:
        return {"prefill_status": None, "prefill_error": repr(e)[:300], "kv_transfer_params": None}
def decode_step(rec, body_extra):
    body = {"model": MODEL, "prompt": rec["_prompt"], "max_tokens": 16, "stream": True, "stream_options": {"include_usage": True},
            "ignore_eos": True, "temperature": 0}
    body.update(body_extra)
    try: rec.update(stream(INST[rec["decode_instance"]], body, rec["id"]))
    except Exception as e: rec["exception"] = repr(e)[:300]
def direct_probe(phase, i, decode, nwords=300, kill_between=None):
    rid = f"probe-{phase}-{i}"; p = text(nwords, rid)
    rec = {"id": rid, "x_request_id_sent": rid, "phase": phase, "flow": "direct_two_step", "decode_instance": decode,
           "t_start": time.time(), "_prompt": p}
    rec.update(prefill_step(rid, p))
    return rec
def finish_direct(rec):
    rec["t_decode_start"] = time.time()
    if rec.get("kv_transfer_params"):
        decode_step(rec, {"kv_transfer_params": rec["kv_transfer_params"]})
    else:
        rec["decode_skipped"] = "prefill gave no kv_transfer_params"
    rec["t_end"] = time.time(); rec.pop("_prompt", None); rec_write(rec); print("probe", rec["id"], rec.get("prefill_status"), rec.get("status"),
        (rec.get("usage") or {}).get("prompt_tokens"), ((rec.get("usage") or {}).get("prompt_tokens_details") or {}).get("cached_tokens"),
        rec.get("finish_reason"), rec.get("chunks_with_text"), flush=True)
    return rec
def router_probe(phase, i, nwords=300):
    rid = f"probe-{phase}-r{i}"; p = text(nwords, rid)
    rec = {"id": rid, "x_request_id_sent": rid, "phase": phase, "flow": "router", "t_start": time.time()}
    body = {"model": MODEL, "prompt": p, "max_tokens": 16, "stream": True, "stream_options": {"include_usage": True}, "ignore_eos": True, "temperature": 0}
    try: rec.update(stream(ROUTER, body, rid))
    except Exception as e: rec["exception"] = repr(e)[:300]
    rec["t_end"] = time.time(); rec_write(rec)
    print("probe", rid, rec.get("status"), (rec.get("usage") or {}).get("prompt_tokens"),
          ((rec.get("usage") or {}).get("prompt_tokens_details") or {}).get("cached_tokens"), rec.get("error", "")[:200], flush=True)
    return rec
def healthy(name):
    try: return requests.get(f"http://{INST[name]}/health", timeout=1).status_code == 200
    except Exception: return False
def descendants(pid):
    kids = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                st = open(f"/proc/{d}/stat").read(); pp = int(st.rsplit(")", 1)[1].split()[1]); kids.setdefault(pp, []).append(int(d))
            except Exception: pass
    out, todo = [], [pid]
    while todo:
        x = todo.pop(); out.append(x); todo.extend(kids.get(x, []))
    return out
def alive(v):
    try: return "zombie" not in open(f"/proc/{v}/status").read()
    except Exception: return False
threading.Thread(target=poller, daemon=True).start()
time.sleep(1.5)
# ---- probes before the load
mark(phase="probe_pre", edge="start")
for i, d in enumerate((DECODES * 2)[:2]): finish_direct(direct_probe("pre", i, d))
for i in range(2): router_probe("pre", i)
mark(phase="probe_pre", edge="end")
# ---- the bench through the router
bcmd = ["python3", "-m", "vllm.entrypoints.cli.main", "bench", "serve", "--backend", "vllm", "--base-url", f"http://{ROUTER}",
        "--endpoint", "/v1/completions", "--model", MODEL, "--tokenizer", MODEL_DIR, "--dataset-name", "random",
        "--random-input-len", "400", "--random-output-len", "32", "--random-range-ratio", "0.5", "--ignore-eos",
        "--request-rate", RATE, "--num-prompts", str(NUM), "--seed", "34", "--request-id-prefix", "bench-",
        "--save-result", "--save-detailed", "--result-dir", CAP, "--result-filename", "bench.json",
        "--percentile-metrics", "ttft,tpot,itl,e2el", "--disable-tqdm", "--ready-check-timeout-sec", "0"]
open(f"{CAP}/bench.cmd", "w").write(" ".join(bcmd) + "\n")
bout = open(f"{CAP}/bench.out", "w")
mark(phase="bench", edge="spawn", cmd=" ".join(bcmd))
bp = subprocess.Popen(bcmd, stdout=bout, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=LAB)
t_main = None
for _ in range(1200):
    try:
        if "Starting main benchmark run" in open(f"{CAP}/bench.out").read(): t_main = time.time(); break
    except Exception: pass
    if bp.poll() is not None: break
    time.sleep(0.1)
mark(phase="bench", edge="main_start" if t_main else "no_main_start", rc=bp.poll())
if t_main is None:
    print(open(f"{CAP}/bench.out").read()[-3000:], flush=True); t_main = time.time()
def check_starter():
    time.sleep(max(0, t_main + CHECK_AFTER - time.time()))
    dur = max(10, int(PD_END - time.time()))
    cmd = os.environ["PD_CHECK"] + f" --duration {dur}"
    open(f"{CAP}/pdtop-check.cmd", "w").write(cmd + f"   # started {CHECK_AFTER:.0f} s into the bench\n")
    p = subprocess.Popen(cmd, shell=True, stdout=open(f"{CAP}/pdtop-check.json", "w"), stderr=open(f"{CAP}/pdtop-check.err", "w"), stdin=subprocess.DEVNULL)
    open(f"{CAP}/pdtop-check.pid", "w").write(str(p.pid))
    mark(phase="pdtop_check", edge="start", pid=p.pid, duration=dur)
if os.environ.get("PD_CHECK"): threading.Thread(target=check_starter, daemon=True).start()
# ---- stale probes' prefill steps, then the kill
time.sleep(max(0, t_main + KILL_AFTER - 3 - time.time()))
mark(phase="probe_stale", edge="start")
stale = [direct_probe("stale", i, d) for i, d in enumerate((DECODES * 2)[:2])]
mark(phase="probe_stale", edge="prefilled", ids=[r["id"] for r in stale], params=[r.get("kv_transfer_params") for r in stale])
time.sleep(max(0, t_main + KILL_AFTER - time.time()))
pid = int(open(f"{LAB}/prefill.pid").read()); victims = descendants(pid)
mark(phase="prefill_fault", edge="kill", instance="prefill", signal="SIGKILL", pgid=pid, pids=victims)
try: os.killpg(pid, signal.SIGKILL)
except Exception as e: print("killpg", e, flush=True)
for v in victims:
    try: os.kill(v, signal.SIGKILL)
    except Exception: pass
t_kill = time.time()
for _ in range(150):
    if not any(alive(v) for v in victims): break
    time.sleep(0.1)
mark(phase="prefill_fault", edge="dead", still_alive=[v for v in victims if alive(v)])
# the stale decode steps: the KV they point at died with the prefill
for r in stale:
    finish_direct(r)
mark(phase="probe_stale", edge="end")
# ---- while the prefill is down: a few through the router
mark(phase="probe_outage", edge="start")
for i, at in enumerate([8, 20, 35]):
    time.sleep(max(0, t_kill + at - time.time())); router_probe("outage", i)
mark(phase="probe_outage", edge="end")
time.sleep(max(0, t_kill + DOWN_S - time.time()))
cmd = open(f"{LAB}/prefill.cmd").read().strip()
p = subprocess.Popen(f"exec {cmd} >> {LAB}/vllm-prefill.log 2>&1", shell=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                     stdin=subprocess.DEVNULL, start_new_session=True, cwd=LAB)
open(f"{LAB}/prefill.pid", "w").write(str(p.pid))
mark(phase="prefill_fault", edge="restart", instance="prefill", pid=p.pid, cmd=cmd, down_s=round(time.time() - t_kill, 1))
while not healthy("prefill") and time.time() < DEADLINE - 25 and p.poll() is None: time.sleep(0.5)
up = healthy("prefill"); mark(phase="prefill_fault", edge="healthy" if up else "not_healthy", after_restart_s=round(time.time() - t_kill - DOWN_S, 1), rc=p.poll())
if up:
    mark(phase="probe_after", edge="start")
    for i in range(2): router_probe("after", i)
    for i, d in enumerate((DECODES * 2)[:2]): finish_direct(direct_probe("after", i, d))
    time.sleep(8)
    for i in range(2, 4): router_probe("after", i)
    mark(phase="probe_after", edge="end")
# ---- the bench runs on to its last prompt
while bp.poll() is None and time.time() < DEADLINE - 4: time.sleep(0.5)
if bp.poll() is None:
    mark(phase="bench", edge="interrupt"); bp.send_signal(signal.SIGINT)
    try: bp.wait(5)
    except Exception: bp.kill()
mark(phase="bench", edge="end", rc=bp.poll())
print(open(f"{CAP}/bench.out").read()[-2500:], flush=True)
time.sleep(max(0, min(4, DEADLINE - time.time())))
stop = True; time.sleep(1)
print("driver done after", round(time.time() - T_START), "s", flush=True)
