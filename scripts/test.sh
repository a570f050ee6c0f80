#!/usr/bin/env bash
# Runs the whole test suite (cargo test over all targets of the workspace but the load tools,
# which `just lint` type-checks instead), then the RBAC check
# over the API calls the suite recorded, and closes with one line that sums every test binary's
# result: "tests: N passed, N failed, N skipped" (skipped = the RBAC check,
# which the second step runs).
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
./scripts/install-tools.sh >/dev/null
export PATH="$root/.tools/bin:$PATH"
export KRONJOB_API_CALL_LOG="$root/target/api-calls"
rm -rf "$KRONJOB_API_CALL_LOG" && mkdir -p "$KRONJOB_API_CALL_LOG"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
cargo test --workspace --exclude kronjob-loadtest --all-targets "$@" 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
if [ "$status" -eq 0 ]; then
  cargo test --test rbac -- --ignored 2>&1 | tee -a "$log"
  status=${PIPESTATUS[0]}
fi
awk '/^test result:/ {
       for (i = 1; i <= NF; i++) {
         if ($(i+1) ~ /^passed/)  p += $i
         if ($(i+1) ~ /^failed/)  f += $i
         if ($(i+1) ~ /^ignored/) s += $i
       }
     }
     END { printf "tests: %d passed, %d failed, %d skipped\n", p, f, s }' "$log"
exit "$status"
