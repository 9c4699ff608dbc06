#!/usr/bin/env bash
# A Debian bookworm base image with python3 (3.11) and python3-venv, for building the Containerfile where no
# container registry is reachable (air-gapped sites, tests/operations/test_image.py; docs/container.md).
#
#   bash scripts/container_base.sh [NAME]      # default NAME: localhost/statestore-admin-base:bookworm
#
# The root file system is made once with debootstrap and kept as a tarball in ~/.cache/statestore-admin; each call
# imports it (podman import) and adds this machine's CA bundle and a pip.conf naming it (and the machine's package
# index, when one is configured), so that pip in the image's build reaches the package index the machine reaches.
# CONTAINER_ENGINE: the engine, as in `make image` (default: podman with runc on vfs storage).
set -euo pipefail

name=${1:-localhost/statestore-admin-base:bookworm}
engine=${CONTAINER_ENGINE:-podman --runtime runc --storage-driver vfs}
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
cache=${XDG_CACHE_HOME:-$HOME/.cache}/statestore-admin
tarball=$cache/debian-bookworm-python3.tar
ca_bundle=${SSL_CERT_FILE:-/etc/ssl/certs/ca-certificates.crt}

if [ ! -s "$tarball" ]; then
  command -v debootstrap >/dev/null || {
    echo "debootstrap is missing: apt-get install -y debootstrap" >&2
    exit 1
  }
  mkdir -p "$cache"
  root=$(mktemp -d -t statestore-base-XXXXXX)
  trap 'rm -rf "$root"' EXIT
  chmod 0755 "$root" # the image's / (mktemp makes it 0700: no user but root could reach a file)
  debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates bookworm "$root" "$mirror" >&2
  # Nothing of apt's downloads or lists: the image never installs packages.
  rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
  tar -C "$root" --numeric-owner -c . >"$tarball.partial"
  mv "$tarball.partial" "$tarball"
fi

context=$(mktemp -d -t statestore-base-context-XXXXXX)
trap 'rm -rf "$context"' EXIT
cp "$ca_bundle" "$context/ca-certificates.crt"
index=${PIP_INDEX_URL:-$(python3 -m pip config get global.index-url 2>/dev/null || true)}
{
  echo "[global]"
  echo "cert = /etc/ssl/certs/ca-certificates.crt"
  # A local (file://) index of this machine is not in the image; an http(s) one is reached from the build.
  case $index in http://* | https://*) echo "index-url = $index" ;; esac
} >"$context/pip.conf"
cat >"$context/Containerfile" <<'EOF'
FROM localhost/statestore-admin-base-rootfs:bookworm
COPY ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY pip.conf /etc/pip.conf
CMD ["python3"]
EOF
$engine import --quiet "$tarball" localhost/statestore-admin-base-rootfs:bookworm >/dev/null
$engine build --quiet --format docker --network host -t "$name" "$context" >/dev/null
echo "$name"
