# pdtop's Mooncake lab: vLLM 0.26.0 MooncakeConnector ("mooncake_protocol":
# "tcp", mooncake-transfer-engine-cuda13 0.3.14), ONE prefill (8100,
# kv_producer, bootstrap server :8998) and ONE decode (8200, kv_consumer),
# vllm-router 0.1.17 --vllm-pd-disaggregation --kv-connector mooncake on :8000
# (Prometheus :29000). Mooncake's PD protocol is push-based and concurrent: the
# proxy sends the prefill {"do_remote_decode": true, "transfer_id": T} and, at
# the same time, the decode {"do_remote_prefill": true, "remote_engine_id": E,
# "remote_bootstrap_addr": "http://<P>:8998", "transfer_id": T} (E from the
# prefill's bootstrap server GET /query); the decode asks the prefill's side
# channel (zmq) for the blocks and the prefill writes them with the transfer
# engine. The prefill's response carries no kv_transfer_params. Phases:
#   probe_pre     2 direct probes (both steps by the driver, as above, same
#                 X-Request-Id to both), then 2 through the router; the client
#                 reads usage.prompt_tokens_details.cached_tokens from decode
#   bench         `vllm bench serve` through the router (ids bench-<i>)
#   probe_stale   KILL_AFTER-3 s into the bench: 2 prefill steps (their decode
#                 steps are sent right after the kill, in the background)
#   prefill_fault KILL_AFTER s into the bench: SIGKILL of the prefill's group
#   probe_outage  3 through the router while the prefill is down (background)
#   restart       DOWN_S s after the kill, same command line
#   probe_after   once healthy: 2 through the router, 2 direct (fresh /query),
#                 8 s later 2 more through the router (router ones background)
# Records scrapes of both instances AND the router's Prometheus every 0.5 s,
# /proc/net/dev, the bootstrap server's /query answers (events), per-probe
# client facts in requests.jsonl, bench.json (--save-detailed), clock.json.
import json, os, random, signal, subprocess, threading, time
import requests
CAP = os.environ["CAP"]; LAB = os.environ["LAB"]; MODEL = "lab-8b"; MODEL_DIR = os.environ["MODEL_DIR"]
DECODES = ["decode"]
BOOT = "127.0.0.1:8998"
threads = []
def bg(fn, *a):
    th = threading.Thread(target=fn, args=a, daemon=True); th.start(); threads.append(th); return th
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
def boot_query(tag):
    try:
        j = requests.get(f"http://{BOOT}/query", timeout=3).json(); mark(phase="bootstrap_query", edge=tag, answer=j); return j
    except Exception as e:
        mark(phase="bootstrap_query", edge=tag, error=repr(e)[:300]); return None
def prefill_step(rec, prompt):
    """The prefill half: max_tokens=1, do_remote_decode + transfer_id."""
    body = {"model": MODEL, "prompt": prompt, "max_tokens": 1, "stream": False,
            "kv_transfer_params": {"do_remote_decode": True, "do_remote_prefill": False, "transfer_id": rec["transfer_id"]}}
    t0 = time.time()
    try:
        r = requests.post(f"http://{INST['prefill']}/v1/completions", json=body, headers={"X-Request-Id": rec["id"]}, timeout=60)
        j = r.json() if r.headers.get("content-type", "").startswith("application/json") else {}
        rec.update({"prefill_status": r.status_code, "prefill_ms": (time.time()-t0)*1e3, "prefill_resp_id": j.get("id"),
                    "prefill_usage": j.get("usage"), "prefill_kv_transfer_params": j.get("kv_transfer_params"),
                    "prefill_error": None if r.status_code == 200 else r.text[:300]})
    except Exception as e:
        rec.update({"prefill_status": None, "prefill_error": repr(e)[:300]})
def decode_step(rec, timeout):
    body = {"model": MODEL, "prompt": rec["_prompt"], "max_tokens": 16, "stream": True, "stream_options": {"include_usage": True},
            "ignore_eos": True, "temperature": 0, "kv_transfer_params": rec["decode_kv_transfer_params"]}
    rec["t_decode_start"] = time.time()
    try: rec.update(stream(INST[rec["decode_instance"]], body, rec["id"], timeout=timeout))
    except Exception as e: rec["exception"] = repr(e)[:300]
def direct_probe(phase, i, decode, nwords=300):
    rid = f"probe-{phase}-{i}"; p = text(nwords, rid)
    q = boot_query(rid) or {}; eid = (q.get("0") or {}).get("engine_id")
    rec = {"id": rid, "x_request_id_sent": rid, "phase": phase, "flow": "direct_two_step", "decode_instance": decode,
           "t_start": time.time(), "_prompt": p, "transfer_id": f"xfer-{rid}", "bootstrap_engine_id": eid,
           "decode_kv_transfer_params": {"do_remote_prefill": True, "do_remote_decode": False, "remote_engine_id": eid,
                                         "remote_bootstrap_addr": f"http://{BOOT}", "transfer_id": f"xfer-{rid}"}}
    return rec
def finish_rec(rec):
    rec["t_end"] = time.time(); rec.pop("_prompt", None); rec_write(rec); print("probe", rec["id"], rec.get("prefill_status"), rec.get("status"),
        (rec.get("usage") or {}).get("prompt_tokens"), ((rec.get("usage") or {}).get("prompt_tokens_details") or {}).get("cached_tokens"),
        rec.get("finish_reason"), rec.get("chunks_with_text"), (rec.get("exception") or rec.get("error") or "")[:150], flush=True)
def run_direct(rec, timeout=45):
    """Both halves at once (as Mooncake's proxy does); the decode's stream is the client's answer."""
    tp = threading.Thread(target=prefill_step, args=(rec, rec["_prompt"]), daemon=True); tp.start()
    decode_step(rec, timeout); tp.join(timeout); finish_rec(rec); return rec
def finish_stale(rec, timeout=100):
    decode_step(rec, timeout); finish_rec(rec)
def router_probe(phase, i, nwords=300, timeout=90):
    rid = f"probe-{phase}-r{i}"; p = text(nwords, rid)
    rec = {"id": rid, "x_request_id_sent": rid, "phase": phase, "flow": "router", "t_start": time.time()}
    body = {"model": MODEL, "prompt": p, "max_tokens": 16, "stream": True, "stream_options": {"include_usage": True}, "ignore_eos": True, "temperature": 0}
    try: rec.update(stream(ROUTER, body, rid, timeout=timeout))
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
boot_query("start")
for i, d in enumerate((DECODES * 2)[:2]): run_direct(direct_probe("pre", i, d))
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
for r in stale: prefill_step(r, r["_prompt"])
mark(phase="probe_stale", edge="prefilled", ids=[r["id"] for r in stale], status=[r.get("prefill_status") for r in stale], transfer_ids=[r["transfer_id"] for r in stale])
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
for r in stale: bg(finish_stale, r)
mark(phase="probe_stale", edge="decode_steps_sent")
# ---- while the prefill is down: a few through the router
mark(phase="probe_outage", edge="start")
for i, at in enumerate([8, 20, 35]):
    time.sleep(max(0, t_kill + at - time.time())); bg(router_probe, "outage", i)
mark(phase="probe_outage", edge="end")
time.sleep(max(0, t_kill + DOWN_S - time.time()))
cmd = open(f"{LAB}/prefill.cmd").read().strip()
p = subprocess.Popen(f"exec {cmd} >> {LAB}/vllm-prefill.log 2>&1", shell=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                     stdin=subprocess.DEVNULL, start_new_session=True, cwd=LAB)
open(f"{LAB}/prefill.pid", "w").write(str(p.pid))
mark(phase="prefill_fault", edge="restart", instance="prefill", pid=p.pid, cmd=cmd, down_s=round(time.time() - t_kill, 1))
while not healthy("prefill") and time.time() < DEADLINE - 25 and p.poll() is None: time.sleep(0.5)
up = healthy("prefill"); boot_query("after_restart"); mark(phase="prefill_fault", edge="healthy" if up else "not_healthy", after_restart_s=round(time.time() - t_kill - DOWN_S, 1), rc=p.poll())
if up:
    mark(phase="probe_after", edge="start")
    for i in range(2): bg(router_probe, "after", i)
    for i, d in enumerate((DECODES * 2)[:2]): run_direct(direct_probe("after", i, d))
    time.sleep(8)
    for i in range(2, 4): bg(router_probe, "after", i)
    mark(phase="probe_after", edge="end")
# ---- the bench runs on to its last prompt
while bp.poll() is None and time.time() < DEADLINE - 4: time.sleep(0.5)
if bp.poll() is None:
    mark(phase="bench", edge="interrupt"); bp.send_signal(signal.SIGINT)
    try: bp.wait(5)
    except Exception: bp.kill()
mark(phase="bench", edge="end", rc=bp.poll())
print(open(f"{CAP}/bench.out").read()[-2500:], flush=True)
for th in threads: th.join(max(0.1, DEADLINE - 2 - time.time()))
mark(phase="probes", edge="joined", still_running=sum(1 for th in threads if th.is_alive()))
time.sleep(max(0, min(4, DEADLINE - time.time())))
stop = True; time.sleep(1)
print("driver done after", round(time.time() - T_START), "s", flush=True)
