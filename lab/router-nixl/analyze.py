# Per-request truth of a router-NIXL capture (what drive.sh packed), and
# pdtop's answer beside it. Usage: analyze.py CAP_DIR OUT_DIR [PDTOP_BIN]
#   writes OUT_DIR/requests.jsonl (one row per request the clients sent, plus
#   the router's own /tokenize call), OUT_DIR/truth-summary.json, and, from
#   CAP_DIR/pdtop-check.json (live check) and a replay of CAP_DIR/pdtop.pdrec
#   (when PDTOP_BIN is given), OUT_DIR/pdtop-vs-truth.json.
# Sources of truth, per request:
#   - the clients: driver probes (requests.jsonl of the capture: status,
#     usage, text) and `vllm bench serve --save-detailed` (bench.json: errors,
#     ttfts, input/output lengths, start_times on time.perf_counter(), placed
#     on the unix clock with clock.json);
#   - vLLM's logs: "Received request <id>: params: ... max_tokens=N ...
#     extra_args={'kv_transfer_params': ...}" (which instance saw which id,
#     whether decode got the prefill's params), "NIXL transfer failure: <type>
#     | Context: {... 'request_id': ...}", "Failing N request(s) due to KV load
#     failure ... Request IDs: {...}" (policy fail), "Recovered from KV load
#     failure: N request(s) rescheduled" (policy recompute, no ids: the ids are
#     those of the NIXL failure lines of that decode);
#   - vLLM's spans (otlp.bin): per vLLM id its arrival time, prompt and
#     completion tokens;
#   - vllm-router's log: one "Transparent proxy request failed: prefill=...,
#     decode=..., error=..." line per request it failed (no request id).
# vllm-router 0.1.17 does NOT forward the client's X-Request-Id: it sends its
# own id `___prefill_addr_<P>___decode_addr_<D>_<32 hex>` to both instances
# (vLLM logs cmpl-<that>-0), and echoes the client's X-Request-Id in its
# response header. A bench request is tied to its router id by arrival time
# (bench start vs. the prefill span's start) and prompt length; how each tie
# was made is in `router_id_how`.
import datetime, json, lzma, os, re, subprocess, sys, collections
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "2p1d"))  # otlp_read
import otlp_read
CAP, OUT = sys.argv[1], sys.argv[2]; PD = sys.argv[3] if len(sys.argv) > 3 else None
os.makedirs(OUT, exist_ok=True)
P = lambda *a: os.path.join(CAP, *a)
events = [json.loads(l) for l in open(P("events.jsonl"))]
clock = json.load(open(P("clock.json"))); OFF = clock["unix"] - clock["perf_counter"]
YEAR = datetime.datetime.utcfromtimestamp(events[0]["t"]).year
def ev(phase, edge):
    for e in events:
        if e.get("phase") == phase and e.get("edge") == edge: return e
T_KILL = ev("prefill_fault", "kill")["t"]; T_RESTART = (ev("prefill_fault", "restart") or {}).get("t")
T_HEALTHY = (ev("prefill_fault", "healthy") or {}).get("t")
DECODES = [d for d in ("decode", "decode2") if os.path.exists(P(f"vllm-{d}.log"))]
POLICY = {"decode": "fail", "decode2": "recompute"}
PORT = {"prefill": "8100", "decode": "8200", "decode2": "8201"}
INST_OF_PORT = {v: k for k, v in PORT.items()}
def vtime(s):  # "12-06 06:33:42" (vLLM, UTC on the lab machine)
    return datetime.datetime.strptime(f"{YEAR}-{s}", "%Y-%m-%d %H:%M:%S").replace(tzinfo=datetime.timezone.utc).timestamp()
ANSI = re.compile(r"\x1b\[[0-9;]*m")
def base_id(vid):  # cmpl-X-0-1a2b3c4d / cmpl-X-0 -> X
    vid, n = re.subn(r"-0-[0-9a-f]{8}$", "", vid)
    if not n: vid = re.sub(r"-0$", "", vid)
    return re.sub(r"^(cmpl|chatcmpl|tokenize)-", "", vid)
# ---- vLLM logs
seen = collections.defaultdict(dict)      # base id -> instance -> facts
nixl_fail = collections.defaultdict(list)  # base id -> [(instance, type, t)]
failing = {}                               # base id -> (instance, t)   policy fail
recovered_lines = collections.defaultdict(list); failing_lines = collections.defaultdict(list)
skipping = collections.defaultdict(set)
R_RECV = re.compile(r"(\d\d-\d\d \d\d:\d\d:\d\d) \[request_logger\.py:\d+\] Received request (\S+): params: (.*)")
R_NIXL = re.compile(r"(\d\d-\d\d \d\d:\d\d:\d\d) \[\w+\.py:\d+\] NIXL transfer failure: ([a-z_]+).*?'request_id': '([^']+)'")
R_FAIL = re.compile(r"(\d\d-\d\d \d\d:\d\d:\d\d) \[scheduler\.py:\d+\] Failing (\d+) request\(s\) due to KV load failure \(([^)]*)\)\. Request IDs: \{(.*)\}")
R_RECO = re.compile(r"(\d\d-\d\d \d\d:\d\d:\d\d) \[scheduler\.py:\d+\] Recovered from KV load failure: (\d+) request\(s\) rescheduled \(([^)]*)\)")
R_EXPIRE = re.compile(r"(\d\d-\d\d \d\d:\d\d:\d\d) \[base_worker\.py:\d+\] Releasing expired KV blocks for request (\S+) which were retrieved by (\d+) remote worker")
R_INVALID = re.compile(r"(\d\d-\d\d \d\d:\d\d:\d\d) \[\w+\.py:\d+\] Potentially invalid KV blocks for unrecognized request (\S+) were retrieved by a decode worker")
expired = {}; invalid_read = {}
R_SKIP = re.compile(r"Skipping KV post-processing for failed request (\S+)")
for inst in ["prefill"] + DECODES:
    for line in open(P(f"vllm-{inst}.log"), errors="replace"):
        m = R_RECV.search(line)
        if m:
            b = base_id(m.group(2)); d = seen[b].setdefault(inst, {"t_log": vtime(m.group(1)), "vllm_id": m.group(2)})
            mt = re.search(r"max_tokens=(\d+)", m.group(3)); d["max_tokens"] = int(mt.group(1)) if mt else None
            kv = m.group(3)
            d["kv_params"] = ("do_remote_prefill': True" in kv) and "remote_block_ids': [[" in kv
            d["kv_params_do_remote_decode"] = "do_remote_decode': True" in kv
            rn = re.search(r"'remote_num_tokens': (\d+)", kv); d["remote_num_tokens"] = int(rn.group(1)) if rn else None
            re_ = re.search(r"'remote_engine_id': '([^']+)'", kv); d["remote_engine_id"] = re_.group(1) if re_ else None
            continue
        m = R_NIXL.search(line)
        if m: nixl_fail[base_id(m.group(3))].append({"instance": inst, "type": m.group(2), "t_log": vtime(m.group(1))}); continue
        m = R_FAIL.search(line)
        if m:
            ids = re.findall(r"'([^']+)'", m.group(4)); failing_lines[inst].append({"t_log": vtime(m.group(1)), "n": int(m.group(2)), "detail": m.group(3), "ids": len(ids)})
            for i in ids: failing[base_id(i)] = {"instance": inst, "t_log": vtime(m.group(1))}
            continue
        m = R_RECO.search(line)
        if m: recovered_lines[inst].append({"t_log": vtime(m.group(1)), "n": int(m.group(2)), "detail": m.group(3)}); continue
        m = R_SKIP.search(line)
        if m: skipping[inst].add(base_id(m.group(1))); continue
        m = R_EXPIRE.search(line)
        if m: expired[base_id(m.group(2))] = {"instance": inst, "t_log": vtime(m.group(1)), "retrieved_by": int(m.group(3))}; continue
        m = R_INVALID.search(line)
        if m: invalid_read[base_id(m.group(2))] = {"instance": inst, "t_log": vtime(m.group(1))}
# ---- spans
spans = {}
for s in otlp_read.spans(P("otlp.bin")):
    if s.get("name") != "llm_request": continue
    a = s["attrs"]; inst = (s.get("service") or "").replace("vllm-", "")
    spans.setdefault(base_id(a.get("gen_ai.request.id", "")), {})[inst] = {
        "start": s.get("start"), "end": s.get("end"), "prompt_tokens": a.get("gen_ai.usage.prompt_tokens"),
        "completion_tokens": a.get("gen_ai.usage.completion_tokens"), "ttft_s": a.get("gen_ai.latency.time_to_first_token"),
        "max_tokens": a.get("gen_ai.request.max_tokens")}
# ---- router log
router_fail = []
for n, line in enumerate(open(P("proxy.log"), errors="replace"), 1):
    if "Transparent proxy request failed" in line:
        c = ANSI.sub("", line); m = re.match(r"(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)", c)
        t = datetime.datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S").replace(tzinfo=datetime.timezone.utc).timestamp() if m else None
        pm = re.search(r"prefill=(\S+), decode=(\S+), error=(.*)$", c.strip())
        router_fail.append({"line": n, "t_log": t, "prefill": pm and pm.group(1), "decode": pm and pm.group(2), "error": pm and pm.group(3)[:300]})
def metric(path, name):
    out = {}
    for l in open(path):
        if l.startswith(name): k, v = l.rsplit(" ", 1); out[k] = float(v)
    return out
def decode_of(rid):
    m = re.search(r"decode_addr_[\d.]+:(\d+)_", rid or ""); return INST_OF_PORT.get(m.group(1)) if m else None
def vllm_facts(b):
    """What the instances say about one vLLM base id: outcome and evidence."""
    s = seen.get(b, {}); sp = spans.get(b, {}); dec = [d for d in DECODES if d in s]
    f = {"prefill_logged": "prefill" in s, "decode_logged": dec[0] if dec else None,
         "kv_transfer_params_passed": bool(dec and s[dec[0]].get("kv_params")),
         "remote_num_tokens": s[dec[0]].get("remote_num_tokens") if dec else None,
         "prompt_tokens": next((x["prompt_tokens"] for x in sp.values() if x.get("prompt_tokens")), None),
         "decode_completion_tokens": sp[dec[0]]["completion_tokens"] if dec and dec[0] in sp else None,
         "decode_max_tokens": s[dec[0]].get("max_tokens") if dec else None,
         "nixl_failures": nixl_fail.get(b, []), "failing_line": failing.get(b),
         "prefill_lease_expired": expired.get(b), "prefill_invalid_read": invalid_read.get(b)}
    if not dec: f["outcome"] = None; return f
    d = dec[0]
    if b in failing: f["outcome"] = "failed"; f["how"] = f"{d} logged it in 'Failing N request(s) due to KV load failure' (policy fail): answered 200 with no token"
    elif any(x["instance"] == d for x in f["nixl_failures"]):
        f["outcome"] = "recomputed" if POLICY.get(d) == "recompute" else "failed"
        f["how"] = f"NIXL transfer failure ({', '.join(x['type'] for x in f['nixl_failures'])}) on {d} (policy {POLICY.get(d)}); 'Recovered from KV load failure' lines carry no ids"
    elif f["kv_transfer_params_passed"] and b in invalid_read:
        f["outcome"] = "loaded_stale_kv"
        f["how"] = (f"{d} got kv_transfer_params and logged no failure, but the prefill had released the blocks first ('Releasing expired KV blocks ... "
                    f"retrieved by {(expired.get(b) or {}).get('retrieved_by')} remote worker(s) before lease expired') and then logged 'Potentially invalid KV blocks "
                    "for unrecognized request ... were retrieved by a decode worker': decode read blocks the prefill no longer held (their content may be another "
                    "request's); answered 200 in full")
    elif f["kv_transfer_params_passed"]: f["outcome"] = "loaded"; f["how"] = f"{d} got kv_transfer_params with remote_block_ids and logged no NIXL failure for it"
    else: f["outcome"] = "silent_miss"; f["how"] = f"{d} got no kv_transfer_params: computed the prompt itself"
    return f
rows = []
# ---- driver probes
for l in open(P("requests.jsonl")):
    r = json.loads(l); u = r.get("usage") or {}
    row = {"id": r["id"], "source": "driver", "phase": "probe_" + r["phase"], "flow": r["flow"], "x_request_id_sent": r["id"],
           "t_start": r["t_start"], "t_end": r.get("t_end"), "status": r.get("status"), "prefill_status": r.get("prefill_status"),
           "error": r.get("error") or r.get("prefill_error") or r.get("exception"), "ttft_ms": r.get("ttft_ms"),
           "prompt_tokens": u.get("prompt_tokens"), "completion_tokens": u.get("completion_tokens"),
           "cached_tokens_client": (u.get("prompt_tokens_details") or {}).get("cached_tokens"), "finish_reason": r.get("finish_reason"),
           "chunks_with_text": r.get("chunks_with_text")}
    if r["flow"] == "router":
        rid = (r.get("resp_id") or "").replace("cmpl-", "") or None
        row.update({"router_id": rid, "router_id_how": "the streamed response's id (cmpl-<router id>)" if rid else None, "decode_instance": decode_of(rid),
                    "x_request_id_echoed": (r.get("resp_headers") or {}).get("x-request-id")})
        b = rid
    else:
        row.update({"router_id": None, "decode_instance": r.get("decode_instance")}); b = r["id"]
    f = vllm_facts(b) if b else {"outcome": None}
    row["vllm_base_id"] = b if b and b in seen else None
    if row["status"] and row["status"] >= 400 or (r.get("prefill_status") not in (None, 200)):
        row["outcome"] = "error"; row["error_at"] = "prefill (via router)" if r["flow"] == "router" else "prefill"
        if r["flow"] == "router" and row["status"] == 503: row["error_at"] = "router (no available workers: it had marked the prefill unhealthy; nothing logged)"
        row["how"] = "the client got HTTP %s: %s" % (row["status"], (row["error"] or "")[:160])
        if r["flow"] == "router":
            c = [x for x in router_fail if x["t_log"] and abs(x["t_log"] - r["t_start"]) <= 2.0]
            row["router_error_line_candidates"] = [x["line"] for x in c]
    else:
        row["outcome"] = f.get("outcome"); row["how"] = f.get("how"); row["error_at"] = None
        if row["outcome"] == "failed": row["error_at"] = "decode KV load (policy fail)"
    row["evidence"] = {k: f.get(k) for k in ("prefill_logged", "decode_logged", "kv_transfer_params_passed", "remote_num_tokens", "nixl_failures", "failing_line", "prefill_lease_expired", "prefill_invalid_read")}
    if r["flow"] == "router" and row["cached_tokens_client"] == 0 and row["outcome"] == "loaded":
        row["note"] = "the router's usage says cached_tokens 0 although decode loaded the KV (vllm-router 0.1.17 re-serialises usage: created_cache_tokens/multimodal_tokens keys appear, cached_tokens is 0)"
    if r["flow"] == "direct_two_step" and row["outcome"] == "loaded" and row["cached_tokens_client"] != row["prompt_tokens"]:
        row["note"] = "client cached_tokens differs from prompt_tokens"
    rows.append(row)
# ---- the bench
bench = json.load(open(P("bench.json")))
used = set(r["router_id"] for r in rows if r.get("router_id"))
cands = [b for b, s in seen.items() if b.startswith("___prefill_addr_") and b not in used and not b.startswith("tokenize")]
def arrival(b):
    sp = spans.get(b, {}); ts = [x["start"] for x in sp.values() if x.get("start")]
    if ts: return min(ts), "span"
    return min(x["t_log"] for x in seen[b].values()) + 0.5, "log(+-0.5s)"
info = {}
for b in cands:
    t, src = arrival(b); f = vllm_facts(b); info[b] = (t, src, f)
brows = []
for i in range(len(bench["errors"])):
    err = bench["errors"][i] or None
    brows.append({"id": f"bench-{i}", "source": "bench", "phase": "bench", "flow": "router", "x_request_id_sent": f"bench-{i}",
                  "t_start": bench["start_times"][i] + OFF, "status_client": "ok" if not err else "failed", "error": err,
                  "ttft_ms": bench["ttfts"][i] * 1e3 if bench["ttfts"][i] else None, "prompt_tokens": bench["input_lens"][i],
                  "completion_tokens": bench["output_lens"][i], "router_id": None})
# tie bench requests that reached vLLM to router ids: nearest arrival with the same prompt length
pairs = []
for r in brows:
    if r["error"] == "Internal Server Error": continue
    for b, (t, src, f) in info.items():
        dt = t - r["t_start"]
        if -0.5 <= dt <= 5.0 and f.get("prompt_tokens") in (None, r["prompt_tokens"]):
            if r["completion_tokens"] and f.get("decode_max_tokens") not in (None, r["completion_tokens"]): continue
            pairs.append((abs(dt) + (0 if f.get("prompt_tokens") == r["prompt_tokens"] else 3), r["id"], b, src))
pairs.sort(); taken_r, taken_b = {}, set()
for cost, rid, b, src in pairs:
    if rid in taken_r or b in taken_b: continue
    taken_r[rid] = (b, src, cost); taken_b.add(b)
# the router's failures, in order, to the bench's 500s in order
fails_500 = [r for r in brows if r["error"] == "Internal Server Error"]
probe_500 = [r for r in rows if r["flow"] == "router" and r.get("outcome") == "error" and r.get("status") == 500]
all_500 = sorted(fails_500 + probe_500, key=lambda r: r["t_start"])
order_ok = len(all_500) == len(router_fail)
for k, r in enumerate(all_500):
    if order_ok:
        x = router_fail[k]; r["router_error_line"] = x["line"]; r["router_error_line_how"] = "k-th 500 (client start order) = k-th 'Transparent proxy request failed' line; times within %.1f s" % abs(x["t_log"] - r["t_start"])
        r["router_error_decode"] = decode_of("decode_addr_" + x["decode"].split("//")[1] + "_") if x["decode"] else None
for r in brows:
    if r["error"] == "Internal Server Error":
        r.update({"outcome": "error", "error_at": "prefill (router: connection refused)", "how": "bench got HTTP 500; the router logged 'Transparent proxy request failed' (prefill unreachable); no vLLM instance saw it",
                  "vllm_base_id": None})
        continue
    t = taken_r.get(r["id"])
    if not t:
        r.update({"outcome": "unknown", "how": "reached vLLM (not a router 500) but no router id could be tied to it"}); continue
    b, src, cost = t; f = info[b][2]
    r.update({"router_id": b, "router_id_how": f"arrival ({src}) {info[b][0] - r['t_start']:+.3f} s after the bench start, prompt {f.get('prompt_tokens')} tokens" +
              (f", max_tokens {f.get('decode_max_tokens')}" if f.get("decode_max_tokens") else ""),
              "vllm_base_id": b, "decode_instance": decode_of(b), "outcome": f.get("outcome"), "how": f.get("how"),
              "error_at": "decode KV load (policy fail)" if f.get("outcome") == "failed" else None,
              "evidence": {k: f.get(k) for k in ("prefill_logged", "decode_logged", "kv_transfer_params_passed", "remote_num_tokens", "nixl_failures", "failing_line", "prefill_lease_expired", "prefill_invalid_read")}})
    if r["error"] and f.get("outcome") != "failed": r["note"] = "client failed but vLLM facts say " + str(f.get("outcome"))
rows += brows
# ---- vLLM requests no client row claims (the router's /tokenize call, anything unmatched)
claimed = set(r.get("vllm_base_id") for r in rows if r.get("vllm_base_id"))
for b, s in seen.items():
    if b in claimed: continue
    f = vllm_facts(b); first = min(x["t_log"] for x in s.values())
    rows.append({"id": b, "source": "vllm_only", "phase": "router_tokenize" if "tokenize-" in "".join(x["vllm_id"] for x in s.values()) else "unclaimed",
                 "flow": "router", "t_start": first, "router_id": b if b.startswith("___") else None, "vllm_base_id": b,
                 "instances": sorted(s), "decode_instance": decode_of(b),
                 "outcome": "not_generation" if "tokenize-" in "".join(x["vllm_id"] for x in s.values()) else f.get("outcome"),
                 "how": "POST /tokenize the router sent to the prefill and one decode when the bench started (no KV involved)" if "tokenize-" in "".join(x["vllm_id"] for x in s.values()) else f.get("how")})
for r in rows:
    r["t_rel_kill_s"] = round(r["t_start"] - T_KILL, 3)
rows.sort(key=lambda r: r["t_start"])
with open(os.path.join(OUT, "requests.jsonl"), "w") as fo:
    for r in rows: fo.write(json.dumps(r) + "\n")
# ---- summary
cnt = collections.Counter((r["phase"], r.get("outcome")) for r in rows)
by_phase = collections.defaultdict(dict)
for (ph, oc), n in sorted(cnt.items(), key=lambda x: (x[0][0], str(x[0][1]))): by_phase[ph][str(oc)] = n
rm = P("router-metrics-end.txt")
bench_rows = [r for r in rows if r["source"] == "bench"]
win = lambda a, b: [r for r in bench_rows if a <= r["t_start"] < b]
summary = {
  "times": {"kill": T_KILL, "restart": T_RESTART, "healthy": T_HEALTHY, "down_s": T_RESTART and round(T_RESTART - T_KILL, 1),
            "unreachable_s": T_HEALTHY and round(T_HEALTHY - T_KILL, 1)},
  "outcomes_by_phase": by_phase,
  "outcomes_all": dict(collections.Counter(str(r.get("outcome")) for r in rows)),
  "bench": {"sent": len(bench_rows), "ok": bench["completed"], "failed": bench["failed"],
            "errors": dict(collections.Counter(r["error"] for r in bench_rows if r["error"])),
            "tied_to_router_id": sum(1 for r in bench_rows if r.get("router_id")),
            "ttft_ms_median_ok": sorted(r["ttft_ms"] for r in bench_rows if r["ttft_ms"])[len([r for r in bench_rows if r["ttft_ms"]]) // 2] if any(r["ttft_ms"] for r in bench_rows) else None,
            "by_window": {w: dict(collections.Counter(str(r.get("outcome")) for r in win(a, b))) for w, (a, b) in {
                "before_kill": (0, T_KILL), "prefill_down": (T_KILL, T_HEALTHY or 1e12), "after_healthy": (T_HEALTHY or 1e12, 1e12)}.items()}},
  "router": {"prefill_errors_total": metric(rm, "vllm_router_pd_prefill_errors_total"), "decode_errors_total": metric(rm, "vllm_router_pd_decode_errors_total"),
             "pd_errors_total": metric(rm, "vllm_router_pd_errors_total"), "pd_requests_total": metric(rm, "vllm_router_pd_requests_total"),
             "transparent_proxy_failed_lines": len(router_fail),
             "failed_lines_by_decode": dict(collections.Counter(x["decode"] for x in router_fail)),
             "failed_line_errors": dict(collections.Counter(re.sub(r"\d+", "N", x["error"] or "")[:200] for x in router_fail)),
             "x_request_id_forwarded": False, "ids_sent_to_vllm": "___prefill_addr_<P>___decode_addr_<D>_<32 hex>",
             "usage_cached_tokens_trustworthy": False},
  "vllm_logs": {d: {"nixl_transfer_failure_lines": sum(1 for v in nixl_fail.values() for x in v if x["instance"] == d),
                     "nixl_failure_types": dict(collections.Counter(x["type"] for v in nixl_fail.values() for x in v if x["instance"] == d)),
                     "failing_lines": failing_lines.get(d, []), "recovered_lines": recovered_lines.get(d, []),
                     "skipping_post_processing_lines": len(skipping.get(d, ())), "policy": POLICY.get(d)} for d in DECODES},
  "prefill_log": {"releasing_expired_kv_blocks_lines": len(expired), "potentially_invalid_kv_blocks_retrieved_lines": len(invalid_read),
                  "expired_retrieved_by": dict(collections.Counter(x["retrieved_by"] for x in expired.values())),
                  "invalid_reads_without_expiry_line": sorted(set(invalid_read) - set(expired))},
}
json.dump(summary, open(os.path.join(OUT, "truth-summary.json"), "w"), indent=1)
# ---- pdtop beside the truth
def pdtop_view(report, label):
    tr = {}
    for t in report.get("traces", []):
        keys = {t.get("id")} | {base_id(v.get("id", "")) for v in t.get("vllm_ids", [])}
        for k in keys:
            if k: tr[k] = t
    cmp_rows = []; agree = collections.Counter()
    for r in rows:
        t = tr.get(r.get("vllm_base_id")) or tr.get(r["id"])
        po = t.get("outcome") if t else None
        cmp_rows.append({"id": r["id"], "router_id": r.get("router_id"), "truth": r.get("outcome"), "pdtop": po, "pdtop_id": t.get("id") if t else None,
                         "pdtop_error_at": t.get("error_at") if t else None, "pdtop_evidence": (t.get("evidence") or "")[:300] if t else None})
        agree[(str(r.get("outcome")), str(po))] += 1
    return {"label": label, "verdict": report.get("verdict"), "requests": report.get("requests"), "requests_metrics": report.get("requests_metrics"),
            "silent_miss_ids": report.get("silent_miss_ids"), "router": report.get("router"), "disagreement": report.get("disagreement"),
            "truth_vs_pdtop": {f"{a} -> {b}": n for (a, b), n in sorted(agree.items())}, "rows": cmp_rows}
views = {}
try: views["check_live"] = pdtop_view(json.load(open(P("pdtop-check.json"))), "pdtop check --json, started %s" % open(P("pdtop-check.cmd")).read().split("#")[-1].strip())
except Exception as e: views["check_live"] = {"error": repr(e)}
if PD and os.path.exists(P("pdtop.pdrec")):
    try:
        o = subprocess.run([PD, "check", "--replay", P("pdtop.pdrec"), "--json"], capture_output=True, text=True, timeout=300)
        views["record_replay"] = pdtop_view(json.loads(o.stdout), "pdtop check --replay pdtop.pdrec --json (rc %d)" % o.returncode)
    except Exception as e: views["record_replay"] = {"error": repr(e)}
json.dump(views, open(os.path.join(OUT, "pdtop-vs-truth.json"), "w"), indent=1)
print(json.dumps({k: v for k, v in summary.items() if k != "vllm_logs"}, indent=1)[:6000])
for k, v in views.items(): print(k, v.get("verdict"), v.get("requests"), v.get("truth_vs_pdtop"))
