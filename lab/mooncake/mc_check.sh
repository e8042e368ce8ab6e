#!/bin/bash
# Mooncake lab, device call 1: keep the first site part, unpack the trimmed
# mooncake-transfer-engine-cuda13 0.3.14 (+ the libibverbs/libmlx5/libnuma/
# libcurl it needs, from nixl_cu13.libs, under their plain names) into
# $LAB/mc, find libcudart.so.13, and check `import mooncake.engine` and a TCP
# TransferEngine.initialize(). Usage: mc_check.sh PART_DIR (holds mc.tar.xz and site.part.aa)
set -u
D=$(cd "${1:?part dir}" && pwd); LAB=${LAB:-$HOME/lab}; mkdir -p $LAB/parts
cp $D/site.part.* $LAB/parts/ && rm -rf $LAB/mc && tar -xJf $D/mc.tar.xz -C $LAB || { echo "copy/unpack failed"; exit 1; }
C=$( (ls /usr/local/cuda*/lib64/libcudart.so.13* 2>/dev/null; python3 - <<'PY'
import glob, site, sys
for d in sys.path + site.getsitepackages():
    for p in glob.glob(d + "/nvidia/**/libcudart.so.13*", recursive=True): print(p)
PY
) | head -1)
echo "libcudart.so.13: ${C:-NOT FOUND}"; [ -n "$C" ] && dirname $C > $LAB/mc/cudart.dir
export LD_LIBRARY_PATH=$LAB/mc/syslibs:$(cat $LAB/mc/cudart.dir 2>/dev/null)
echo "--- ldd (not found only):"; ldd $LAB/mc/mooncake/engine.so | grep "not found"
cd /tmp && PYTHONPATH=$LAB/mc timeout 60 python3 -c "
import mooncake.engine as m; print('import ok', m.__file__)
t = m.TransferEngine(); r = t.initialize('127.0.0.1', 'P2PHANDSHAKE', 'tcp', ''); print('initialize(tcp) ->', r, 'rpc port', t.get_rpc_port())
" 2>&1 | tail -25; echo "python rc=${PIPESTATUS[0]}"
python3 -c "import aiohttp, requests, msgpack; print('py deps ok')" 2>&1 | tail -1
ls -la $LAB/parts; nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv,noheader
