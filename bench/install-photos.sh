#!/bin/sh
# Installs Debian packages that ship real photographs, which bench/gen_dataset.py crops into an
# ImageNet-like dataset. Idempotent: packages already installed are left alone.
# All five exist in Debian 12 (bookworm), checked with `apt-cache policy`; the total download is
# about 260 MB. A package missing from the configured archive is skipped with a warning.
set -eu

PACKAGES="mate-backgrounds lomiri-wallpapers-16.04 lomiri-wallpapers-20.04 plasma-workspace-wallpapers opencv-doc"

if [ "$(id -u)" -ne 0 ]; then
  echo "install-photos.sh: must run as root (it calls apt-get install)" >&2
  exit 1
fi

missing=""
for pkg in $PACKAGES; do
  if dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
    continue
  fi
  missing="$missing $pkg"
done

if [ -z "$missing" ]; then
  echo "install-photos.sh: all photo packages already installed"
  exit 0
fi

# Refresh the package lists only if this archive does not know the packages yet.
available=""
for pkg in $missing; do
  if ! apt-cache policy "$pkg" 2>/dev/null | grep -q '^ *Candidate: [^(]'; then
    apt-get update -q
    break
  fi
done
for pkg in $missing; do
  if apt-cache policy "$pkg" 2>/dev/null | grep -q '^ *Candidate: [^(]'; then
    available="$available $pkg"
  else
    echo "install-photos.sh: warning: $pkg is not available from the configured archives, skipped" >&2
  fi
done

if [ -n "$available" ]; then
  # shellcheck disable=SC2086  # word splitting of the package list is intended
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $available
fi
echo "install-photos.sh: done"
