#!/usr/bin/env bash
# A release-profile setting for pdtop's own crate against the profile as
# committed, in one run: the time to rebuild pdtop (dependencies already
# built, so only pdtop's crate is compiled: the serial tail of a first
# build) and the parse and replay benches, committed profile first, then
# the variant, then the committed profile's rebuild once more.
# Usage: scripts/measure-profile.sh CONFIG...
#   e.g. scripts/measure-profile.sh 'profile.release.package.pdtop.opt-level=2'
# (each CONFIG is a `cargo --config` value; bench inherits release).
set -euo pipefail
[ $# -ge 1 ] || { echo "usage: measure-profile.sh CONFIG..." >&2; exit 2; }
cd "$(git rev-parse --show-toplevel)"
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$PWD/target-profile}
variant=()
for c in "$@"; do variant+=(--config "$c" --config "${c/profile.release/profile.bench}"); done

rebuild() { # seconds to rebuild pdtop's lib and bin
  touch src/lib.rs
  local t0 t1
  t0=$(date +%s.%N)
  cargo build --release -q "$@"
  t1=$(date +%s.%N)
  echo "$t1 - $t0" | bc
}

cargo bench --bench parse --bench replay --no-run -q # dependencies, untimed
echo "side,rebuild_s"
echo "committed,$(rebuild)"
cargo bench --bench parse --bench replay -q -- --save-baseline committed 2>&1 | grep -E "^[a-z_/0-9]+|time:"
echo "variant,$(rebuild "${variant[@]}")"
cargo bench --bench parse --bench replay -q "${variant[@]}" -- --baseline committed 2>&1 |
  grep -E "^[a-z_/0-9]+|time:|change:|Performance|No change|within noise"
echo "committed,$(rebuild)"
