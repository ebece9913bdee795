#!/usr/bin/env bash
# The main job, end to end: install what is missing, build, generate a small ImageNet-like
# dataset, serve it through the slow-source simulator (bench/slowfs.cc), mount prepfs over that,
# read it cold and warm, with an order published, as two sharing jobs and through each view, print
# what the source served and what the cache did, and unmount everything (also on failure).
# Run as root on Debian 12:  scripts/demo.sh
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh test
# Quiet when it works; the tail of the log (compiler errors included) when it does not. -Werror as
# scripts/test.sh builds it, so that the two commands share one build directory.
log=$(mktemp /tmp/prepfs-demo-build.XXXXXX.log)
if ! { if [ ! -f build/build.ninja ]; then meson setup build -Dwerror=true; fi && ninja -C build; } >"$log" 2>&1; then
  tail -n 40 "$log" >&2
  echo "prepfs demo: the build failed; the whole log is $log" >&2
  exit 1
fi
rm -f "$log"
exec /usr/bin/python3 scripts/demo.py --build build "$@"
