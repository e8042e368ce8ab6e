#!/usr/bin/env bash
# Regenerates screenshots/ from the embedded recording: SVG from pdtop's own
# frame buffers, then PNG where rsvg-convert is installed
# (Debian: apt-get install librsvg2-bin fonts-dejavu-core).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo run --quiet -- screenshots --out screenshots
if command -v rsvg-convert >/dev/null; then
  for f in screenshots/*.svg; do rsvg-convert "$f" -o "${f%.svg}.png"; done
fi
ls screenshots
