#!/usr/bin/env bash
# The whole test suite, as CI runs it (.ci/run calls exactly this):
#   1. installs what the build and the tests need (Debian 12 packages),
#   2. builds twice: a -Werror release build, and an address+undefined sanitizer build,
#   3. runs unit and real-mount integration tests on both,
#   4. builds the libFuzzer targets with clang (build-fuzz: the parsers only) and runs each for a
#      minute from its seed corpus (tests/fuzz/README.md),
#   5. prints one closing line: "tests: N passed, N failed, N skipped", counting test cases.
set -euo pipefail
cd "$(dirname "$0")/.."
top=$(pwd)

scripts/install-deps.sh test

configure() {  # dir, extra meson args...
  local dir=$1; shift
  if [ ! -f "$dir/build.ninja" ]; then
    meson setup "$dir" -Dwerror=true "$@" >/dev/null
  else
    meson configure "$dir" -Dwerror=true "$@" >/dev/null  # one made otherwise is -Werror from now on
  fi
}
configure build
configure build-asan -Db_sanitize=address,undefined -Db_lundef=false -Dbuildtype=debug
CXX=clang++-14 configure build-fuzz -Dfuzz=true
ninja -C build
ninja -C build-asan
ninja -C build-fuzz
# The Python package's tests (tests/python) import the installed copy, as a training job does;
# they fail if it is missing or differs from the source. Only the package is installed here.
if [ "$(id -u)" -eq 0 ]; then
  meson install -C build --no-rebuild --tags python-runtime >/dev/null
else
  echo "prepfs: not root, so the Python package is not installed; tests/python fail unless it is" >&2
fi

# A leak at exit of a daemon killed mid-request is not a bug worth failing on; a bad access is.
# (The unit tests turn leak checks back on: tests/unit/meson.build.)
export ASAN_OPTIONS=detect_leaks=0:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1

status=0
for dir in build build-asan build-fuzz; do
  echo "== tests in $dir"
  meson test -C "$dir" --print-errorlogs --num-processes 2 || status=1
done

# One closing line over the three builds: test cases (gtest and pytest cases), not meson entries.
# Under CI=true a skipped case fails the run too (everything the tests need is installed above).
scripts/count_tests.py build build-asan build-fuzz || status=1
exit $status
