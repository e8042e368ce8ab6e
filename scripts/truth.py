#!/usr/bin/env python3
"""pdtop's per-request answers against a capture's ground truth.

    scripts/truth.py CAPTURE_DIR [REPORT.json]

Without REPORT, runs `pdtop check --replay CAPTURE_DIR --json` (the debug
build, or $PDTOP). Prints, for every request of `requests.jsonl`: the
outcome right, unknown or wrong (and wrong while `sure`), and where the
truth names the prefill request that served it, whether the trace's prefill
is that one. The truth is `outcome` where the capture's analysis wrote it
(example-2p2d-demo-proxy), else the README's per-phase rule: decode's
`cached_tokens` > 0 is loaded, a request sent straight to decode is no
prefill, the fault phases are errors or cancelled, the rest silent misses.
"""
import json
import os
import subprocess
import sys
from collections import Counter

FAULTS = {"refused": "error", "engine_dies": "error", "prefill_down": "error", "cancel": "cancelled"}
# The analyses' own words for what pdtop calls by its outcomes: a load read
# after the producer's lease ran out still loaded; a failed load the decode
# recomputed is a miss; one it failed (HTTP 200, no token) an error.
SAME = {"loaded_stale_kv": "loaded", "recomputed": "silent_miss", "failed": "error"}


def truth_of(r):
    if r.get("outcome"):
        return SAME.get(r["outcome"], r["outcome"])
    if r["phase"] in FAULTS:
        return FAULTS[r["phase"]]
    if r.get("mode") == "decode_only":
        return "no_prefill"
    cached = ((r.get("usage") or {}).get("prompt_tokens_details") or {}).get("cached_tokens") or 0
    return "loaded" if cached > 0 else "silent_miss"


def strip_engine(i):
    """`cmpl-x-0-1a2b3c4d` -> `cmpl-x-0`."""
    head, _, tail = i.rpartition("-")
    if head and len(tail) == 8 and all(c in "0123456789abcdef" for c in tail):
        return head
    return i


def response_id(i):
    """`cmpl-x-0` -> `cmpl-x` (the id a client is given)."""
    i = strip_engine(i)
    head, _, n = i.rpartition("-")
    return head if i.startswith("cmpl-") and n.isdigit() else i


def main():
    cap = sys.argv[1]
    if len(sys.argv) > 2:
        report = json.load(open(sys.argv[2]))
    else:
        exe = os.environ.get("PDTOP", os.path.join(os.path.dirname(__file__), "..", "target", "debug", "pdtop"))
        out = subprocess.run([exe, "check", "--replay", cap, "--json"], capture_output=True, text=True)
        report = json.loads(out.stdout)
    traces = report["traces"]
    by_key = {}
    for t in traces:
        keys = {t["id"]} | {v["id"] for v in t.get("vllm_ids", [])}
        keys |= {strip_engine(k) for k in list(keys)} | {response_id(k) for k in list(keys)}
        for k in keys:
            by_key.setdefault(k, []).append(t)
    outcome, pairing, wrong, sure_wrong = Counter(), Counter(), [], []
    rows = [json.loads(line) for line in open(os.path.join(cap, "requests.jsonl"))]
    # A router's `/tokenize` call is logged by vLLM but generates nothing.
    rows = [r for r in rows if r.get("outcome") != "not_generation"]
    matched, used = [], set()
    for r in rows:
        cands = []
        # A router that renames requests: the name vLLM logged (`vllm_base_id`).
        names = (r.get("decode_request_id"), r.get("resp_id"), r.get("vllm_base_id"))
        for k in names + (r["id"] if r.get("x_request_id_forwarded", True) else None,):
            if k and k in by_key:
                cands = by_key[k]
                break
        t = cands[-1] if cands else None
        if t is not None:
            used.add(id(t))
        matched.append(t)
    # A request the client got no response id for (an error, a cut stream)
    # has no name to look up: it takes an unclaimed trace of the same
    # outcome, and the count of such matches is printed.
    spare = [t for t in traces if id(t) not in used]
    by_count = 0
    for i, r in enumerate(rows):
        if matched[i] is None:
            want = truth_of(r)
            t = next((t for t in spare if t["outcome"] == want), None)
            if t is not None:
                spare.remove(t)
                matched[i] = t
                by_count += 1
    for r, t in zip(rows, matched):
        want = truth_of(r)
        got = t["outcome"] if t else "missing"
        if got == want:
            outcome["right"] += 1
        elif got in ("unknown", "pending"):
            outcome["unknown"] += 1
        else:
            outcome["wrong"] += 1
            wrong.append(f"{r['id']}: {want} -> {got}")
            if t and t.get("sure"):
                sure_wrong.append(r["id"])
        want_p = r.get("prefill_request_id")
        if want_p and t:
            ids = {strip_engine(v["id"]) for v in t.get("vllm_ids", [])}
            prefill_ids = {i for i in ids if response_id(i) != r.get("resp_id")}
            # Joined among several copies of one length: any of them is its pairing.
            among = {strip_engine(i) for i in t.get("other_copies", [])}
            if strip_engine(want_p) in prefill_ids:
                pairing["right"] += 1
            elif strip_engine(want_p) in among:
                pairing["among"] += 1
            elif prefill_ids:
                pairing["wrong"] += 1
                wrong.append(f"{r['id']}: paired with another prefill")
            else:
                pairing["unpaired"] += 1
    n = sum(outcome.values())
    print(f"{os.path.basename(os.path.normpath(cap))}: {n} requests; outcome right {outcome['right']}, "
          f"unknown {outcome['unknown']}, wrong {outcome['wrong']} (sure and wrong: {len(sure_wrong)})")
    if by_count:
        print(f"  ({by_count} matched by outcome alone: the truth names no id pdtop could know)")
    if spare:
        print(f"  traces of no request in the truth: {Counter(t['outcome'] for t in spare)}")
    if pairing:
        among = f", among equal-length copies {pairing['among']}" if pairing["among"] else ""
        print(f"  prefill pairing: right {pairing['right']}{among}, unpaired {pairing['unpaired']}, wrong {pairing['wrong']}")
    print(f"  pdtop requests: {report['requests']}")
    for w in wrong:
        print("  ", w)


main()
