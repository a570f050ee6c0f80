#!/usr/bin/env bash
# Audits built binaries by the dependency list `cargo auditable` embedded in them (section
# .dep-v0, what a scanner reads years later): first that each has it, then `cargo audit bin`
# against the RustSec advisory database.
#
#   scripts/audit.sh [BINARY...]      default: the image's, target/image/*/kronjob (just image)
#
# The lockfile's advisories are cargo-deny's (scripts/deny.sh), and this reads the same copy
# of the database: fetched from GitHub (cargo deny fetch), else the copy already on the
# machine, else one line says the binaries were NOT checked for advisories (no package
# registry this machine reaches carries the database).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
export PATH="$root/.tools/bin:$PATH"
binaries=("$@")
if [ ${#binaries[@]} -eq 0 ]; then
  binaries=(target/image/*/kronjob)
fi
for binary in "${binaries[@]}"; do
  if [ ! -f "$binary" ]; then
    echo "audit: $binary not found: build it first (just image)" >&2
    exit 1
  fi
  if ! readelf -S -W "$binary" | grep -q '\.dep-v0'; then
    echo "audit: $binary has no embedded dependency list (.dep-v0): build it with cargo auditable" >&2
    exit 1
  fi
done
echo "audit: ${binaries[*]}: dependency list embedded"
db="${CARGO_HOME:-$HOME/.cargo}/advisory-dbs"
copy() { compgen -G "$db/advisory-db-*/crates" | head -n 1 | xargs -r dirname; }
if ! cargo deny --locked fetch db >/dev/null 2>&1 && [ -z "$(copy)" ]; then
  echo "audit: advisories NOT checked: the advisory database cannot be fetched from this machine"
  exit 0
fi
# Vulnerabilities, unsound and unmaintained crates fail, as with cargo-deny; yanked versions
# are cargo-deny's to report (from the lockfile, with the crates.io index).
cargo audit --no-fetch --stale --db "$(copy)" --deny unsound --deny unmaintained --no-yanked \
  bin "${binaries[@]}"
