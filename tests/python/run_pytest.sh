#!/usr/bin/env bash
# Runs unit tests of the Python package with Debian's python3 against the INSTALLED prepfs (what a
# training job imports): `meson install -C build` must come first; scripts/test.sh does it.
# conftest.py fails the run (never skips it) when `import prepfs` finds no installed copy, finds
# the source tree, or finds an installed copy that differs from the source.
set -u
if ! /usr/bin/python3 -c 'import pytest' 2>/dev/null; then
  echo "SKIP: /usr/bin/python3 has no pytest (run scripts/install-deps.sh test)" >&2
  exit 77
fi
cd "$(dirname "$0")"
# No __pycache__ left in the source tree by the test modules.
export PYTHONDONTWRITEBYTECODE=1
exec /usr/bin/python3 -m pytest -q -p no:cacheprovider "$@"
