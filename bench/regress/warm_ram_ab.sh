#!/bin/bash
# Warm-RAM raw/ reads, two prepfs binaries side by side in one run (A/B): same dataset, same
# options, mounts alternated so that load from other work hits both alike.
#
#   bench/regress/warm_ram_ab.sh OLD_PREPFS NEW_PREPFS READBENCH [ROUNDS]   (as root)
#
# Each round mounts A, reads every file once (fills RAM), then measures one pass with
# prepfs-readbench (8 threads) after dropping the kernel's page cache (so every read reaches the
# daemon and is answered from its RAM tier) and the daemon's CPU seconds over it; then B. The
# order alternates: A then B in odd rounds, B then A in even ones.
# Prints one line per measurement and a median summary (files/s, daemon CPU us per file). The
# daemon's CPU comes from /proc/PID/stat in clock ticks (getconf CLK_TCK, 100 on most kernels): one
# tick over the 1,000 files is 10 us per file at 100 Hz, so the CPU column resolves 10 us per file
# and a value of 30-40 us is 3-4 ticks. The summary prints the resolution.
set -euo pipefail
A=$1 B=$2 RB=$3 ROUNDS=${4:-3}
WORK=${WORK:-/tmp/prepfs-ab}
PY=/usr/bin/python3
HERE=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$WORK"
[ -d "$WORK/src" ] || $PY "$HERE/gen_dataset.py" "$WORK/src" --classes 4 --per-class 250 --synthetic >/dev/null
FILES=$(find "$WORK/src" -type f | wc -l)
HZ=$(getconf CLK_TCK)
measure() {  # name binary
  local name=$1 bin=$2 mnt=$WORK/mnt-$1
  mkdir -p "$mnt"
  rm -rf "$WORK/ssd-$name"
  "$bin" "$WORK/src" "$mnt" -f -o ram=2G,ssd=0,ssd_dir=$WORK/ssd-$name,log_level=warn & local pid=$!
  for _ in $(seq 100); do [ -f "$mnt/.prepfs/stats" ] && break; sleep 0.1; done
  "$RB" --threads 8 --passes 1 "$mnt/raw" >/dev/null           # fill
  sync; echo 1 > /proc/sys/vm/drop_caches
  local t0; t0=$(awk '{print $14+$15}' /proc/$pid/stat)
  local out; out=$("$RB" --threads 8 --passes 1 --json "$mnt/raw")
  local t1; t1=$(awk '{print $14+$15}' /proc/$pid/stat)
  kill $pid; wait $pid 2>/dev/null || true
  umount -R "$mnt" 2>/dev/null || true
  local fps; fps=$($PY -c "import json,sys; print(json.loads(sys.argv[1])['total']['files_per_s'])" "$out")
  local cpu_us; cpu_us=$($PY -c "print(($t1-$t0)/$HZ*1e6/$FILES)")
  echo "$name files/s=$fps daemon_cpu_us_per_file=$cpu_us daemon_cpu_ticks=$((t1 - t0))"
}
for r in $(seq "$ROUNDS"); do
  if ((r % 2)); then measure A "$A"; measure B "$B"; else measure B "$B"; measure A "$A"; fi
done | tee "$WORK/ab.txt"
$PY - "$WORK/ab.txt" "$HZ" "$FILES" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
hz, files = int(sys.argv[2]), int(sys.argv[3])
print(f"daemon CPU resolution: 1 tick ({1e3 / hz:g} ms at CLK_TCK {hz}) over {files} files = "
      f"{1e6 / hz / files:.1f} us/file; differences smaller than that are not measured")
for name in ("A", "B"):
    fps = [float(r[1].split("=")[1]) for r in rows if r[0] == name]
    cpu = [float(r[2].split("=")[1]) for r in rows if r[0] == name]
    print(f"{name}: median {statistics.median(fps):.0f} files/s (runs {', '.join(f'{x:.0f}' for x in fps)}), "
          f"daemon CPU {statistics.median(cpu):.1f} us/file")
PY
