#!/usr/bin/env bash
# Builds the fuzz targets (fuzz/: cargo-fuzz with --sanitizer none, which the stable toolchain
# builds) and runs each for SECONDS, from the seeds the tests' tables give (tests/fuzz_seeds.rs
# writes them to target/tmp/fuzz-seeds/), the inputs of past findings (fuzz/regressions/) and
# the corpus earlier runs grew (fuzz/corpus/, not committed). A crash, an input that runs over
# 10 s or one that takes over 2 GiB fails the run, the input kept in fuzz/artifacts/<target>/.
# --dev builds without optimisation: less than half the build, about 15 times fewer
# executions a second (what CI runs: the seeds and past findings, then a short search).
# Usage: scripts/fuzz.sh [--dev] [SECONDS [TARGET...]]   (default: 20 s each, every target)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
build=()
if [ "${1:-}" = --dev ]; then
  build=(--dev)
  shift
fi
seconds=${1:-20}
shift || true
cargo test --quiet --test fuzz_seeds >/dev/null
cargo fuzz build "${build[@]}" --sanitizer none
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  mapfile -t targets < <(cargo fuzz list)
fi
mkdir -p target/fuzz-logs
for target in "${targets[@]}"; do
  corpora=("fuzz/corpus/$target" "target/tmp/fuzz-seeds/$target")
  if [ -d "fuzz/regressions/$target" ]; then corpora+=("fuzz/regressions/$target"); fi
  mkdir -p "fuzz/corpus/$target"
  log="target/fuzz-logs/$target.log"
  if ! cargo fuzz run "${build[@]}" --sanitizer none "$target" "${corpora[@]}" -- \
    -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 >"$log" 2>&1; then
    tail -n 60 "$log" >&2
    echo "fuzz: $target failed: the input is in fuzz/artifacts/$target/, the log in $log" >&2
    exit 1
  fi
  # libFuzzer's closing line: executions, coverage (cov, ft), corpus, speed.
  echo "fuzz: $target: $(grep -aE '^#[0-9]+[[:space:]]+DONE' "$log" | tail -n 1)"
done
