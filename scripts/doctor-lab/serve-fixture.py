#!/usr/bin/env python3
"""Serve a doctor fixture's captured HTTP answers again, so `pdtop doctor`
can be run against a capture on any machine:

    serve-fixture.py tests/fixtures/doctor/<scenario> [--host 127.0.0.1]

Listens on the ports in the fixture's pids.json (prefill, decode) and answers
GET /metrics, /version, /v1/models with the captured bodies, /health with
200. Nothing else: the /proc and /sys facts come from the fixture's root/.
"""
import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PATHS = {"/metrics": "metrics", "/version": "version", "/v1/models": "models"}


def handler(folder, name):
    class H(BaseHTTPRequestHandler):
        def do_GET(self):
            if self.path == "/health":
                body = b""
            elif self.path in PATHS:
                try:
                    with open(f"{folder}/http/{name}-{PATHS[self.path]}.txt", "rb") as f:
                        body = f.read()
                except OSError:
                    self.send_error(404)
                    return
            else:
                self.send_error(404)
                return
            self.send_response(200)
            ctype = "text/plain; version=0.0.4" if self.path == "/metrics" else "application/json"
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *a):
            pass

    return H


def main():
    folder = sys.argv[1]
    host = sys.argv[sys.argv.index("--host") + 1] if "--host" in sys.argv else "127.0.0.1"
    with open(f"{folder}/pids.json") as f:
        pids = json.load(f)
    servers = []
    for name, entry in pids.items():
        if name == "proxy":
            continue
        s = ThreadingHTTPServer((host, entry["port"]), handler(folder, name))
        servers.append(s)
        threading.Thread(target=s.serve_forever, daemon=True).start()
        print(f"{name}: http://{host}:{entry['port']}", flush=True)
    threading.Event().wait()


main()
