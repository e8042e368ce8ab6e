#!/usr/bin/env bash
# Times `cargo test` (the README's second command) on a fresh clone of each
# commit, one after the other: the shared CARGO_HOME (crates fetched before
# the clock starts, as a user who built once has them), its own target dir
# each, `../shared` beside each clone as in the workspace.
#
#   scripts/measure-tests.sh [COMMIT...]        (default: HEAD)
#
# Prints, per commit, the wall time of `cargo test` and its phases, read
# from the times its lines were printed: build (to the first `Running`),
# lib (the unit tests), it (tests/it), rest (doc tests and the end).
# Per-test times of a phase: RUSTC_BOOTSTRAP=1 target/debug/deps/it-*
# -Z unstable-options --report-time (run the binary: RUSTC_BOOTSTRAP in
# cargo's environment rebuilds every crate).
#
# TIMINGS=1 adds --timings and keeps each build's report as $WORK/<sha>-timing.html.
#
# The machine must be otherwise quiet for numbers worth comparing; run the
# commits to compare in one invocation (one after the other, same load).
# WORK (default /tmp/pdtop-measure-tests) holds the clones; deleted after.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
shared=$(cd "$repo/.." && pwd)/shared
work=${WORK:-/tmp/pdtop-measure-tests}
[ $# -gt 0 ] || set -- HEAD
mkdir -p "$work"
for commit in "$@"; do
  sha=$(git -C "$repo" rev-parse --short "$commit")
  dir=$work/$sha
  rm -rf "$dir"
  mkdir -p "$dir"
  git clone -q "$repo" "$dir/pdtop"
  git -C "$dir/pdtop" checkout -q "$sha"
  [ -e "$shared" ] && ln -s "$shared" "$dir/shared"
  (cd "$dir/pdtop" && cargo fetch --locked -q)
  log=$work/$sha.log
  start=$EPOCHREALTIME
  # Each line stamped with the seconds since the start; the last line is
  # the end (time's report).
  (cd "$dir/pdtop" && CARGO_TARGET_DIR="$dir/pdtop/target" /usr/bin/time -v cargo test ${TIMINGS:+--timings} 2>&1 || true) |
    while IFS= read -r line; do
      printf '%8.1f %s\n' "$(awk -v a="$start" -v b="$EPOCHREALTIME" 'BEGIN { print b - a }')" "$line"
    done >"$log"
  end=$(grep -m1 'Elapsed (wall' "$log" | awk '{print $1}')
  awk -v sha="$sha" -v end="$end" '
    / Running unittests src\/lib.rs/ && !lib { lib = $1 }
    / Running tests\/it\/main.rs/ && !it { it = $1 }
    / Doc-tests / && !doc { doc = $1 }
    /test result:/ { results = results "\n    " $0 }
    /FAILED|panicked/ { failed = 1 }
    /Maximum resident set size/ { rss = $NF }
    / Command exited with non-zero status/ { failed = 1 }
    END {
      printf "%s: cargo test %.0f s = build %.0f + lib %.0f + it %.0f + rest %.0f; peak RSS %.2f GB%s\n",
        sha, end, lib, it - lib, (doc ? doc : end) - it, end - (doc ? doc : end), rss / 1048576,
        failed ? " (FAILURES: see the log)" : ""
      print "  " results
    }' "$log"
  [ -z "${TIMINGS:-}" ] || cp "$dir/pdtop/target/cargo-timings/cargo-timing.html" "$work/$sha-timing.html"
  rm -rf "$dir"
done
