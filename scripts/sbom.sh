#!/usr/bin/env bash
# The CycloneDX SBOMs (JSON, spec 1.5) of the binaries `kronjob` and `kubectl-kronjob` built for
# one target, from the locked dependencies alone: cargo-cyclonedx reads `cargo metadata`
# offline (nothing is built; a Cargo.lock that is not up to date is an error, and the sources of
# the target's crates are fetched first when cargo has not yet done so).
#
#   scripts/sbom.sh TARGET DIR     e.g. scripts/sbom.sh x86_64-unknown-linux-musl target/image/amd64
#
# writes DIR/kronjob.cdx.json and DIR/kubectl-kronjob.cdx.json. Each lists exactly the crates
# cargo compiles for the binary on TARGET (as `cargo tree` reports them):
#   scope "required": the crates linked into the binary (normal dependencies, proc macros
#     excluded): what runs, and what a vulnerability scanner must match;
#   scope "excluded": the crates that only run while it is built (build scripts and their
#     dependencies such as `cc`, proc macros such as serde_derive and theirs): they shape the
#     binary (generated code, C compiled into it) and belong to its supply chain, but none of
#     their code is in it.
# No dev-dependency, and no crate of another platform. cargo-cyclonedx alone lists more: it
# reads `cargo metadata`, whose resolve unifies features across the workspace and its
# dev-dependencies and counts optional dependencies named only by weak features (`dep?/f`)
# (kube-cel, x509-parser, the idna stack...), none of which the binary links; those are
# dropped, and every crate is scoped as above. The two binaries are one package and share
# its dependency list, as the list `cargo auditable` embeds in them does. SOURCE_DATE_EPOCH
# (the commit's time when unset) makes the files reproducible: no random serial number, a
# fixed timestamp. tests/releases/sbom.rs checks them against `cargo tree`, and the e2e case
# `image` the image's against the list embedded in its binary.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
export PATH="$root/.tools/bin:$PATH"
target=${1:?TARGET, e.g. x86_64-unknown-linux-musl}
out=${2:?DIR to write the SBOMs in}
mkdir -p "$out"

cargo metadata --locked --format-version 1 --filter-platform "$target" >/dev/null
if [ -z "${SOURCE_DATE_EPOCH:-}" ]; then
  SOURCE_DATE_EPOCH=$(git log -1 --format=%ct 2>/dev/null || date +%s)
fi
export SOURCE_DATE_EPOCH CARGO_NET_OFFLINE=true

# cargo-cyclonedx writes beside every workspace member's Cargo.toml: one run at a time, and
# only the product's files are kept.
mkdir -p "$root/target"
exec 9>"$root/target/.sbom.lock"
flock 9
cargo cyclonedx --quiet --format json --spec-version 1.5 --describe binaries --target "$target"
rm -f crates/*/*.cdx.json
tree() {
  cargo tree --locked -p kronjob --target "$target" --prefix none -f '{p}' -e "$1" |
    awk '/^[a-zA-Z0-9_-]+ v/ { print $1, substr($2, 2) }' | sort -u
}
linked=$(tree normal,no-proc-macro)
compiled=$(tree normal,build)
for bin in kronjob kubectl-kronjob; do
  LINKED=$linked COMPILED=$compiled python3 - "${bin}_bin.cdx.json" "$out/$bin.cdx.json" <<'PY'
import json, os, sys
pairs = lambda name: {tuple(l.split()) for l in os.environ[name].splitlines() if l.strip()}
linked, compiled = pairs("LINKED"), pairs("COMPILED")
with open(sys.argv[1]) as f:
    bom = json.load(f)
kept = []
for c in bom["components"]:
    key = (c["name"], c["version"])
    if key in compiled:
        c["scope"] = "required" if key in linked else "excluded"
        kept.append(c)
refs = {c["bom-ref"] for c in kept} | {bom["metadata"]["component"]["bom-ref"]}
bom["components"] = kept
bom["dependencies"] = [
    dict(d, dependsOn=[r for r in d.get("dependsOn", []) if r in refs])
    for d in bom["dependencies"] if d["ref"] in refs
]
with open(sys.argv[2], "w") as f:
    json.dump(bom, f, indent=2)
    f.write("\n")
PY
  rm -f "${bin}_bin.cdx.json"
done
