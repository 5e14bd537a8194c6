#!/usr/bin/env bash
# Copies the generated alert rules, Alertmanager config and dashboards into the Helm chart, which
# embeds them with .Files.Get (a chart cannot read files outside its folder). Run after
# `fleetslo alerts build` / `fleetslo dashboards build`; tests/helm fails while the copies drift.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
CHART="$ROOT/helm/fleetslo/files"
sync() {  # sync SRC_DIR DEST_DIR GLOB
  mkdir -p "$2"
  find "$2" -maxdepth 1 -type f -name "$3" -delete
  cp "$1"/$3 "$2"/
}
sync "$ROOT/alerts/generated" "$CHART/alerts" '*.yaml'
sync "$ROOT/dashboards/generated" "$CHART/dashboards" '*.json'
echo "copied $(ls "$CHART/alerts" | wc -l) alert files and $(ls "$CHART/dashboards" | wc -l) dashboards into $CHART"
