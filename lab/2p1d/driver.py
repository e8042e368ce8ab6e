# pdtop's 2P1D lab (shared/lab/2p2d's driver with one decode). Scenario: TWO
# prefill (8100 "prefill", 8101 "prefill2") and ONE decode (8200 "decode")
# vLLM 0.26.0 instances on one GPU, ExampleConnector with ONE shared
# directory, behind vLLM 0.26.0's own disagg_proxy_demo.py (--prefill P1 P2 --decode D,
# round robin; it forwards no request id and no kv_transfer_params). Phases:
#   warmup       4 short completions through the proxy
#   steady       24 completions through the proxy, 3 at a time, 400-2500 tokens,
#                some of them ending exactly one token past a block boundary
#                (n % 16 == 1: 1025, 2049, ...): the ExampleConnector stores the
#                prompt under its first (n-1)//16*16 tokens but decode looks it
#                up under its first (n-2)//16*16, so these miss
#   chat         6 chat completions through the proxy, 2 at a time (one tuned so
#                the rendered prompt has n % 16 == 1)
#   direct       3 completions straight to a decode instance (no prefill)
#   cancel       1 stream through the proxy, closed by the client after 3 chunks
#   fault_load   12 completions through the proxy, 3 at a time; 3 s in, prefill2
#                (API server + EngineCore, its whole process group) gets SIGKILL
#                and is started again at once with the same command line,
#                appending to its log
#   outage       one request every ~3 s through the proxy while prefill2 starts
#   after_restart 3 through the proxy once prefill2 is healthy again
#   readd        the demo proxy had dropped prefill2 from its round robin at the
#                first failure (remove_instance_endpoint): it is put back with
#                the proxy's own POST /instances/add (ADMIN_API_KEY)
#   after_readd  4 through the proxy, 2 at a time
# Records scrapes of all four instances and /proc/net/dev every 0.5 s, the
# shared directory every 0.5 s (totals in kvdir.jsonl, every folder with its
# file count, bytes and newest mtime in kvdir-folders.jsonl), and per-request
# client-side facts in requests.jsonl, including the folder names the
# connector should use for each prompt (md5 of the int64 token ids: the
# producer's store key and the consumer's lookup key).
import array, hashlib, json, os, random, signal, subprocess, threading, time, concurrent.futures as cf
import requests
from tokenizers import Tokenizer
CAP = os.environ["CAP"]; LAB = os.environ["LAB"]; KV = os.environ["KVDIR"]; MODEL = "lab-8b"; BLOCK = 16
INST = {"prefill": "127.0.0.1:8100", "prefill2": "127.0.0.1:8101", "decode": "127.0.0.1:8200"}
PROXY = "127.0.0.1:8000"; ADMIN_KEY = os.environ.get("ADMIN_API_KEY", "")
T_START = time.time()
DEADLINE = float(os.environ.get("DRIVER_DEADLINE", T_START + 150))
tok = Tokenizer.from_file(os.environ["MODEL_DIR"] + "/tokenizer.json")
words = open(os.environ["SEED_WORDS"]).read().split()
ev = open(f"{CAP}/events.jsonl", "a")
def mark(**k):
    k["t"] = time.time(); ev.write(json.dumps(k) + "\n"); ev.flush(); print("EVENT", json.dumps(k), flush=True)
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
def kv_poller():
    tot = open(f"{CAP}/kvdir.jsonl", "a"); per = open(f"{CAP}/kvdir-folders.jsonl", "a")
    while not stop:
        t = time.time(); folders = []; n = b = 0
        try: names = sorted(os.listdir(KV))
        except OSError: names = []
        for d in names:
            p = os.path.join(KV, d); fn = fb = 0; mt = 0.0
            try:
                with os.scandir(p) as it:
                    for e in it:
                        try:
                            st = e.stat(); fn += 1; fb += st.st_size; mt = max(mt, st.st_mtime)
                        except OSError: pass
            except NotADirectoryError:
                try: st = os.stat(p); fn, fb, mt = 1, st.st_size, st.st_mtime
                except OSError: pass
            except OSError: pass
            folders.append({"name": d, "files": fn, "bytes": fb, "mtime": round(mt, 3)}); n += fn; b += fb
        tot.write(json.dumps({"t": t, "folders": len(names), "files": n, "bytes": b}) + "\n"); tot.flush()
        per.write(json.dumps({"t": t, "n": len(names), "folders": folders}) + "\n"); per.flush()
        time.sleep(max(0, 0.5 - (time.time() - t)))
def key(ids, n):  # ExampleConnector._generate_foldername_debug: md5 of the int64 token ids
    return hashlib.md5(array.array("q", ids[:n]).tobytes()).hexdigest()
def folders_for(ids):
    n = len(ids)
    return {"store_folder": key(ids, (n - 1) // BLOCK * BLOCK), "store_tokens": (n - 1) // BLOCK * BLOCK,
            "lookup_folder": key(ids, (n - 2) // BLOCK * BLOCK), "lookup_tokens": (n - 2) // BLOCK * BLOCK}
def words_text(ntok, salt):
    """A text of exactly ntok tokens (re-tokenised), from the lab's word list."""
    for attempt in range(8):
        rnd = random.Random(f"{salt}/{attempt}"); s = []
        while True:
            s.extend(rnd.choice(words) for _ in range(300))
            ids = tok.encode(" ".join(s)).ids
            if len(ids) >= ntok: break
        t = tok.decode(ids[:ntok])
        if len(tok.encode(t).ids) == ntok: return t
    return t
def chat_text(ntok, salt, want_mod1):
    """Chat content whose rendered prompt ('user: X\\nassistant:', the lab's
    chat template) has n % 16 == 1 if want_mod1, else any other remainder."""
    for k in range(ntok, ntok + 80):
        c = words_text(k, salt); ids = tok.encode(f"user: {c}\nassistant:").ids
        if (len(ids) % BLOCK == 1) == want_mod1: return c, ids
    return c, ids
def stream(hp, path, body, rid, cancel_after=None, timeout=120):
    t0 = time.time(); ttft = None; usage = None; n = 0; txt = []; resp_id = None
    h = {"X-Request-Id": rid} if rid else {}
    r = requests.post(f"http://{hp}{path}", json=body, headers=h, stream=True, timeout=timeout)
    out = {"status": r.status_code, "resp_headers": {k: v for k, v in r.headers.items() if k.lower() in ("x-request-id", "content-type", "server")}}
    if r.status_code != 200:
        out.update({"error": r.text[:500], "total_ms": (time.time()-t0)*1e3}); return out
    try:
        for line in r.iter_lines():
            if not line: continue
            line = line.decode(errors="replace")
            if not line.startswith("data:"):
                txt.append(line[:300]); continue
            d = line[5:].strip()
            if d == "[DONE]": out["done"] = True; break
            try: j = json.loads(d)
            except Exception: txt.append(d[:300]); continue
            if "error" in j and not j.get("choices"): txt.append(d[:300])
            resp_id = resp_id or j.get("id")
            if j.get("usage"): usage = j["usage"]
            if j.get("choices") and ttft is None: ttft = (time.time() - t0) * 1e3
            if j.get("choices"): n += 1
            if cancel_after and n >= cancel_after:
                r.close(); out.update({"cancelled": True, "ttft_ms": ttft, "chunks": n, "resp_id": resp_id, "total_ms": (time.time()-t0)*1e3}); return out
    except Exception as e:
        out["stream_exception"] = repr(e)[:300]
    out.update({"ttft_ms": ttft, "chunks": n, "usage": usage, "resp_id": resp_id, "total_ms": (time.time()-t0)*1e3, "other": txt[:3]})
    return out
PATHS = {"chat": "/v1/chat/completions", "completion": "/v1/completions"}
def job(phase, i, ntok, kind="completion", target="proxy", out_tokens=48, cancel_after=None, chat_mod1=False):
    """Prepared before the load starts, so no tokenising happens while it runs."""
    rid = f"lab-{phase}-{i}"; salt = f"2p2d-{phase}-{i}"
    if kind == "chat":
        c, ids = chat_text(ntok, salt, chat_mod1)
        body = {"model": MODEL, "messages": [{"role": "user", "content": c}]}
    else:
        p = words_text(ntok, salt); ids = tok.encode(p).ids
        body = {"model": MODEL, "prompt": p}
    body.update({"max_tokens": out_tokens, "stream": True, "stream_options": {"include_usage": True}, "ignore_eos": True, "temperature": 0})
    rec = {"id": rid, "x_request_id_sent": rid, "x_request_id_forwarded": target != "proxy",
           "phase": phase, "mode": ("decode_only" if target != "proxy" else "chat" if kind == "chat" else "proxy"),
           "kind": kind, "path": PATHS[kind], "flow": "demo_proxy" if target == "proxy" else "direct",
           "target": target, "prompt_tokens_target": ntok, "prompt_tokens_expected": len(ids),
           "expect_miss": target == "proxy" and len(ids) % BLOCK == 1, "max_tokens": out_tokens}
    rec.update(folders_for(ids))
    return {"rec": rec, "body": body, "cancel_after": cancel_after}
def run_one(j):
    rec = dict(j["rec"]); rec["t_start"] = time.time()
    hp = PROXY if rec["target"] == "proxy" else INST[rec["target"]]
    try: rec.update(stream(hp, rec["path"], j["body"], rec["id"], j["cancel_after"]))
    except Exception as e: rec["exception"] = repr(e)[:500]
    rec["t_end"] = time.time()
    with open(f"{CAP}/requests.jsonl", "a") as f: f.write(json.dumps(rec) + "\n")
    return rec
def run_phase(name, jobs, conc=1):
    mark(phase=name, edge="start", n=len(jobs), concurrency=conc)
    with cf.ThreadPoolExecutor(conc) as ex:
        rs = list(ex.map(run_one, jobs))
    mark(phase=name, edge="end")
    ok = [r for r in rs if r.get("ttft_ms") and r.get("usage")]
    print(name, "ok", len(ok), "/", len(jobs), "median ttft", round(sorted(r["ttft_ms"] for r in ok)[len(ok)//2]) if ok else None,
          "n/cached", [(r.get("usage") or {}).get("prompt_tokens") for r in ok], [((r.get("usage") or {}).get("prompt_tokens_details") or {}).get("cached_tokens") for r in ok], flush=True)
    return rs
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
# ---- all prompts first (tokenising takes a moment)
t_prep = time.time()
STEADY = [412, 1025, 903, 1710, 2049, 2480, 611, 1281, 1024, 1537, 2213, 733, 2305, 1450, 2048, 517, 1026, 1889, 1158, 2377, 845, 1601, 1990, 1347]
J = {
  "warmup": [job("warmup", i, n, out_tokens=16) for i, n in enumerate([290, 330, 370, 410])],
  "steady": [job("steady", i, n) for i, n in enumerate(STEADY)],
  "chat": [job("chat", i, n, kind="chat", chat_mod1=(i == 3)) for i, n in enumerate([520, 1480, 2390, 860, 1930, 1210])],
  "direct": [job("direct", i, n, target=t) for i, (n, t) in enumerate([(640, "decode"), (1730, "decode"), (1110, "decode")])],
  "cancel": [job("cancel", 0, 2000, out_tokens=400, cancel_after=3)],
  "fault_load": [job("fault_load", i, n, out_tokens=96) for i, n in enumerate([1210, 2090, 760, 1850, 1345, 2420, 950, 1640, 2260, 1070, 1780, 590])],
  "outage": [job("outage", i, n) for i, n in enumerate([980, 1420, 700, 1870, 1190, 2150, 830, 1560, 1020, 1690, 2230, 660, 1300, 1940])],
  "after_restart": [job("after_restart", i, n) for i, n in enumerate([1130, 1760, 880])],
  "after_readd": [job("after_readd", i, n, kind=("chat" if i == 3 else "completion")) for i, n in enumerate([1240, 2010, 1409, 970])],
}
print("prepared", sum(len(v) for v in J.values()), "requests in", round(time.time() - t_prep, 1), "s; expect_miss:",
      [j["rec"]["id"] for v in J.values() for j in v if j["rec"]["expect_miss"]], flush=True)
threading.Thread(target=poller, daemon=True).start(); threading.Thread(target=kv_poller, daemon=True).start()
time.sleep(1.5)
run_phase("warmup", J["warmup"])
run_phase("steady", J["steady"], conc=3)
run_phase("chat", J["chat"], conc=2)
run_phase("direct", J["direct"])
run_phase("cancel", J["cancel"])
# ---- the fault: prefill2 SIGKILLed (its whole process group) mid-load, started again at once
def fault():
    time.sleep(3.0)
    pid = int(open(f"{LAB}/prefill2.pid").read())
    victims = descendants(pid)
    mark(phase="prefill2_fault", edge="kill", pids=victims)
    try: os.killpg(pid, signal.SIGKILL)
    except Exception as e: print("killpg", e, flush=True)
    for v in victims:
        try: os.kill(v, signal.SIGKILL)
        except Exception: pass
    for _ in range(150):
        if not any(alive(v) for v in victims): break
        time.sleep(0.1)
    mark(phase="prefill2_fault", edge="dead", still_alive=[v for v in victims if alive(v)])
    cmd = open(f"{LAB}/prefill2.cmd").read().strip()
    p = subprocess.Popen(f"exec {cmd} >> {LAB}/vllm-prefill2.log 2>&1", shell=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                         stdin=subprocess.DEVNULL, start_new_session=True, cwd=LAB)
    open(f"{LAB}/prefill2.pid", "w").write(str(p.pid))
    mark(phase="prefill2_fault", edge="started", pid=p.pid, cmd=cmd)
ft = threading.Thread(target=fault); ft.start()
run_phase("fault_load", J["fault_load"], conc=3)
ft.join()
# ---- while prefill2 starts again: a request every ~3 s through the proxy
mark(phase="outage", edge="start", n=len(J["outage"]), concurrency=1)
k = 0
while k < len(J["outage"]) and not healthy("prefill2") and time.time() < DEADLINE - 45:
    run_one(J["outage"][k]); k += 1
    for _ in range(6):
        if healthy("prefill2"): break
        time.sleep(0.5)
mark(phase="outage", edge="end", sent=k)
while not healthy("prefill2") and time.time() < DEADLINE - 30: time.sleep(0.5)
up = healthy("prefill2"); mark(phase="prefill2_fault", edge="up" if up else "not_up")
if up:
    run_phase("after_restart", J["after_restart"])
    try:
        r = requests.get(f"http://{PROXY}/status", timeout=5); mark(phase="readd", edge="status_before", body=r.json())
        r = requests.post(f"http://{PROXY}/instances/add", json={"type": "prefill", "instance": INST["prefill2"]}, headers={"X-API-Key": ADMIN_KEY}, timeout=30)
        mark(phase="readd", edge="added", status=r.status_code, body=r.text[:300])
        r = requests.get(f"http://{PROXY}/status", timeout=5); mark(phase="readd", edge="status_after", body=r.json())
    except Exception as e:
        mark(phase="readd", edge="failed", error=repr(e)[:300])
    run_phase("after_readd", J["after_readd"], conc=2)
time.sleep(max(0, min(8, DEADLINE - time.time())))
stop = True; time.sleep(1)
print("driver done after", round(time.time() - T_START), "s", flush=True)
