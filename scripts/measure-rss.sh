#!/usr/bin/env bash
# Measures the manager's memory with N CronJobs (default 1000) due every minute: the release
# binary runs against the simulated API server (crates/apisim, measured request costs) over
# HTTP, until SLOTS slots have run (N x SLOTS Jobs, none finishing), then the peak (VmHWM) and
# current (VmRSS) resident set are printed. KRONJOB_FLAGS adds flags to `kronjob run`.
#   scripts/measure-rss.sh [N] [SLOTS]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
n=${1:-1000}
slots=${2:-3}
cargo build --release --quiet --bin kronjob
cargo build --release --quiet -p kronjob-apisim --example serve
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$work"' EXIT

port=$((20000 + RANDOM % 20000))
target/release/examples/serve "127.0.0.1:$port" measured > "$work/kubeconfig" &
for _ in $(seq 50); do [ -s "$work/kubeconfig" ] && break; sleep 0.1; done
api="http://127.0.0.1:$port"

KUBECONFIG="$work/kubeconfig" RUST_LOG=warn target/release/kronjob run --install-crd \
  --metrics-addr 127.0.0.1:0 --health-addr 127.0.0.1:0 --webhook-addr 127.0.0.1:0 ${KRONJOB_FLAGS:-} \
  2> "$work/manager.log" &
manager=$!
sleep 3

seq "$n" | xargs -P 8 -I{} curl -sf -o /dev/null -X POST \
  -H 'content-type: application/json' \
  "$api/apis/batch.kronjob.dev/v1/namespaces/load/cronjobs" \
  -d '{"apiVersion":"batch.kronjob.dev/v1","kind":"CronJob","metadata":{"name":"cj-{}","namespace":"load"},"spec":{"schedule":"* * * * *","jobTemplate":{"spec":{"template":{"spec":{"restartPolicy":"Never","containers":[{"name":"c","image":"busybox"}]}}}}}}'

count_jobs() {
  curl -sf "$api/apis/batch/v1/namespaces/load/jobs" | grep -o '"kind":"Job"' | wc -l || true
}
deadline=$((SECONDS + 60 * slots + 90))
while [ "$(count_jobs)" -lt $((n * slots)) ] && [ $SECONDS -lt $deadline ]; do sleep 2; done
sleep 10
echo "cronjobs: $n, jobs: $(count_jobs)"
grep -E '^(VmHWM|VmRSS)' "/proc/$manager/status"
echo "warning lines: $(grep -c . "$work/manager.log" || true)"
