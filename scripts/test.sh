#!/usr/bin/env bash
# The whole test suite, as CI runs it (.ci/run calls exactly this):
#   1. installs what the build and the tests need (Debian 12 packages),
#   2. builds twice: a -Werror release build, and an address+undefined sanitizer build,
#   3. runs unit and real-mount integration tests on both,
#   4. builds the libFuzzer targets with clang (build-fuzz: the parsers only) and runs each for a
#      minute from its seed corpus (tests/fuzz/README.md),
#   5. prints one closing line: "tests: N passed, N failed, N skipped".
set -euo pipefail
cd "$(dirname "$0")/.."
top=$(pwd)

scripts/install-deps.sh test

configure() {  # dir, extra meson args...
  local dir=$1; shift
  if [ ! -f "$dir/build.ninja" ]; then
    meson setup "$dir" -Dwerror=true "$@" >/dev/null
  fi
}
configure build
configure build-asan -Db_sanitize=address,undefined -Db_lundef=false -Dbuildtype=debug
CXX=clang++-14 configure build-fuzz -Dfuzz=true
ninja -C build
ninja -C build-asan
ninja -C build-fuzz

# A leak at exit of a daemon killed mid-request is not a bug worth failing on; a bad access is.
export ASAN_OPTIONS=detect_leaks=0:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1

status=0
for dir in build build-asan build-fuzz; do
  echo "== tests in $dir"
  meson test -C "$dir" --print-errorlogs --num-processes 2 || status=1
done

# One closing line over the three builds, from meson's machine-readable logs.
/usr/bin/python3 - "$top" <<'PY'
import json, sys
passed = failed = skipped = 0
for d in ("build", "build-asan", "build-fuzz"):
    with open(f"{sys.argv[1]}/{d}/meson-logs/testlog.json") as f:
        for line in f:
            r = json.loads(line)["result"]
            if r in ("OK", "EXPECTEDFAIL"):
                passed += 1
            elif r == "SKIP":
                skipped += 1
            else:
                failed += 1
print(f"tests: {passed} passed, {failed} failed, {skipped} skipped")
PY
exit $status
