#!/usr/bin/env bash
# Installs the Debian 12 packages prepfs needs. Idempotent: apt is only called for what is missing.
#   scripts/install-deps.sh build   # compile the daemon
#   scripts/install-deps.sh test    # build + everything the test suite runs against
#   scripts/install-deps.sh bench   # test + the peers and photographs the benchmarks use
set -euo pipefail
what=${1:-build}

build_pkgs=(build-essential meson ninja-build pkg-config
  libfuse3-dev fuse3 liburing-dev libxxhash-dev libspdlog-dev libcli11-dev libgtest-dev
  libsystemd-dev libjpeg62-turbo-dev libturbojpeg0-dev libhwy-dev libmicrohttpd-dev libcurl4-openssl-dev
  libmemcached-dev)
# clang-14 and libclang-rt-14-dev (libFuzzer, ASan and UBSan runtimes) build tests/fuzz.
test_pkgs=(python3 python3-pytest python3-hypothesis python3-pil python3-numpy python3-torch python3-torchvision
  attr groff-base python3-prometheus-client systemd curl clang-14 libclang-rt-14-dev iproute2 util-linux memcached
  procps)  # pgrep and pkill (test_cli, test_service): not on a minimal image
bench_pkgs=(python3-matplotlib s3fs rclone valgrind)

pkgs=("${build_pkgs[@]}")
case "$what" in
  build) ;;
  test) pkgs+=("${test_pkgs[@]}") ;;
  bench) pkgs+=("${test_pkgs[@]}" "${bench_pkgs[@]}") ;;
  *) echo "usage: $0 build|test|bench" >&2; exit 2 ;;
esac

missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
# The S3 tests install s3rver with npm. Judge node and npm by the commands, not the packages:
# a NodeSource nodejs provides npm itself and conflicts with Debian's npm package.
if [ "$what" != build ] && ! command -v npm >/dev/null 2>&1; then
  missing+=(nodejs npm)
fi
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "prepfs: missing packages: ${missing[*]} (run this script as root to install them)" >&2
  exit 1
fi
echo "prepfs: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
# A fresh VM may still be running apt (cloud-init, unattended-upgrades): wait for its lock rather
# than fail at once.
apt-get -o DPkg::Lock::Timeout=600 update -q >/dev/null
apt-get -o DPkg::Lock::Timeout=600 install -y -q --no-install-recommends "${missing[@]}" >/dev/null
