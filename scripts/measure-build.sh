#!/usr/bin/env bash
# First-build time of two pdtop commits, as a user's fresh clone builds it
# for the README's first command (`cargo run --release -- demo`): each
# commit cloned into a temp dir and built with `cargo build --release` from
# nothing, one after the other (ROUNDS=N alternates old, new N times, so
# a busy machine weighs on both alike). CARGO_HOME is shared and
# `cargo fetch` runs first, untimed, so only compiling is measured. Prints
# the wall times, then the new build's 10 slowest units from `--timings`.
# KEEP_BINS=DIR copies each build's binary there (DIR/pdtop-old, DIR/pdtop-new)
# for the paired runtime measurements.
# Usage: scripts/measure-build.sh OLD_COMMIT NEW_COMMIT
set -euo pipefail
old=${1:?usage: measure-build.sh OLD_COMMIT NEW_COMMIT}
new=${2:?usage: measure-build.sh OLD_COMMIT NEW_COMMIT}
rounds=${ROUNDS:-1}
repo=$(git rev-parse --show-toplevel)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
unset CARGO_TARGET_DIR RUSTC_WRAPPER CARGO_BUILD_RUSTC_WRAPPER CARGO_INCREMENTAL

for side in old new; do
  commit=${!side}
  git clone -q --no-local "$repo" "$tmp/$side"
  git -C "$tmp/$side" checkout -q --detach "$commit"
  (cd "$tmp/$side" && cargo fetch --locked -q)
done

echo "round,side,commit,wall_s"
for r in $(seq "$rounds"); do
  for side in old new; do
    dir=$tmp/$side
    rm -rf "$dir/target"
    t0=$(date +%s.%N)
    (cd "$dir" && cargo build --release --locked --offline --timings -q 2>"$tmp/$side.err") ||
      { cat "$tmp/$side.err"; exit 1; }
    t1=$(date +%s.%N)
    echo "$r,$side,$(git -C "$dir" rev-parse --short HEAD),$(echo "$t1 - $t0" | bc)"
    if [ -n "${KEEP_BINS:-}" ]; then cp "$dir/target/release/pdtop" "$KEEP_BINS/pdtop-$side"; fi
  done
done

echo "slowest units of the new build (seconds, from cargo --timings):"
python3 - "$tmp/new/target/cargo-timings/cargo-timing.html" <<'EOF'
import json, re, sys
html = open(sys.argv[1]).read()
units = json.loads(re.search(r"const UNIT_DATA = (\[.*?\]);\n", html, re.S).group(1))
for u in sorted(units, key=lambda u: -u["duration"])[:10]:
    what = f'{u["name"]} {u["version"]}' + (f' ({u["target"].strip()})' if u["target"].strip() else "")
    print(f'{u["duration"]:7.1f}  {what}')
print(f'{sum(u["duration"] for u in units):7.1f}  all {len(units)} units (CPU-ish total)')
EOF
