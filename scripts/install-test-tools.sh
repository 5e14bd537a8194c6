#!/usr/bin/env bash
# Installs the external tools the test suite runs for real: Prometheus and promtool, Alertmanager
# and amtool, and headless Chromium for screenshots of reports (Debian packages). Needs root for apt; without root it only reports what is missing,
# and the tests that need a missing tool fail with a message saying how to install it.
set -euo pipefail

need_apt=()
command -v prometheus >/dev/null 2>&1 || need_apt+=(prometheus)
command -v promtool >/dev/null 2>&1 || need_apt+=(prometheus)
command -v amtool >/dev/null 2>&1 || need_apt+=(prometheus-alertmanager)
command -v chromium >/dev/null 2>&1 || need_apt+=(chromium)

if [ ${#need_apt[@]} -gt 0 ]; then
  if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
    echo "installing Debian packages: ${need_apt[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
  else
    echo "missing tools (install as root: apt-get install ${need_apt[*]}); their tests will fail" >&2
  fi
fi
