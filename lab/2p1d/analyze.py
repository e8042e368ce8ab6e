# After the run, here (no GPU): decide each request's outcome from the
# client's facts (requests.jsonl: status, body, usage.prompt_tokens_details.
# cached_tokens) and check it against the instances' own records: which
# prefill and decode served it (vLLM's OTLP spans in otlp.bin, paired by
# prompt length and time, and the decode's id in its log), and what the
# ExampleConnector did in the shared directory (kvdir-folders.jsonl: the
# folder named by the md5 of the prompt's token ids, when it appeared, when it
# was last written, its bytes). Then set pdtop check's live answer
# (pdtop-check.json) beside the truth, request by request.
# Usage: analyze.py CAPTURE_DIR -> rewrites CAPTURE_DIR/requests.jsonl with
# outcome / how / error_at / prefill_* / decode_* / folder_* fields, writes
# CAPTURE_DIR/truth-summary.json and CAPTURE_DIR/pdtop-vs-truth.jsonl.
import collections, json, lzma, os, re, sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from otlp_read import spans
D = sys.argv[1]
def opn(name):
    p = os.path.join(D, name)
    return open(p) if os.path.exists(p) else lzma.open(p + ".xz", "rt")
reqs = [json.loads(l) for l in opn("requests.jsonl")]
events = [json.loads(l) for l in opn("events.jsonl")]
NAMES = ("prefill", "prefill2", "decode")
PORT = {"prefill": "127.0.0.1:8100", "prefill2": "127.0.0.1:8101", "decode": "127.0.0.1:8200"}
BY_PORT = {v: k for k, v in PORT.items()}
logs = {n: open(os.path.join(D, f"vllm-{n}.log"), errors="replace").read() for n in NAMES}
proxy_log = open(os.path.join(D, "proxy.log"), errors="replace").read()
def ev(phase, edge):
    return next((e for e in events if e.get("phase") == phase and e.get("edge") == edge), None)
kill_t = ev("prefill2_fault", "kill")["t"]; up_t = ev("prefill2_fault", "up")["t"]; started_t = ev("prefill2_fault", "started")["t"]
readd_t = (ev("readd", "added") or {}).get("t")
# ---- spans
SP = [s for s in spans(os.path.join(D, "otlp.bin")) if s.get("name") == "llm_request"]
pre_spans = [s for s in SP if s["service"] in ("vllm-prefill", "vllm-prefill2")]
dec_spans = {s["attrs"].get("gen_ai.request.id"): s for s in SP if s["service"] in ("vllm-decode", "vllm-decode2")}
# ---- the shared directory, every 0.5 s
folders = {}  # name -> {first, last_mtime, mtimes:set, bytes, files}
for line in opn("kvdir-folders.jsonl"):
    s = json.loads(line)
    for f in s["folders"]:
        d = folders.setdefault(f["name"], {"first": s["t"], "mtimes": [], "bytes": 0, "files": 0})
        if f["mtime"] and (not d["mtimes"] or d["mtimes"][-1] != f["mtime"]): d["mtimes"].append(f["mtime"])
        d["bytes"], d["files"] = f["bytes"], f["files"]
def logged_in(rid_internal):
    pat = re.compile(r"Received request " + re.escape(rid_internal) + r"(?![0-9A-Za-z_-])")
    return [n for n in NAMES if pat.search(logs[n])]
used_pre = set()
out = []
for r in sorted(reqs, key=lambda r: r["t_start"]):
    u = r.get("usage") or {}
    pt = u.get("prompt_tokens"); ct = (u.get("prompt_tokens_details") or {}).get("cached_tokens")
    r["prompt_tokens"] = pt; r["cached_tokens"] = ct
    n = r["prompt_tokens_expected"]
    # decode side
    rid = r.get("resp_id")
    internal = (rid + "-0" if r["kind"] == "completion" else rid) if rid else None
    dspan = dec_spans.get(internal) if internal else None
    dlog = logged_in(internal) if internal else []
    r["decode_instance"] = (dspan["service"].replace("vllm-", "") if dspan else (dlog[0] if len(dlog) == 1 else None))
    r["decode_request_id"] = internal if (dspan or dlog) else None
    r["decode_how"] = (f"decode span {internal} from {dspan['service']}" if dspan else f"logged by vllm-{dlog[0]}.log" if dlog else None)
    # prefill side: the span with this prompt length and max_tokens 1 that started while the client waited
    ps = None
    if r["flow"] == "demo_proxy":
        cands = [s for s in pre_spans if s["span_id"] not in used_pre and s["attrs"].get("gen_ai.usage.prompt_tokens") == n
                 and s["attrs"].get("gen_ai.request.max_tokens") == 1 and r["t_start"] - 0.05 <= s["start"] <= r["t_end"] + 0.05]
        if len(cands) == 1: ps = cands[0]; used_pre.add(ps["span_id"])
        elif cands: r["prefill_ambiguous"] = [c["attrs"]["gen_ai.request.id"] for c in cands]
    r["prefill_instance"] = ps["service"].replace("vllm-", "") if ps else None
    r["prefill_request_id"] = ps["attrs"]["gen_ai.request.id"] if ps else None
    r["prefill_span"] = [round(ps["start"], 3), round(ps["end"], 3)] if ps else None
    # the folder
    sf = folders.get(r["store_folder"]); lf = folders.get(r["lookup_folder"])
    r["folder_stored"] = bool(sf); r["folder_first_seen"] = round(sf["first"], 2) if sf else None
    r["folder_bytes"] = sf["bytes"] if sf else None; r["folder_files"] = sf["files"] if sf else None
    r["folder_writes"] = len(sf["mtimes"]) if sf else 0
    r["folder_last_mtime"] = round(sf["mtimes"][-1], 3) if sf and sf["mtimes"] else None
    dstart = dspan["start"] if dspan else None
    r["decode_span_start"] = round(dstart, 3) if dstart else None
    # did the lookup key's folder exist before the decode request arrived (what the connector checks)?
    r["lookup_folder_before_decode"] = bool(lf) and dstart is not None and lf["first"] <= dstart + 0.5 and (lf["mtimes"] and min(lf["mtimes"]) <= dstart)
    # a decode that computes a prompt stores it too, under the producer's key: the prefill's folder is written again
    r["folder_written_by_decode"] = bool(sf and sf["mtimes"] and dstart is not None and sf["mtimes"][-1] > dstart + 0.05)
    failed = r.get("exception") or r.get("stream_exception") or r.get("status") != 200
    short = bool(u) and not r.get("cancelled") and (u.get("completion_tokens") or 0) < r["max_tokens"]
    r["error_at"] = None
    if r.get("cancelled"):
        oc, how = "cancelled", f"the client closed the stream after {r.get('chunks')} chunks; decode {r['decode_instance']} had loaded its KV first (External Cache Hit)"
    elif failed or short or not u:
        oc = "error"
        if r.get("other") == ["null"] and f"Cannot connect to host {PORT['prefill2']}" in proxy_log and r["t_start"] >= kill_t:
            r["error_at"] = "prefill"
            how = (f"prefill2 ({PORT['prefill2']}) had been SIGKILLed {r['t_start'] - kill_t:.2f} s earlier: the demo proxy's prefill call could not connect "
                   "(proxy.log `ClientError occurred: Cannot connect to host 127.0.0.1:8101`, `Error occurred in disagg proxy server`, HTTPException 502), "
                   "it dropped 8101 from its prefill list (remove_instance_endpoint) and answered the client 200 with the body `null`; no instance logged the request")
        else:
            how = f"status {r.get('status')}, {r.get('exception') or r.get('stream_exception') or r.get('other')}"
    elif r["flow"] == "direct":
        oc, how = "no_prefill", (f"sent straight to {r['target']}; cached_tokens {ct} of {pt}; the decode computed the prompt and, "
                                 f"having found no folder, stored one itself ({r['store_folder'][:8]}…, first seen {r['folder_first_seen'] and round(r['folder_first_seen'] - r['t_start'], 2)} s after the request)")
    elif ct and ct >= r["lookup_tokens"]:
        oc, how = "loaded", f"decode usage cached_tokens {ct} of {pt} = the connector's lookup length (n-2)//16*16; folder {r['store_folder'][:8]}… stored by {r['prefill_instance']}, read by {r['decode_instance']}"
    else:
        why = (f"n = {n} = 16*{(n - 1) // 16} + 1: the prefill stored the prompt's first {r['store_tokens']} tokens (folder {r['store_folder'][:8]}…), "
               f"decode looked up the first {r['lookup_tokens']} (folder {r['lookup_folder'][:8]}…, never created)") if n % 16 == 1 else "unexplained"
        oc, how = "silent_miss", f"{why}; decode answered 200 with cached_tokens {ct} of {pt} (recomputed) and {'wrote the prefill' + chr(39) + 's folder again (same key, newest file mtime after the decode started)' if r['folder_written_by_decode'] else 'left the folder as it was'}"
    r["outcome"] = oc; r["how"] = how
    out.append(r)
with open(os.path.join(D, "requests.jsonl"), "w") as f:
    for r in out: f.write(json.dumps(r) + "\n")
# ---- truth summary
phases = list(dict.fromkeys(r["phase"] for r in out))
counts = {ph: dict(collections.Counter(r["outcome"] for r in out if r["phase"] == ph)) for ph in phases}
counts["all"] = dict(collections.Counter(r["outcome"] for r in out))
routing = {ph: dict(collections.Counter(f"{r['prefill_instance']}->{r['decode_instance']}" for r in out if r["phase"] == ph)) for ph in phases}
# metric deltas per phase, from the scrapes
WANT = re.compile(r'^vllm:(prompt_tokens_by_source_total\{[^}]*source="(\w+)"\}|request_success_total\{[^}]*finished_reason="(\w+)"\}|external_prefix_cache_hits_total|external_prefix_cache_queries_total|prompt_tokens_total)')
series = collections.defaultdict(list)
for line in opn("scrapes.jsonl"):
    s = json.loads(line)
    if "text" not in s: continue
    for ml in s["text"].split("\n"):
        m = WANT.match(ml)
        if not m: continue
        k = ml.split("{")[0].split(" ")[0][5:] + (":" + m.group(2) if m.group(2) else "") + (":" + m.group(3) if m.group(3) else "")
        try: series[(s["instance"], k)].append((s["t"], float(ml.rsplit(" ", 1)[1])))
        except ValueError: pass
def delta(inst, k, t0, t1):
    pts = [p for p in series.get((inst, k), []) if t0 - 0.6 <= p[0] <= t1 + 2.5]
    return sum((b - a) if b >= a else b for (_, a), (_, b) in zip(pts, pts[1:]))
spans_ph = {}
for e in events:
    if e.get("edge") == "start": spans_ph.setdefault(e["phase"], [e["t"], None])
    if e.get("edge") == "end" and e["phase"] in spans_ph: spans_ph[e["phase"]][1] = e["t"]
keys = sorted({k for (_, k) in series})
metrics_by_phase = {ph: {i: {k: round(delta(i, k, t0, t1)) for k in keys if delta(i, k, t0, t1)} for i in NAMES} for ph, (t0, t1) in spans_ph.items() if t1}
kv_final = {"folders": len(folders), "bytes": sum(f["bytes"] for f in folders.values())}
summary = {"counts": counts, "routing_prefill_to_decode": routing, "kill_t": kill_t, "restart_started_t": started_t, "up_t": up_t, "readd_t": readd_t,
           "silent_miss_resp_ids": [r["resp_id"] for r in out if r["outcome"] == "silent_miss"],
           "errors": [{"id": r["id"], "error_at": r["error_at"], "how": r["how"]} for r in out if r["outcome"] == "error"],
           "kv_dir_final": kv_final, "metrics_by_phase": metrics_by_phase}
json.dump(summary, open(os.path.join(D, "truth-summary.json"), "w"), indent=1)
# ---- pdtop's live answer beside it
P = json.load(open(os.path.join(D, "pdtop-check.json")))
T = {t["id"]: t for t in P["traces"]}
KR = {k["id"]: k for k in P["kv"]["requests"]}
rows = []; used = set()
for r in out:
    key = r["id"] if r["flow"] == "direct" else r.get("resp_id")
    t = T.get(key)
    if t is None and r["outcome"] == "error":  # anonymous proxy errors: the one nearest in time
        errs = [x for x in P["traces"] if x["id"].startswith("proxy-error") and x["id"] not in used]
        t = errs[0] if len(errs) == 1 else None
    if t: used.add(t["id"])
    tm = (t or {}).get("timings") or {}
    k = KR.get(t["id"]) if t else None
    pd_pre = {"vllm-prefill": "prefill", "vllm-prefill2": "prefill2"}.get(tm.get("prefill_service"))
    row = {"id": r["id"], "phase": r["phase"], "resp_id": r.get("resp_id"), "truth": r["outcome"], "truth_error_at": r["error_at"],
           "pdtop_id": t and t["id"], "pdtop": t and t["outcome"], "pdtop_sure": t and t["sure"], "pdtop_error_at": t and t["error_at"],
           "outcome_right": bool(t) and t["outcome"] == r["outcome"],
           "decode_truth": r["decode_instance"], "decode_pdtop": t and t["decode"] and BY_PORT.get(t["decode"]),
           "prefill_truth": r["prefill_instance"], "prefill_req_truth": r["prefill_request_id"],
           "prefill_pdtop": pd_pre, "prefill_req_pdtop": tm.get("prefill_request_id"),
           "prefill_pairing_right": (tm.get("prefill_request_id") == r["prefill_request_id"]) if (r["prefill_request_id"] or tm.get("prefill_request_id")) else None,
           "pdtop_prompt_tokens": tm.get("prompt_tokens"), "truth_prompt_tokens": r["prompt_tokens_expected"],
           "folder_truth": r["store_folder"], "folder_pdtop": k and k.get("folder"),
           "folder_right": (k.get("folder") == r["store_folder"]) if k and k.get("folder") else None,
           "kv_observed_pdtop": k and k.get("observed"), "kv_verdict_pdtop": k and k.get("verdict"), "folder_bytes_truth": r["folder_bytes"],
           "evidence": t and t["evidence"][:240]}
    rows.append(row)
extra = [t["id"] for t in P["traces"] if t["id"] not in used]
with open(os.path.join(D, "pdtop-vs-truth.jsonl"), "w") as f:
    for row in rows: f.write(json.dumps(row) + "\n")
truth_unread = sorted({r["store_folder"] for r in out if r["outcome"] in ("silent_miss", "no_prefill")})
pd_unread = sorted(P["kv"]["folders"]["unread"])
res = {"outcome_right": sum(x["outcome_right"] for x in rows), "n": len(rows),
       "outcome_wrong": [(x["id"], x["truth"], x["pdtop"]) for x in rows if not x["outcome_right"]],
       "decode_wrong": [(x["id"], x["decode_truth"], x["decode_pdtop"]) for x in rows if x["pdtop"] and x["decode_truth"] != x["decode_pdtop"]],
       "prefill_pairing_wrong": [(x["id"], x["resp_id"], x["prefill_req_truth"], x["prefill_truth"], x["prefill_req_pdtop"], x["prefill_pdtop"], x["truth_prompt_tokens"], x["pdtop_prompt_tokens"]) for x in rows if x["prefill_pairing_right"] is False],
       "prefill_instance_wrong": [(x["id"], x["prefill_truth"], x["prefill_pdtop"]) for x in rows if (x["prefill_truth"] or x["prefill_pdtop"]) and x["prefill_truth"] != x["prefill_pdtop"]],
       "folder_wrong": [(x["id"], x["folder_truth"][:8], (x["folder_pdtop"] or "")[:8]) for x in rows if x["folder_right"] is False],
       "folder_missing": [(x["id"], x["truth"]) for x in rows if x["folder_right"] is None and x["pdtop"]],
       "kv_verdicts": dict(collections.Counter(f"{x['truth']}:{x['kv_verdict_pdtop']}" for x in rows)),
       "traces_without_request": extra,
       "silent_miss_ids_pdtop": P["silent_miss_ids"], "silent_miss_ids_truth": summary["silent_miss_resp_ids"],
       "unread_truth": len(truth_unread), "unread_pdtop": len(pd_unread),
       "unread_pdtop_not_truth": [u[:8] for u in pd_unread if u not in truth_unread], "unread_truth_not_pdtop": [u[:8] for u in truth_unread if u not in pd_unread],
       "moved_nothing_pdtop": P["kv"]["window"]["moved_nothing"]}
summary["pdtop_vs_truth"] = res
json.dump(summary, open(os.path.join(D, "truth-summary.json"), "w"), indent=1)
print(json.dumps(counts, indent=None)); print(json.dumps(routing))
print(json.dumps(res, indent=1))
for r in out:
    print(r["phase"], r["id"], r["kind"], r.get("status"), r["prompt_tokens_expected"], r["cached_tokens"], r.get("resp_id"), r["prefill_instance"], r["decode_instance"], r["outcome"], "|", r["how"][:100])
