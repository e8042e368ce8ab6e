#!/usr/bin/env python3
"""Corpus measure for issue #18: of the excerpts in tests/fixtures/log-excerpts/
that name requests (manifest `requests`), in how many does
`pdtop check --from-logs --json` list one of those ids in `traces[]`; and of
those that print a failure on a line naming a request, in how many is the
failure reported on that request (its trace is `error`/`silent_miss`, or its
evidence names the failure).

Each file is read as the log of its manifest `component` (vllm-prefill ->
--prefill-log, proxy/router/sidecar -> --proxy-log, anything else ->
--decode-log, as a user pasting an excerpt would).

usage: scripts/measure-corpus-ids.py [path/to/pdtop]   (default target/debug/pdtop)
"""
import json, subprocess, sys, tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DIR = ROOT / "tests/fixtures/log-excerpts"
PDTOP = sys.argv[1] if len(sys.argv) > 1 else str(ROOT / "target/debug/pdtop")
FAILURES = {
    "engine_dead", "engine_error", "kv_load_failed", "kv_load_recovered", "transfer_failed",
    "transfer_timeout", "handshake_failed", "expired_kv", "invalid_kv_read", "mooncake_key_failed",
    "offload_store_failed", "request_failed", "request_key_error", "mooncake_pull_failed",
}
ROLE = {"vllm-prefill": "--prefill-log", "proxy": "--proxy-log", "router": "--proxy-log", "sidecar": "--proxy-log"}


def strip(i):
    """Every name a trace may carry for a printed id (suffixes dropped)."""
    out = {i}
    if i.endswith("kv"):  # P2pNccl's tensor id: the request id + "kv"
        out |= strip(i[:-2])
    for p in ("cmpl-", "chatcmpl-"):
        if i.startswith(p):
            out.add(i[len(p):])
    parts = i.rsplit("-", 1)
    if len(parts) == 2 and (parts[1].isdigit() or len(parts[1]) == 8):
        out |= strip(parts[0])
    return out


def main():
    man = tomllib.loads((DIR / "MANIFEST.toml").read_text())
    with_ids = found = with_fail = reported = 0
    for ex in man["excerpt"]:
        exp = ex["expect"]
        ids = {r["printed"] for r in exp["requests"] if "..." not in r["printed"]}
        id_lines = {r["line"]: r["printed"] for r in exp["requests"]}
        fail_ids = {id_lines[e["line"]] for e in exp["events"] if e["kind"] in FAILURES and e["line"] in id_lines}
        fail_ids = {i for i in fail_ids if "..." not in i}
        if not ids and not fail_ids:
            continue
        flag = ROLE.get(ex["component"], "--decode-log")
        out = subprocess.run([PDTOP, "check", "--json", "--from-logs", flag, str(DIR / ex["file"])],
                             capture_output=True, text=True)
        try:
            traces = json.loads(out.stdout)["traces"]
        except Exception:
            traces = []
        names = {}
        for t in traces:
            for n in [t["id"], *(v["id"] for v in t.get("vllm_ids", []))]:
                names[n] = t
        def trace_of(i):
            return next((names[n] for n in strip(i) if n in names), None)
        ok_ids = any(trace_of(i) for i in ids)
        if ids:
            with_ids += 1
            found += ok_ids
        ok_fail = None
        if fail_ids:
            with_fail += 1
            ok_fail = any((t := trace_of(i)) and (t["outcome"] in ("error", "silent_miss") or t.get("error_at")
                          or any(w in t["evidence"] for w in ("expired", "fail", "invalid", "KeyError")))
                          for i in fail_ids)
            reported += bool(ok_fail)
        print(f"{ex['file']:58} ids={'-' if not ids else ok_ids!s:5} failure={'-' if ok_fail is None else ok_fail}")
    print(f"\nfiles naming requests: {with_ids}, ids in traces: {found}")
    print(f"files printing a failure on a named request: {with_fail}, reported on the request: {reported}")


main()
