# Sourced by the measure-live scripts. `demo_lab BIN` serves the demo lab
# at real speed with BIN on loopback and sets `lab` (its pid), `lab_out`
# (the file it printed its endpoints to) and `watch_args` (the flags that
# watch it: two instances, three logs).
demo_lab() {
  lab_out=$(mktemp)
  "$1" demo --serve-only --speed 1 > "$lab_out" &
  lab=$!
  sleep 1
  local p d pl dl xl
  read -r _ p _ d < <(grep -- '^  --prefill ' "$lab_out")
  read -r _ pl _ dl _ xl < <(grep -- '--prefill-log' "$lab_out")
  watch_args="--prefill $p --decode $d --prefill-log $pl --decode-log $dl --proxy-log $xl"
}
