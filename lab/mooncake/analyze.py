# Per-request truth of a Mooncake capture (what drive.sh packed), and pdtop's
# answer beside it. Usage: analyze.py CAP_DIR OUT_DIR [PDTOP_BIN]
#   writes OUT_DIR/requests.jsonl (one row per request the clients sent, plus
#   the router's own /tokenize call), OUT_DIR/truth-summary.json, and, from
#   CAP_DIR/pdtop-check.json (live check) and a replay of CAP_DIR/pdtop.pdrec
#   (when PDTOP_BIN is given), OUT_DIR/pdtop-vs-truth.json.
# Sources of truth, per request:
#   - the clients: driver probes (requests.jsonl of the capture) and
#     `vllm bench serve --save-detailed` (bench.json, start times placed on
#     the unix clock with clock.json);
#   - vLLM's logs (the Mooncake connector's logger at DEBUG): "Received request
#     <id>: ... extra_args={'kv_transfer_params': {...}}" (which instance saw
#     which id, the transfer_id / remote_engine_id the decode was given);
#     decode: "pulling kv_caches for ['<id>'] finished" (DEBUG: the KV arrived),
#     "MooncakeXferMetadata transfer failed for {'<id>', ...}: <error>" (ERROR:
#     the decode's zmq request to the prefill's side channel got no answer
#     within VLLM_MOONCAKE_ABORT_REQUEST_TIMEOUT + 60 s), "Error happens during
#     transferring kvcache for {...}", "pulling kv_caches for [...] failed",
#     "Failed to find remote engine_id"; "MooncakeConnector request_finished,
#     req_id=<id>, request_status=<status>" (DEBUG); prefill: "Sending kv_caches
#     for request <decode's id> (N blocks) to <host:port>" (DEBUG), "Request
#     <id> timed out after N seconds without being sent. Freeing its blocks on
#     the producer side." (WARNING), "Creating v1 connector with name:
#     MooncakeConnector and engine_id: <uuid>" (which engine was alive when);
#   - vLLM's spans (otlp.bin): arrival time, prompt and completion tokens;
#   - vllm-router's log: "Transparent proxy request failed: prefill=...,
#     decode=..., error=..." per request it failed (no id), and its Mooncake
#     bootstrap lines ("Got Mooncake engine_ids for ...").
# vllm-router 0.1.17 sends its own id `___prefill_addr_<P>___decode_addr_<D>_<32 hex>`
# to both instances (vLLM logs cmpl-<that>-0-<8 hex>); a bench request is tied
# to its router id by arrival time and prompt length (`router_id_how`).
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
DECODES = ["decode"]
PORT = {"prefill": "8100", "decode": "8200"}
INST_OF_PORT = {v: k for k, v in PORT.items()}
def vtime(s):  # "12-06 06:33:42" (vLLM, UTC on the lab machine)
    return datetime.datetime.strptime(f"{YEAR}-{s}", "%Y-%m-%d %H:%M:%S").replace(tzinfo=datetime.timezone.utc).timestamp()
ANSI = re.compile(r"\x1b\[[0-9;]*m")
def base_id(vid):  # cmpl-X-0-1a2b3c4d / cmpl-X-0 -> X
    vid, n = re.subn(r"-0-[0-9a-f]{8}$", "", vid)
    if not n: vid = re.sub(r"-0$", "", vid)
    return re.sub(r"^(cmpl|chatcmpl|tokenize)-", "", vid)
# ---- vLLM logs
seen = collections.defaultdict(dict)        # base id -> instance -> facts
pull_ok = {}                                # base id -> t        decode: pulling kv_caches for [...] finished
xfer_fail = {}                              # base id -> {t, error, kind}
p_send = {}                                 # base id -> {t, blocks, to}   prefill: Sending kv_caches for request <decode id>
p_timeout = {}                              # base id -> {t, seconds}      prefill: timed out ... without being sent
finished = collections.defaultdict(dict)    # base id -> instance -> request_status
engines = []                                # (t, engine_id) of the prefill's starts
no_engine_lines = []
R_RECV = re.compile(r"(\d\d-\d\d \d\d:\d\d:\d\d) \[request_logger\.py:\d+\] Received request (\S+): params: (.*)")
R_PULL_OK = re.compile(r"(\d\d-\d\d \d\d:\d\d:\d\d) \[mooncake_connector\.py:\d+\] pulling kv_caches for \[(.*)\] finished")
R_PULL_FAIL = re.compile(r"(\d\d-\d\d \d\d:\d\d:\d\d) \[mooncake_connector\.py:\d+\] pulling kv_caches for \[(.*)\] failed: (.*)")
R_XFER_FAIL = re.compile(r"(\d\d-\d\d \d\d:\d\d:\d\d) \[mooncake_connector\.py:\d+\] MooncakeXferMetadata transfer failed for \{(.*)\}: (.*)")
R_ERR_XFER = re.compile(r"(\d\d-\d\d \d\d:\d\d:\d\d) \[mooncake_connector\.py:\d+\] Error happens during transferring kvcache for \{(.*)\}: (.*)")
R_NO_ENGINE = re.compile(r"(\d\d-\d\d \d\d:\d\d:\d\d) \[mooncake_connector\.py:\d+\] Failed to find remote engine_id (\S+) from bootstrap server (\S+)")
R_SEND = re.compile(r"(\d\d-\d\d \d\d:\d\d:\d\d) \[mooncake_connector\.py:\d+\] Sending kv_caches for request (\S+) \((\d+) blocks\) to (\S+)")
R_PTIMEOUT = re.compile(r"(\d\d-\d\d \d\d:\d\d:\d\d) \[mooncake_connector\.py:\d+\] Request (\S+) timed out after (\d+) seconds without being sent")
R_FIN = re.compile(r"\[mooncake_connector\.py:\d+\] MooncakeConnector request_finished, req_id=(\S+), request_status=(\w+)")
R_ENGINE = re.compile(r"(\d\d-\d\d \d\d:\d\d:\d\d) \[factory\.py:\d+\] Creating v1 connector with name: MooncakeConnector and engine_id: (\S+)")
ids_in = lambda x: re.findall(r"'([^']+)'", x)
for inst in ["prefill"] + DECODES:
    for line in open(P(f"vllm-{inst}.log"), errors="replace"):
        m = R_RECV.search(line)
        if m:
            b = base_id(m.group(2)); d = seen[b].setdefault(inst, {"t_log": vtime(m.group(1)), "vllm_id": m.group(2)})
            mt = re.search(r"max_tokens=(\d+)", m.group(3)); d["max_tokens"] = int(mt.group(1)) if mt else None
            kv = m.group(3)
            d["kv_params"] = ("do_remote_prefill': True" in kv) and "'transfer_id': '" in kv and "'remote_engine_id': '" in kv
            d["kv_params_do_remote_decode"] = "do_remote_decode': True" in kv
            x = re.search(r"'transfer_id': '([^']+)'", kv); d["transfer_id"] = x.group(1) if x else None
            x = re.search(r"'remote_engine_id': '([^']+)'", kv); d["remote_engine_id"] = x.group(1) if x else None
            continue
        m = R_PULL_OK.search(line)
        if m:
            for i in ids_in(m.group(2)): pull_ok[base_id(i)] = {"instance": inst, "t_log": vtime(m.group(1))}
            continue
        for R, kind in ((R_XFER_FAIL, "xfer_metadata_failed"), (R_ERR_XFER, "error_during_transfer"), (R_PULL_FAIL, "pull_failed")):
            m = R.search(line)
            if m:
                for i in ids_in(m.group(2)): xfer_fail[base_id(i)] = {"instance": inst, "t_log": vtime(m.group(1)), "kind": kind, "error": m.group(3)[:200]}
                break
        if m: continue
        m = R_NO_ENGINE.search(line)
        if m: no_engine_lines.append({"t_log": vtime(m.group(1)), "engine_id": m.group(2)}); continue
        m = R_SEND.search(line)
        if m: p_send[base_id(m.group(2))] = {"t_log": vtime(m.group(1)), "blocks": int(m.group(3)), "to": m.group(4)}; continue
        m = R_PTIMEOUT.search(line)
        if m: p_timeout[base_id(m.group(2))] = {"t_log": vtime(m.group(1)), "seconds": int(m.group(3))}; continue
        m = R_FIN.search(line)
        if m: finished[base_id(m.group(1))][inst] = m.group(2); continue
        m = R_ENGINE.search(line)
        if m and inst == "prefill": engines.append((vtime(m.group(1)), m.group(2)))
def live_engine(t):
    """The prefill engine alive at t (None between the kill and the restarted engine's creation)."""
    es = [eid for te, eid in engines if te <= t]
    if not es: return None
    if t >= T_KILL and es[-1] == engines[0][1]: return None
    return es[-1]
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
         "transfer_id": s[dec[0]].get("transfer_id") if dec else (s.get("prefill") or {}).get("transfer_id"),
         "remote_engine_id": s[dec[0]].get("remote_engine_id") if dec else None,
         "prompt_tokens": next((x["prompt_tokens"] for x in sp.values() if x.get("prompt_tokens")), None),
         "decode_completion_tokens": sp[dec[0]]["completion_tokens"] if dec and dec[0] in sp else None,
         "decode_max_tokens": s[dec[0]].get("max_tokens") if dec else None,
         "decode_pull_finished": pull_ok.get(b), "decode_xfer_failure": xfer_fail.get(b), "prefill_sent": p_send.get(b),
         "prefill_send_timeout": p_timeout.get(b), "request_status": finished.get(b) or None}
    if dec:
        le = live_engine(s[dec[0]]["t_log"]); f["engine_alive_at_decode_arrival"] = le
        f["stale_engine_id"] = bool(f["remote_engine_id"] and le and f["remote_engine_id"] != le)
    if not dec: f["outcome"] = None; return f
    d = dec[0]
    if b in pull_ok:
        f["outcome"] = "loaded"; f["how"] = (f"{d} logged 'pulling kv_caches for [...] finished' (DEBUG); the prefill logged 'Sending kv_caches for request ... "
                                             f"({(p_send.get(b) or {}).get('blocks')} blocks) to {(p_send.get(b) or {}).get('to')}'")
    elif b in xfer_fail:
        x = xfer_fail[b]; f["outcome"] = "failed"
        f["how"] = (f"{d} logged '{ {'xfer_metadata_failed': 'MooncakeXferMetadata transfer failed', 'error_during_transfer': 'Error happens during transferring kvcache', 'pull_failed': 'pulling kv_caches ... failed'}[x['kind']] } for {{...}}: {x['error']}' "
                    f"{x['t_log'] - s[d]['t_log']:.0f} s after it got the request; the request waited for KV that never came (no recompute, no error from vLLM) "
                    f"until its client went away (router --request-timeout-secs 75: 200 then a cut stream; probes: their read timeout) (request_status {(finished.get(b) or {}).get(d)})")
        if f.get("stale_engine_id"): f["how"] += "; the remote_engine_id it was given belonged to the killed prefill (the live one had another engine_id)"
        elif le is None: f["how"] += "; the prefill was down when it arrived"
    elif f["kv_transfer_params_passed"]:
        f["outcome"] = "failed" if (finished.get(b) or {}).get(d) == "FINISHED_ABORTED" else "unknown"
        f["how"] = f"{d} got kv_transfer_params but logged neither 'pulling kv_caches ... finished' nor a failure (request_status {(finished.get(b) or {}).get(d)})"
    else: f["outcome"] = "silent_miss"; f["how"] = f"{d} got no usable kv_transfer_params: computed the prompt itself"
    return f
EVK = ("prefill_logged", "decode_logged", "kv_transfer_params_passed", "transfer_id", "remote_engine_id", "engine_alive_at_decode_arrival", "stale_engine_id",
       "decode_pull_finished", "decode_xfer_failure", "prefill_sent", "prefill_send_timeout", "request_status")
rows = []; probe_used = set()
def arrival(b):
    sp = spans.get(b, {}); ts = [x["start"] for x in sp.values() if x.get("start")]
    if ts: return min(ts), "span"
    return min(x["t_log"] for x in seen[b].values()) + 0.5, "log(+-0.5s)"
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
        rid = (r.get("resp_id") or "").replace("cmpl-", "") or None; how = "the streamed response's id (cmpl-<router id>)" if rid else None
        if not rid:  # no chunk came back: tie by the decode's arrival (max_tokens 16, the nearest unclaimed router id)
            c = sorted((abs(arrival(x)[0] - r["t_start"]), x) for x, sx in seen.items() if x.startswith("___prefill_addr_") and x not in probe_used
                       and (sx.get("decode") or {}).get("max_tokens") == 16 and -1.0 <= arrival(x)[0] - r["t_start"] <= 3.0)
            if c: rid = c[0][1]; how = f"no chunk came back: the unclaimed router id with max_tokens 16 whose arrival ({arrival(rid)[1]}) is nearest the probe's start ({arrival(rid)[0] - r['t_start']:+.2f} s)"
        if rid: probe_used.add(rid)
        row.update({"router_id": rid, "router_id_how": how, "decode_instance": decode_of(rid),
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
        if row["outcome"] == "failed": row["error_at"] = "decode KV transfer (Mooncake)"
    row["evidence"] = {k: f.get(k) for k in EVK}
    if r["flow"] == "router" and row["cached_tokens_client"] == 0 and row["outcome"] == "loaded":
        row["note"] = "the router's usage says cached_tokens 0 although decode loaded the KV (vllm-router 0.1.17 re-serialises usage: created_cache_tokens/multimodal_tokens keys appear, cached_tokens is 0)"
    if r["flow"] == "direct_two_step" and row["outcome"] == "loaded" and row["cached_tokens_client"] != row["prompt_tokens"]:
        row["note"] = "client cached_tokens differs from prompt_tokens"
    rows.append(row)
# ---- the bench
bench = json.load(open(P("bench.json")))
used = set(r["router_id"] for r in rows if r.get("router_id"))
cands = [b for b, s in seen.items() if b.startswith("___prefill_addr_") and b not in used and not b.startswith("tokenize")]
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
              "error_at": "decode KV transfer (Mooncake)" if f.get("outcome") == "failed" else None,
              "evidence": {k: f.get(k) for k in EVK}})
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
  "vllm_logs": {"decode_pulling_finished_lines_ids": len(pull_ok), "decode_xfer_failed_ids": len(xfer_fail),
                "decode_xfer_failure_kinds": dict(collections.Counter(f"{x['kind']}: {x['error']}" for x in xfer_fail.values())),
                "decode_failed_to_find_engine_lines": len(no_engine_lines),
                "prefill_sending_kv_caches_lines": len(p_send), "prefill_timed_out_without_being_sent": len(p_timeout),
                "prefill_engine_ids": [{"t_log": t, "engine_id": e} for t, e in engines],
                "decode_request_status": dict(collections.Counter(v.get("decode") for v in finished.values() if v.get("decode")))},
  "router_mooncake": {"engine_id_queries": [ANSI.sub("", l).strip()[:300] for l in open(P("proxy.log"), errors="replace") if "Mooncake" in l]},
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
