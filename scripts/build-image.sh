#!/usr/bin/env bash
# `make image`: builds the Containerfile into an OCI image layout, with no Docker daemon and no
# image registry (neither exists on the development machines or in CI).
#
#   base   `debootstrap --variant=minbase bookworm` from Debian's mirrors, trimmed, imported into
#          buildah's local storage as localhost/fleetslo-base (the Containerfile's BASE build
#          argument; a registry build uses debian:bookworm-slim, the same release).
#   wheels every dependency's wheel (wheels/deps, rebuilt only when pyproject.toml changes) and
#          the fleetslo wheel (wheels/app), so the build needs no package index.
#   build  `buildah bud --layers --isolation chroot`: the Containerfile as written; its layers are
#          cached in buildah's storage.
#   export an OCI image layout at .image/oci (tag = the package version), which umoci unpacks
#          (tests/integration/test_image.py) and skopeo copies to a registry.
#
# Everything is cached under .image/ and keyed on its inputs: a second run with nothing changed
# returns at once. Needs root (debootstrap, buildah's chroot isolation).
# Env: IMAGE_CACHE (default .image), IMAGE_NAME (default localhost/fleetslo), DEBIAN_MIRROR.
set -euo pipefail
cd "$(dirname "$0")/.."

CACHE=${IMAGE_CACHE:-.image}
NAME=${IMAGE_NAME:-localhost/fleetslo}
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
SUITE=bookworm
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] && PY=.venv/bin/python
VERSION=$(sed -n 's/^__version__ = "\(.*\)"$/\1/p' controller/fleetslo/__init__.py)

if [ "$(id -u)" != "0" ]; then
  echo "make image needs root (debootstrap and buildah's chroot isolation); run it as root" >&2
  exit 1
fi
bash scripts/install-image-tools.sh
mkdir -p "$CACHE"

hash_of() { sha256sum "$@" | sha256sum | cut -c1-16; }
sources() { find controller -type f \( -name '*.py' -o -name '*.yaml' -o -name '*.txt' -o -name 'py.typed' \) \
              -not -path '*/__pycache__/*' -not -path '*.egg-info/*' | LC_ALL=C sort; }

# What each stage depends on: the base on this script's recipe for it, the deps on pyproject.toml,
# the image on everything that goes into it.
BASE_KEY=$(echo "$SUITE $MIRROR minbase v1" | sha256sum | cut -c1-16)
DEPS_KEY=$(hash_of pyproject.toml)
IMAGE_KEY=$( (echo "$BASE_KEY $DEPS_KEY"; hash_of Containerfile scripts/build-image.sh $(sources)) | sha256sum | cut -c1-16)
BASE_IMAGE=localhost/fleetslo-base:$SUITE-$BASE_KEY

if [ -f "$CACHE/oci.key" ] && [ "$(cat "$CACHE/oci.key")" = "$IMAGE_KEY" ] && [ -f "$CACHE/oci/index.json" ]; then
  echo "image $NAME:$VERSION is up to date ($CACHE/oci, key $IMAGE_KEY)"
  exit 0
fi

# --- base: a minimal Debian root filesystem, once per recipe --------------------------------------
if ! buildah inspect --type image "$BASE_IMAGE" >/dev/null 2>&1; then
  rootfs=$(mktemp -d "$CACHE/rootfs.XXXXXX")
  trap 'rm -rf "$rootfs"' EXIT
  echo "debootstrap $SUITE (minbase) from $MIRROR"
  debootstrap --variant=minbase "$SUITE" "$rootfs" "$MIRROR" >"$CACHE/debootstrap.log" 2>&1 \
    || { tail -20 "$CACHE/debootstrap.log" >&2; exit 1; }
  # What debian:bookworm-slim leaves out too: package caches, docs, man pages, translations.
  rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/cache/apt/*.bin "$rootfs"/var/lib/apt/lists/* \
         "$rootfs"/usr/share/doc/* "$rootfs"/usr/share/man/* "$rootfs"/usr/share/info/* "$rootfs"/var/log/*
  find "$rootfs/usr/share/locale" -mindepth 1 -maxdepth 1 ! -name 'locale.alias' -exec rm -rf {} +
  printf 'deb %s %s main\ndeb %s %s-updates main\ndeb http://deb.debian.org/debian-security %s-security main\n' \
    "$MIRROR" "$SUITE" "$MIRROR" "$SUITE" "$SUITE" >"$rootfs/etc/apt/sources.list"
  ctr=$(buildah from scratch)
  buildah copy --quiet "$ctr" "$rootfs" / >/dev/null
  buildah config --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin --cmd /bin/bash "$ctr"
  buildah commit --quiet --rm "$ctr" "$BASE_IMAGE" >/dev/null
  rm -rf "$rootfs"; trap - EXIT
fi

# --- wheels ---------------------------------------------------------------------------------------
ctx="$CACHE/context"
mkdir -p "$ctx/wheels"
if [ "$(cat "$ctx/wheels/deps.key" 2>/dev/null)" != "$DEPS_KEY" ]; then
  rm -rf "$ctx/wheels/deps" && mkdir -p "$ctx/wheels/deps"
  echo "wheels of the dependencies"
  # (pip's notes about index folders that lack a package are noise here; errors still show)
  "$PY" -m pip wheel -q --disable-pip-version-check -w "$ctx/wheels/deps" \
    $("$PY" -c 'import tomllib; print(" ".join(tomllib.load(open("pyproject.toml","rb"))["project"]["dependencies"]))') \
    2> >(grep -v "is ignored: it is neither a file nor a directory" >&2)
  echo "$DEPS_KEY" >"$ctx/wheels/deps.key"
fi
rm -rf "$ctx/wheels/app" build && mkdir -p "$ctx/wheels/app"
"$PY" -m pip wheel -q --disable-pip-version-check --no-deps --no-build-isolation -w "$ctx/wheels/app" . >/dev/null
rm -rf build controller/*.egg-info
cp Containerfile "$ctx/Containerfile"

# --- build and export -----------------------------------------------------------------------------
echo "buildah bud $NAME:$VERSION (base $BASE_IMAGE)"
buildah bud --quiet --layers --isolation chroot --pull=never --build-arg "BASE=$BASE_IMAGE" \
  -f "$ctx/Containerfile" -t "$NAME:$VERSION" "$ctx" >/dev/null
rm -rf "$CACHE/oci"
buildah push --quiet "$NAME:$VERSION" "oci:$CACHE/oci:$VERSION" >/dev/null
echo "$IMAGE_KEY" >"$CACHE/oci.key"
echo "image $NAME:$VERSION built: $CACHE/oci (tag $VERSION), $(du -sh "$CACHE/oci" | cut -f1) compressed on disk"
