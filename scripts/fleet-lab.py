#!/usr/bin/env python3
"""A cheap fleet for measuring: N prefill and N decode /metrics endpoints on
127.0.0.1, each replaying a recorded capture's scrapes at real speed and
looping (one process, one copy of the recording, so 64 instances cost ~100 MB
instead of 64 labs). Each instance starts at its own point of the recording
so the fleet is not in lockstep. Rows where the instance was down are
skipped: every instance stays up. Prints `prefill HOST:PORT` / `decode
HOST:PORT` lines, then `ready`, and serves until killed. `/v1/models`
answers as vLLM does; `/fleet-lab/requests` (on any port, not counted) says
how many requests and body bytes the fleet has served, to measure a client.

Usage: scripts/fleet-lab.py CAPTURE_DIR PREFILL_COUNT DECODE_COUNT
"""
import bisect
import json
import lzma
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def load(capture):
    rows = {"prefill": [], "decode": []}
    with lzma.open(f"{capture}/scrapes.jsonl.xz", "rt") as f:
        for line in f:
            r = json.loads(line)
            if r.get("text") is not None and r.get("instance") in rows:
                rows[r["instance"]].append((r["t"], r["text"].encode()))
    t0 = min(v[0][0] for v in rows.values())
    span = max(v[-1][0] for v in rows.values()) - t0
    return {k: ([t - t0 for t, _ in v], [b for _, b in v]) for k, v in rows.items()}, span


def main():
    capture, n_prefill, n_decode = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    rows, span = load(capture)
    start = time.time()
    served = {"requests": 0, "bytes": 0}
    lock = threading.Lock()
    models = json.dumps({"data": [{"id": "lab-8b", "root": "/models/lab-8b", "max_model_len": 8192}]}).encode()

    def handler_for(role, offset):
        times, bodies = rows[role]

        class H(BaseHTTPRequestHandler):
            def do_GET(self):
                if self.path == "/fleet-lab/requests":
                    with lock:
                        body = json.dumps(served).encode()
                elif self.path == "/v1/models":
                    body = models
                elif self.path == "/metrics":
                    t = (time.time() - start + offset) % span
                    body = bodies[max(0, bisect.bisect_right(times, t) - 1)]
                else:
                    self.send_response(404)
                    self.end_headers()
                    return
                if self.path != "/fleet-lab/requests":
                    with lock:
                        served["requests"] += 1
                        served["bytes"] += len(body)
                self.send_response(200)
                self.send_header("content-type", "text/plain; version=0.0.4")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        return H

    n = 0
    for role, count in (("prefill", n_prefill), ("decode", n_decode)):
        for i in range(count):
            server = ThreadingHTTPServer(("127.0.0.1", 0), handler_for(role, (i * 7.3) % span))
            threading.Thread(target=server.serve_forever, daemon=True).start()
            print(f"{role} 127.0.0.1:{server.server_address[1]}", flush=True)
            n += 1
    print("ready", flush=True)
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    main()
