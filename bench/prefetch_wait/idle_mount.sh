#!/usr/bin/env bash
# What a mounted, idle prepfs costs: CPU time and thread wake-ups (voluntary context switches) per
# second over SECONDS, with nothing reading. Usage (root, /dev/fuse):
#   bench/prefetch_wait/idle_mount.sh PREPFS_BIN DATASET_DIR [SECONDS]
set -euo pipefail
bin=$1 data=$2 secs=${3:-10}
work=$(mktemp -d /tmp/prepfs-idle.XXXXXX)
mkdir -p "$work/mnt" "$work/ssd"
"$bin" "$data" "$work/mnt" -f -o "ssd_dir=$work/ssd,log_level=warn" >"$work/log" 2>&1 &
pid=$!
cleanup() {
  kill "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  for m in "$work/mnt/augmented" "$work/mnt/.prepfs" "$work/mnt"; do umount -l "$m" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
for _ in $(seq 100); do [ -e "$work/mnt/.prepfs/stats" ] && break; sleep 0.1; done
sleep 2  # past the mount's own work (index, first plan)
switches() { cat /proc/"$pid"/task/*/status | awk '/^voluntary_ctxt_switches/ {s += $2} END {print s}'; }
ticks() { awk '{print $14 + $15}' /proc/"$pid"/stat; }
w0=$(switches) t0=$(ticks)
sleep "$secs"
w1=$(switches) t1=$(ticks)
hz=$(getconf CLK_TCK)
awk -v t="$((t1 - t0))" -v w="$((w1 - w0))" -v s="$secs" -v hz="$hz" \
  'BEGIN {printf "cpu_ms_per_s %.1f wakeups_per_s %.1f\n", t * 1000 / hz / s, w / s}'
