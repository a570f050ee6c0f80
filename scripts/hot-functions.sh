#!/usr/bin/env bash
# Updates link/hot-functions.txt, the functions a running manager executes, which release builds
# place first in the code (see build.rs). Each round builds the manager with symbols and with the
# list as it stands, runs it against a real API server (envtest) under the scale tool (N
# CronJobs due every minute, two slots, the webhook called on every create) with perf
# recording (once as one manager, once as three --sharding replicas, whose code differs in
# part), and makes the list again from:
#   1. every function perf saw, in this round or an earlier one: sampled on CPU, or the first to
#      touch one of the code's pages. Read-ahead is off on the disk and the page cache dropped
#      while the manager runs, so every first touch of a page faults and is seen (with
#      read-ahead, the kernel maps 64 KB around a fault and most touches go unseen);
#   2. then the other functions on the code pages resident at the end of the run: a first touch
#      names one function of its page, the others there may have run too. With the list in
#      place these pages are few, so a second round gives a tighter list than the first.
# Start from an empty list (`: > link/hot-functions.txt`) to drop functions no longer run.
#
# Function names carry hashes of the build's target, so the list is made for the target the
# image is built for (TARGET, default x86_64-unknown-linux-musl, as the Dockerfile builds); other
# builds find few of its names and link as before.
#
# Needs root (read-ahead, drop_caches), perf, and KUBEBUILDER_ASSETS (../shared/envtest).
#   scripts/hot-functions.sh [ROUNDS] [CRONJOBS]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
rounds=${1:-2}
cronjobs=${2:-3000}
list=link/hot-functions.txt
target=target/hot-functions
triple=${TARGET:-x86_64-unknown-linux-musl}
: "${KUBEBUILDER_ASSETS:?set it to the envtest binaries (../shared/envtest/setup.sh)}"
command -v perf > /dev/null || { echo "perf is needed (apt-get install linux-perf)" >&2; exit 1; }
[ "$(id -u)" = 0 ] || { echo "run as root: read-ahead and the page cache are changed" >&2; exit 1; }

work=$(mktemp -d)
majmin=$(findmnt -no MAJ:MIN -T "$work" | tr -d " ")
ra=/sys/dev/block/$majmin/queue/read_ahead_kb
[ -f "$ra" ] || ra=/sys/dev/block/$majmin/../queue/read_ahead_kb
ra_before=$(cat "$ra")
trap 'echo "$ra_before" > "$ra"; rm -rf "$work"' EXIT

# The wrapper the scale tool runs the manager with: perf, and every 5 s the file offsets of
# the resident pages of the manager's code (/proc/PID/pagemap: bit 63 set).
cat > "$work/perf-wrap" << 'EOF'
#!/usr/bin/env bash
work=$(dirname "$0")
perf record -q -o "$work/perf.data.$$" -e cpu-clock/freq=20000/u -e page-faults/period=1/u -- "$@" &
perf=$!
trap 'kill -INT $perf 2> /dev/null' TERM INT
sleep 1
pid=$(pgrep -P "$perf" | head -1)
while kill -0 "$pid" 2> /dev/null; do
  if read -r range _ off _ < <(awk -v b="$1" '$6 == b && $2 ~ /x/' "/proc/$pid/maps"); then
    lo=$((16#${range%-*})) hi=$((16#${range#*-})) off=$((16#$off))
    dd if="/proc/$pid/pagemap" bs=8 skip=$((lo / 4096)) count=$(((hi - lo) / 4096)) status=none |
      od -An -v -tx8 -w8 | awk -v off="$off" '$1 ~ /^[89a-f]/ { print off + (NR - 1) * 4096 }' \
      > "$work/pages.new.$$" && mv "$work/pages.new.$$" "$work/pages.$$"
  fi
  sleep 5 & wait $!
done
wait "$perf"
EOF
chmod +x "$work/perf-wrap"

# Hex to number in any awk (mawk has no strtonum).
hex='function hex(s,  i, n) { n = 0; s = tolower(s)
  for (i = 1; i <= length(s); i++) n = n * 16 + index("0123456789abcdef", substr(s, i, 1)) - 1
  return n }'

cargo build --release --quiet --locked --example scale
touch "$list"
sort -u "$list" > "$work/known"   # what the list held, and then what perf saw
for round in $(seq "$rounds"); do
  echo "round $round of $rounds: building with $(wc -l < "$list") functions listed" >&2
  # The release profile, its symbols kept by a flag (flags, unlike the profile, do not enter
  # the names' hashes): the names are the ones the stripped release build links.
  RUSTFLAGS="-C strip=none" cargo build --release --quiet --locked \
    --target "$triple" --target-dir "$target" --bin kronjob
  bin=$work/kronjob
  rm -f "$bin" "$work"/pages.* "$work"/perf.data.*
  cp "$target/$triple/release/kronjob" "$bin"
  # Every function: file offset (address - the code segment's address + its offset), size, name.
  code=$(readelf -lW "$bin" | awk '$1 == "LOAD" && / E / { print $2, $3; exit }')
  nm --defined-only -S "$bin" | awk -v seg="$code" "$hex"'
    BEGIN { split(seg, s, " "); shift = hex(substr(s[2], 3)) - hex(substr(s[1], 3)) }
    NF == 4 && $3 ~ /^[tTwW]$/ { print hex($1) - shift, hex($2), $4 }' | sort -n > "$work/functions"

  for replicas in 1 3; do
    echo "round $round: $cronjobs CronJobs, 2 slots, $replicas manager(s), read-ahead off" >&2
    sync
    echo 0 > "$ra"
    echo 3 > /proc/sys/vm/drop_caches
    target/release/examples/scale --cronjobs "$cronjobs" --slots 2 --replicas "$replicas" \
      --create-after-start --no-floor-after --kronjob "$bin" --wrapper "$work/perf-wrap" \
      > "$work/scale.md" 2> "$work/scale.err" || { tail -20 "$work/scale.err" >&2; exit 1; }
    echo "$ra_before" > "$ra"
  done
  ls "$work"/pages.* > /dev/null 2>&1 || { echo "no resident pages were recorded" >&2; exit 1; }

  for data in "$work"/perf.data.*; do
    perf script -i "$data" --no-demangle -F ip,sym,dso 2> /dev/null
  done | awk -v dso="($bin)" '$NF == dso && NF == 3 { print $2 }' | sort -u > "$work/seen"
  sort -un "$work"/pages.* > "$work/pages"
  awk 'NR == FNR { page[$1] = 1; next }
       { for (p = int($1 / 4096) * 4096; p < $1 + $2; p += 4096) if (p in page) { print $3; next } }' \
    "$work/pages" "$work/functions" > "$work/paged"
  # Seen (now or before) first, then the rest of the resident pages; each in address order.
  sort -u -o "$work/known" "$work/known" "$work/seen"
  {
    awk 'NR == FNR { want[$1] = 1; next } ($3 in want) { print $3 }' "$work/known" "$work/functions"
    cat "$work/paged"
  } | awk '!seen[$0]++' > "$work/list"
  echo "round $round: $(wc -l < "$work/seen") functions seen, $(wc -l < "$work/pages") code" \
    "pages resident, $(wc -l < "$work/list") functions listed" >&2
  cp "$work/list" "$list"
done
