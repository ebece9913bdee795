#!/usr/bin/env bash
# The main job, end to end: install what is missing, build, generate a small ImageNet-like
# dataset, mount it with prepfs, read it through each view, print what was served from where,
# and unmount. Run as root on Debian 12:  scripts/demo.sh
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh test
if [ ! -f build/build.ninja ]; then meson setup build >/dev/null; fi
ninja -C build >/dev/null
exec /usr/bin/python3 scripts/demo.py --build build "$@"
