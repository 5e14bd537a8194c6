#!/usr/bin/env bash
# Installs what `make image` needs, from Debian: debootstrap (the base root filesystem, from
# Debian's mirrors: no image registry is needed), buildah (builds the Containerfile without a
# daemon, `--isolation chroot`), umoci (unpacks the OCI layout for the image test) and skopeo
# (copies it to a registry, in the publishing workflow). Needs root for apt; without root it only
# reports what is missing, and `make image` and the image test then say so.
set -euo pipefail

need_apt=()
command -v debootstrap >/dev/null 2>&1 || need_apt+=(debootstrap)
command -v buildah >/dev/null 2>&1 || need_apt+=(buildah)
command -v umoci >/dev/null 2>&1 || need_apt+=(umoci)
command -v skopeo >/dev/null 2>&1 || need_apt+=(skopeo)
# debootstrap checks Debian's signatures (already there on Debian; not on other distributions' CI runners)
[ -f /usr/share/keyrings/debian-archive-keyring.gpg ] || need_apt+=(debian-archive-keyring)

if [ ${#need_apt[@]} -gt 0 ]; then
  if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
    echo "installing Debian packages: ${need_apt[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
  else
    echo "missing image tools (install as root: apt-get install ${need_apt[*]}); make image will fail" >&2
  fi
fi
