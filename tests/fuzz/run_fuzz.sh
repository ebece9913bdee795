#!/usr/bin/env bash
# Runs one libFuzzer target for a bounded time, as a meson test (tests/fuzz/meson.build):
#   run_fuzz.sh FUZZER SECONDS WORKDIR SEED_DIR [SEED_FILE...] [-- FUZZER_ARGS...]
# New inputs go to WORKDIR/corpus (kept between runs, so a local tree keeps deepening); the
# committed SEED_DIR and any SEED_FILEs made at build time are read, never written. A crash,
# leak, timeout or out-of-memory fails the test and prints the reproducer (base64) and the
# command that replays it.
set -uo pipefail
fuzzer=$1 seconds=$2 work=$3 seeds=$4
shift 4
seed_files=()
while [ $# -gt 0 ] && [ "$1" != -- ]; do
  seed_files+=("$1")
  shift
done
[ $# -gt 0 ] && shift  # the --
mkdir -p "$work/corpus" "$work/artifacts"
for f in "${seed_files[@]}"; do cp -f "$f" "$work/corpus/"; done
rm -f "$work"/artifacts/*

# Findings must end the run: leaks are real here (the target runs in process), and UBSan stops
# at the first report. The suite's own ASAN_OPTIONS (detect_leaks=0 for killed daemons) do not
# apply.
export ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=0
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1

# Exit status 1 for every finding: libFuzzer's default 77 would read as "skipped" to meson.
"$fuzzer" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -error_exitcode=1 -timeout_exitcode=1 \
  -print_final_stats=1 \
  -artifact_prefix="$work/artifacts/" "$@" "$work/corpus" "$seeds"
status=$?
for a in "$work"/artifacts/*; do
  [ -e "$a" ] || continue
  echo "== reproducer $(basename "$a") ($(stat -c %s "$a") bytes), base64:"
  base64 -w 76 "$a"
  echo "== replay: $fuzzer $a"
done
if [ $status -eq 77 ]; then status=1; fi
if [ $status -ne 0 ]; then
  echo "fuzzer $(basename "$fuzzer") failed with status $status" >&2
fi
exit $status
