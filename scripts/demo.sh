#!/usr/bin/env bash
# The main job, end to end: install what is missing, build, generate a small ImageNet-like
# dataset, serve it through the slow-source simulator (bench/slowfs.cc), mount prepfs over that,
# read it cold and warm, with an order published, as two sharing jobs and through each view, print
# what the source served and what the cache did, and unmount everything (also on failure).
# Run as root on Debian 12:  scripts/demo.sh
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh test
if [ ! -f build/build.ninja ]; then meson setup build >/dev/null; fi
ninja -C build >/dev/null
exec /usr/bin/python3 scripts/demo.py --build build "$@"
