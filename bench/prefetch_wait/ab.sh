#!/usr/bin/env bash
# Old vs new side by side (bench/prefetch_wait/README.md): ROUNDS rounds, the two builds alternated
# and which goes first rotated each round; per round prepfs-prefetchwait (idle and waiting) and
# idle_mount.sh for each build. Prints the load average before and after and the machine's busy
# share over the run (/proc/stat). Usage (root, /dev/fuse):
#   bench/prefetch_wait/ab.sh OLD_BUILD_DIR NEW_BUILD_DIR DATASET_DIR [ROUNDS]
# A build dir holds bench/prepfs-prefetchwait and tools/prepfs.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
old=$1 new=$2 data=$3 rounds=${4:-3}
busy() { awk '/^cpu / {print $2 + $3 + $4 + $7 + $8, $2 + $3 + $4 + $5 + $6 + $7 + $8}' /proc/stat; }
echo "# $(date -u +%FT%TZ) $(nproc) cores, $(uname -r); load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
read -r b0 t0 < <(busy)
for r in $(seq "$rounds"); do
  if [ $((r % 2)) -eq 1 ]; then order="old new"; else order="new old"; fi
  for v in $order; do
    dir=$old; [ "$v" = new ] && dir=$new
    "$dir/bench/prepfs-prefetchwait" "$data" --rounds 1 --seconds 3 --cache "/var/tmp/prepfs-pw-$v" |
      awk -v v="$v" -v r="$r" 'NR > 1 {print v, r, "prefetchwait", $2, "waiting_tasks", $3, "cpu_ms_per_s", $4}'
    echo "$v $r idle_mount $("$here/idle_mount.sh" "$dir/tools/prepfs" "$data" 10)"
  done
done
read -r b1 t1 < <(busy)
echo "# load average at end: $(cut -d' ' -f1-3 /proc/loadavg); machine busy $(awk -v b=$((b1 - b0)) -v t=$((t1 - t0)) 'BEGIN {printf "%.0f%%", 100 * b / t}') over the run"
