#!/usr/bin/env bash
# Packages the chart for a release: its version and appVersion the release's, the image its
# defaults run (values.yaml's image.repository, and ArtifactHub's artifacthub.io/images) the
# registry's at that version, its links the forge repository's.
#
#   scripts/package-chart.sh VERSION OWNER/REPO REGISTRY DIR     writes DIR/kronjob-VERSION.tgz
#
# scripts/release.sh runs it; tests/releases/chart.rs checks what it packages.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
version=${1:?VERSION}
repo=${2:?OWNER/REPO of the forge}
registry=${3:?REGISTRY, e.g. ghcr.io/owner}
out=${4:?DIR to write the package in}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp -r config/helm/kronjob "$work/kronjob"
sed -i "s|^  repository: .*|  repository: $registry/kronjob|" "$work/kronjob/values.yaml"
sed -i -e "s|^      image: .*|      image: $registry/kronjob:$version|" \
  -e "s|https://github.com/kronjob/kronjob|https://github.com/$repo|g" "$work/kronjob/Chart.yaml"
mkdir -p "$out"
helm package "$work/kronjob" --version "$version" --app-version "$version" -d "$out" >/dev/null
