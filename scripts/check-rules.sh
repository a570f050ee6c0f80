#!/usr/bin/env bash
# Checks the chart's alerting rules with promtool: renders templates/prometheusrule.yaml with
# the chart's default values (plus the toggle), keeps its `spec` (a Prometheus rule file), then
# runs `promtool check rules` on it and `promtool test rules` on config/prometheus/tests.yaml.
set -euo pipefail
if ! command -v promtool >/dev/null 2>&1; then
  echo "check-rules: promtool not found: run ./scripts/install-tools.sh" >&2
  exit 1
fi
root=$(cd "$(dirname "$0")/.." && pwd)
chart="$root/config/helm/kronjob"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

helm template kronjob "$chart" --namespace kronjob-system \
  --show-only templates/prometheusrule.yaml \
  --set metrics.prometheusRule.enabled=true >"$work/rendered.yaml"
# The template keeps `spec:` last: everything after it, one level less indented.
sed -n '/^spec:$/,$p' "$work/rendered.yaml" | tail -n +2 | sed 's/^  //' >"$work/kronjob.rules.yaml"
if ! grep -q '^groups:$' "$work/kronjob.rules.yaml"; then
  echo "check-rules: no rule groups in the rendered PrometheusRule" >&2
  exit 1
fi
cp "$root/config/prometheus/tests.yaml" "$work/tests.yaml"
promtool check rules "$work/kronjob.rules.yaml"
(cd "$work" && promtool test rules tests.yaml)
