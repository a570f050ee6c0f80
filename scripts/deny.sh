#!/usr/bin/env bash
# cargo-deny as CI runs it: licenses, bans and sources always (no network needed); advisories
# when the RustSec advisory database can be fetched (or a copy is already on the machine),
# otherwise one line saying they were not checked.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
export PATH="$root/.tools/bin:$PATH"
cargo deny --locked check licenses bans sources
db="${CARGO_HOME:-$HOME/.cargo}/advisory-dbs"
have_copy() { compgen -G "$db/advisory-db-*/crates" >/dev/null; }
if cargo deny --locked fetch db >/dev/null 2>&1; then
  cargo deny --locked --offline check advisories
elif have_copy; then
  echo "cargo deny: the advisory database could not be updated; checking against the copy in $db"
  cargo deny --locked --offline check advisories
else
  echo "cargo deny: advisories NOT checked: the advisory database cannot be fetched from this machine"
fi
