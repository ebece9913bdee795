#!/bin/bash
# Warm-RAM raw/ reads, two prepfs binaries side by side in one run (A/B): same dataset, same
# options, mounts alternated so that load from other work hits both alike.
#
#   bench/regress/warm_ram_ab.sh OLD_PREPFS NEW_PREPFS READBENCH [ROUNDS]   (as root)
#
# Each round mounts A, reads every file once (fills RAM), then measures one pass with
# prepfs-readbench (8 threads) after dropping the kernel's page cache (so every read reaches the
# daemon and is answered from its RAM tier) and the daemon's CPU seconds over it; then B.
# Prints one line per measurement and a median summary (files/s, daemon CPU us per file).
set -euo pipefail
A=$1 B=$2 RB=$3 ROUNDS=${4:-3}
WORK=${WORK:-/tmp/prepfs-ab}
PY=/usr/bin/python3
HERE=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$WORK"
[ -d "$WORK/src" ] || $PY "$HERE/gen_dataset.py" "$WORK/src" --classes 4 --per-class 250 --synthetic >/dev/null
FILES=$(find "$WORK/src" -type f | wc -l)
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
  local cpu_us; cpu_us=$($PY -c "print(($t1-$t0)/100*1e6/$FILES)")
  echo "$name files/s=$fps daemon_cpu_us_per_file=$cpu_us"
}
for r in $(seq "$ROUNDS"); do measure A "$A"; measure B "$B"; done | tee "$WORK/ab.txt"
$PY - "$WORK/ab.txt" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
for name in ("A", "B"):
    fps = [float(r[1].split("=")[1]) for r in rows if r[0] == name]
    cpu = [float(r[2].split("=")[1]) for r in rows if r[0] == name]
    print(f"{name}: median {statistics.median(fps):.0f} files/s (runs {', '.join(f'{x:.0f}' for x in fps)}), "
          f"daemon CPU {statistics.median(cpu):.1f} us/file")
PY
