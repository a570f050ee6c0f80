#!/usr/bin/env bash
# Builds a release's files into dist/: for linux/amd64 and linux/arm64 the static (musl)
# binaries `kronjob` (the manager) and `kubectl-kronjob` (the plugin), built by `cargo
# auditable` (their dependency list embedded, checked here), each alone in a .tar.gz, with its
# CycloneDX SBOM (BIN-VERSION-linux-ARCH.cdx.json, scripts/sbom.sh); their SHA256SUMS; the
# chart packaged as kronjob-VERSION.tgz with its version, appVersion and image set
# (scripts/package-chart.sh); the krew manifest of the plugin (dist/kronjob.yaml) pointing at
# the release's download URLs; and the unsigned SLSA provenance statement of all of them,
# provenance.intoto.json (scripts/provenance.py; the release workflow signs it).
#
#   scripts/release.sh VERSION OWNER/REPO [REGISTRY]
#
# e.g. `scripts/release.sh 0.2.0 kronjob/kronjob` (REGISTRY defaults to ghcr.io/<owner>,
# lower-cased). Needs the tools of scripts/install-tools.sh (helm, cargo-auditable,
# cargo-cyclonedx); arm64 on an x86_64 host needs Debian's gcc-aarch64-linux-gnu and
# libc6-dev-arm64-cross (see image.sh).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
export PATH="$root/.tools/bin:$PATH"
BUILD_STARTED_ON=${BUILD_STARTED_ON:-$(date -u +%Y-%m-%dT%H:%M:%SZ)}
export BUILD_STARTED_ON
version=${1:?VERSION, e.g. 0.2.0}
repo=${2:?OWNER/REPO of the forge}
owner=${repo%%/*}
registry=${3:-ghcr.io/${owner,,}}
dist="$root/dist"
rm -rf "$dist"
mkdir -p "$dist"
tag="v$version"
download="https://github.com/$repo/releases/download/$tag"

declare -A triples=([amd64]=x86_64-unknown-linux-musl [arm64]=aarch64-unknown-linux-musl)
for arch in amd64 arm64; do
  target=${triples[$arch]}
  rustup target list --installed | grep -qx "$target" || rustup target add "$target"
  if [ "$arch" = arm64 ] && [ "$(uname -m)" != aarch64 ]; then
    export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_MUSL_LINKER=aarch64-linux-gnu-gcc
    export CC_aarch64_unknown_linux_musl=aarch64-linux-gnu-gcc
    export AR_aarch64_unknown_linux_musl=aarch64-linux-gnu-ar
  fi
  cargo auditable build --release --locked --target "$target" --bin kronjob --bin kubectl-kronjob
  sboms=$(mktemp -d)
  ./scripts/sbom.sh "$target" "$sboms"
  for bin in kronjob kubectl-kronjob; do
    if ! readelf -S -W "target/$target/release/$bin" | grep -q '\.dep-v0'; then
      echo "release: $bin ($arch) has no embedded dependency list (.dep-v0)" >&2
      exit 1
    fi
    work=$(mktemp -d)
    install -m 0755 "target/$target/release/$bin" "$work/$bin"
    tar -czf "$dist/$bin-$version-linux-$arch.tar.gz" -C "$work" .
    rm -rf "$work"
    install -m 0644 "$sboms/$bin.cdx.json" "$dist/$bin-$version-linux-$arch.cdx.json"
  done
  rm -rf "$sboms"
done
(cd "$dist" && sha256sum ./*.tar.gz ./*.cdx.json | sed 's| \./| |' >SHA256SUMS)

# The chart: its version and appVersion the release's, its image the published one.
./scripts/package-chart.sh "$version" "$repo" "$registry" "$dist"

# The krew manifest of the plugin (`kubectl krew install --manifest=kronjob.yaml`).
sha() { grep " $1\$" "$dist/SHA256SUMS" | cut -d' ' -f1; }
{
  cat <<YAML
apiVersion: krew.googlecontainertools.github.com/v1alpha2
kind: Plugin
metadata:
  name: kronjob
spec:
  version: $tag
  homepage: https://github.com/$repo
  shortDescription: List, trigger, suspend and migrate kronjob CronJobs
  description: |
    Works with kronjob's CronJobs (batch.kronjob.dev/v1): list them with their next runs,
    show their history, trigger a run now, suspend and resume them, and migrate batch/v1
    CronJobs to kronjob.
  platforms:
YAML
  for arch in amd64 arm64; do
    file="kubectl-kronjob-$version-linux-$arch.tar.gz"
    cat <<YAML
    - selector:
        matchLabels:
          os: linux
          arch: $arch
      uri: $download/$file
      sha256: $(sha "$file")
      bin: kubectl-kronjob
YAML
  done
} >"$dist/kronjob.yaml"

# What was built, from what, by whom: the statement the workflow signs.
statement=$(cd "$dist" && "$root/scripts/provenance.py" ./*)
echo "$statement" >"$dist/provenance.intoto.json"
ls -l "$dist"
