#!/bin/bash
# Mooncake lab. Turn one capture (capture.tar.xz from drive.sh) into a test fixture folder:
# analyze.py's truth beside the raw files, absolute paths rewritten to
# /lab/... and /models/... (text files and the xz'd jsonl; otlp.bin and
# pdtop.pdrec are binary and keep the device's paths), the big files xz'd.
# Usage: pack_fixture.sh CAPTURE.tar.xz DEST_DIR [PDTOP_BIN]
set -eu
H=$(cd "$(dirname "$0")" && pwd); TAR=$1; DEST=$2; PD=${3:-}
W=$(mktemp -d); tar -xJf "$TAR" -C $W; C=$W/cap
python3 $H/analyze.py $C $W/an $PD > $W/analyze.out
mkdir -p "$DEST"
RW='s#/work/main/\.lab/shared/models/#/models/#g; s#/work/main/\.lab/shared/#/lab/#g; s#/work/main/\.lab/pdtop#/lab/pdtop#g; s#/work/main/lab/mooncake/#/lab/src/mooncake/#g; s#/root/lab/#/lab/#g; s#/root/lab\b#/lab#g; s#/root/\.cache/#/cache/#g'
for f in $C/*.log $C/*.cmd $C/instances.env $C/events.jsonl $C/bench.out $C/driver.out $C/pdtop-record.out $C/pdtop-ps.txt $C/router-models.json \
         $C/router-metrics-idle.txt $C/router-metrics-end.txt $C/clock.json $C/nvidia-smi.txt $C/model-config.json; do
  [ -f "$f" ] || continue; b=$(basename $f); [ $b = otlp.log ] && continue
  sed -E "$RW" "$f" > "$DEST/$b"
done
for f in scrapes netdev; do xz -dc $C/$f.jsonl.xz | sed -E "$RW" | xz -6 > "$DEST/$f.jsonl.xz"; done
sed -E "$RW" $C/pdtop-check.json | xz -6 > "$DEST/pdtop-check.json.xz"
sed -E "$RW" $C/bench.json | xz -6 > "$DEST/bench.json.xz"
cp $C/otlp.bin $C/pdtop.pdrec "$DEST/"
for f in requests.jsonl truth-summary.json; do sed -E "$RW" $W/an/$f > "$DEST/$f"; done; sed -E "$RW" $W/an/pdtop-vs-truth.json | xz -6 > "$DEST/pdtop-vs-truth.json.xz"
grep -l "/root/\|/work/main" "$DEST"/* 2>/dev/null | sed 's/^/still has a device path: /' || true
du -sh "$DEST"; ls -la "$DEST"; tail -3 $W/analyze.out; rm -rf $W
