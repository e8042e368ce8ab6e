#!/usr/bin/env python3
"""Capture what `pdtop doctor` reads about a running pair, as a root tree that
pdtop's readers take as injectable roots, plus the HTTP answers and logs.

    capture.py OUTDIR NAME:PORT[:LOG] ... [--proxy PORT[:LOG]]

Each instance's API-server process is found as pdtop finds it: the socket
that LISTENs on its port in /proc/net/tcp{,6}, then the process whose
/proc/PID/fd holds that socket's inode (walking up to the parent if a renamed
`VLLM::` child owns it). Kept for it, its descendants (EngineCore) and the
proxy: proc/PID/{cmdline,environ,status,stat,comm} as read, and proc/PID/fd/
as real symlinks to the same targets. Kept once: proc/net/{tcp,tcp6,route,
fib_trie,if_inet6,dev} and sys/class/net/IF/{operstate,speed,address,mtu,
type,carrier} as plain files. What could not be read is listed in
unreadable.txt with the error, never silently left out.
"""
import json
import os
import shutil
import subprocess
import sys
import urllib.request

PROC_FILES = ["cmdline", "environ", "status", "stat", "comm"]
NET_FILES = ["tcp", "tcp6", "route", "fib_trie", "if_inet6", "dev"]
SYS_FILES = ["operstate", "speed", "address", "mtu", "type", "carrier"]
unreadable = []


def read(path):
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as e:
        unreadable.append(f"{path}: {e}")
        return None


def put(dst, data):
    os.makedirs(os.path.dirname(dst), exist_ok=True)
    with open(dst, "wb") as f:
        f.write(data)


def listen_inodes(port):
    """Inodes of the sockets in state 0A (LISTEN) on `port`, v4 and v6."""
    out = []
    for table in ("tcp", "tcp6"):
        data = read(f"/proc/net/{table}") or b""
        for line in data.decode().splitlines()[1:]:
            f = line.split()
            if len(f) > 9 and f[3] == "0A" and int(f[1].rsplit(":", 1)[1], 16) == port:
                out.append(f[9])
    return out


def ppid(pid):
    for line in (read(f"/proc/{pid}/status") or b"").decode().splitlines():
        if line.startswith("PPid:"):
            return int(line.split()[1])
    return 0


def owner(inodes):
    want = {f"socket:[{i}]" for i in inodes}
    for pid in sorted(int(p) for p in os.listdir("/proc") if p.isdigit()):
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink(f"/proc/{pid}/fd/{fd}") in want:
                    return pid
            except OSError:
                pass
    return None


def descendants(root):
    kids = {}
    for p in os.listdir("/proc"):
        if p.isdigit():
            kids.setdefault(ppid(int(p)), []).append(int(p))
    out, todo = [], [root]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(kids.get(p, []))
    return out


def keep_process(out, pid):
    base = f"{out}/root/proc/{pid}"
    if os.path.exists(base):
        return
    for name in PROC_FILES:
        data = read(f"/proc/{pid}/{name}")
        if data is not None:
            put(f"{base}/{name}", data)
    os.makedirs(f"{base}/fd", exist_ok=True)
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError as e:
        unreadable.append(f"/proc/{pid}/fd: {e}")
        fds = []
    for fd in fds:
        try:
            os.symlink(os.readlink(f"/proc/{pid}/fd/{fd}"), f"{base}/fd/{fd}")
        except OSError as e:
            unreadable.append(f"/proc/{pid}/fd/{fd}: {e}")


def http(url):
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return r.read()
    except Exception as e:  # an answer that did not come is a fact too
        unreadable.append(f"{url}: {e}")
        return None


def main():
    out, args = sys.argv[1], sys.argv[2:]
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    pids, targets = {}, []
    if "--proxy" in args:
        i = args.index("--proxy")
        targets.append("proxy:" + args[i + 1])
        args = args[:i] + args[i + 2:]
    targets = args + targets
    for spec in targets:
        name, port, *log = spec.split(":")
        inodes = listen_inodes(int(port))
        pid = owner(inodes) if inodes else None
        entry = {"port": int(port), "listen_inodes": inodes, "listener_pid": pid}
        if pid is not None:
            # vLLM renames its children VLLM::...; the server is the first ancestor not renamed.
            while (read(f"/proc/{pid}/comm") or b"").startswith(b"VLLM::"):
                pid = ppid(pid)
            entry["pid"] = pid
            entry["processes"] = {}
            for p in descendants(pid) if name != "proxy" else [pid]:
                keep_process(out, p)
                entry["processes"][p] = (read(f"/proc/{p}/comm") or b"").decode().strip()
        if log:
            data = read(log[0])
            if data is not None:
                put(f"{out}/logs/{os.path.basename(log[0])}", data)
        if name != "proxy":
            for path in ("metrics", "version", "v1/models"):
                data = http(f"http://127.0.0.1:{port}/{path}")
                if data is not None:
                    put(f"{out}/http/{name}-{path.replace('v1/', '')}.txt", data)
        pids[name] = entry
    for name in NET_FILES:
        data = read(f"/proc/net/{name}")
        if data is not None:
            put(f"{out}/root/proc/net/{name}", data)
    try:
        ifaces = sorted(os.listdir("/sys/class/net"))
    except OSError as e:
        unreadable.append(f"/sys/class/net: {e}")
        ifaces = []
    for iface in ifaces:
        for name in SYS_FILES:
            data = read(f"/sys/class/net/{iface}/{name}")
            if data is not None:
                put(f"{out}/root/sys/class/net/{iface}/{name}", data)
    for cmd, dst in ((["nvidia-smi", "-L"], "nvidia-smi-L.txt"), (["ps", "-ef", "--forest"], "ps-forest.txt")):
        try:
            r = subprocess.run(cmd, capture_output=True, timeout=30)
            put(f"{out}/{dst}", r.stdout + r.stderr)
        except Exception as e:
            unreadable.append(f"{' '.join(cmd)}: {e}")
    put(f"{out}/pids.json", (json.dumps(pids, indent=1) + "\n").encode())
    put(f"{out}/unreadable.txt", ("\n".join(unreadable) + "\n").encode())
    print(json.dumps(pids))
    print(f"{len(unreadable)} unreadable")


main()
