#!/usr/bin/env bash
# Runs the whole test suite (cargo test over all targets) and closes with one line that sums
# every test binary's result: "tests: N passed, N failed, N skipped" (skipped = ignored e2e).
set -uo pipefail
log=$(mktemp)
trap 'rm -f "$log"' EXIT
cargo test --all-targets "$@" 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
awk '/^test result:/ {
       for (i = 1; i <= NF; i++) {
         if ($(i+1) ~ /^passed/)  p += $i
         if ($(i+1) ~ /^failed/)  f += $i
         if ($(i+1) ~ /^ignored/) s += $i
       }
     }
     END { printf "tests: %d passed, %d failed, %d skipped\n", p, f, s }' "$log"
exit "$status"
