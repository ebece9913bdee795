#!/usr/bin/env bash
# Runs one integration test file. Skips loudly (exit 77) when the machine cannot mount FUSE.
set -u
if [ "$(id -u)" -ne 0 ] || [ ! -c /dev/fuse ]; then
  echo "SKIP: integration tests need root and /dev/fuse" >&2
  exit 77
fi
if ! /usr/bin/python3 -c 'import pytest' 2>/dev/null; then
  echo "SKIP: /usr/bin/python3 has no pytest (run scripts/install-deps.sh test)" >&2
  exit 77
fi
cd "$(dirname "$0")"
# -rs: every skipped case says why in the log (scripts/count_tests.py counts it as a skip, and
# fails the run under CI=true).
exec /usr/bin/python3 -m pytest -q -rs -p no:cacheprovider "$@"
