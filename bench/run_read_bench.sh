#!/bin/bash
# Read benchmark: prepfs against the source it caches, side by side, in one run.
#
#   bench/run_read_bench.sh [BUILD_DIR]        (default BUILD_DIR: /work/main/build; run as root)
#
# Two sources hold the same generated dataset (bench/gen_dataset.py):
#   local  the dataset directory itself (page cache warm: the physical limit of this machine)
#   slow   the same directory behind prepfs-slowfs, a simulated NFS-like remote (see SLOW_* below)
# For each source and each thread count in THREADS_LIST, prepfs-readbench measures:
#   direct    the source read directly
#   cold      prepfs freshly mounted over the source, empty cache: first epoch
#   warm-ram  the same mount, next epochs (everything cached in RAM)
#   warm-ssd  prepfs remounted with ram=0 over the same ssd_dir, after drop_caches: SSD tier only
# Results go to bench/results/read_bench.md (table, ratios vs direct, raw JSON, machine info).
# Environment overrides: WORK, CLASSES, PER_CLASS, SEED, THREADS_LIST, WARM_PASSES, RAM, SSD,
# SLOW_OPEN_MS, SLOW_READ_MS, SLOW_META_MS, SLOW_MBPS, PREPFS_BIN, OUT.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
BUILD=$(cd "${1:-/work/main/build}" && pwd)
PREPFS=${PREPFS_BIN:-$BUILD/tools/prepfs}
SLOWFS=$BUILD/bench/prepfs-slowfs
READBENCH=$BUILD/bench/prepfs-readbench
PY=/usr/bin/python3

WORK=$(realpath -m "${WORK:-/tmp/prepfs-read-bench}")
CLASSES=${CLASSES:-20}
PER_CLASS=${PER_CLASS:-250}      # 20 x 250 = 5,000 JPEGs, ~550 MB
SEED=${SEED:-1}
THREADS_LIST=${THREADS_LIST:-"8 32"}
WARM_PASSES=${WARM_PASSES:-3}    # warm cases average this many epochs
RAM=${RAM:-2G}
SSD=${SSD:-10G}
# The simulated remote: an NFS-like share with 2 ms per open (LOOKUP/OPEN/GETATTR round trips),
# 1 ms per read RPC, 0.2 ms per metadata call, and 200 MB/s (~1.6 Gbit/s) for all clients together.
SLOW_OPEN_MS=${SLOW_OPEN_MS:-2}
SLOW_READ_MS=${SLOW_READ_MS:-1}
SLOW_META_MS=${SLOW_META_MS:-0.2}
SLOW_MBPS=${SLOW_MBPS:-200}
OUT=${OUT:-$HERE/results/read_bench.md}

READY_TIMEOUT_S=20
STOP_TIMEOUT_S=15
BENCH_TIMEOUT_S=${BENCH_TIMEOUT_S:-900}  # a hung mount must not hang the whole run

DATASET=$WORK/dataset
SLOW_MNT=$WORK/slow-mnt
MNT=$WORK/prepfs-mnt
SSD_DIR=$WORK/ssd
RESULTS=$WORK/results.jsonl
PREPFS_PID=""
SLOWFS_PID=""
SHUFFLE_SEED=$SEED

log() { echo "[read-bench] $*" >&2; }
die() { log "error: $*"; exit 1; }

# Mounts at or below DIR, deepest first. Read from mountinfo: stat-based checks (mountpoint(1))
# fail on a dead FUSE mount and block on one whose daemon has not answered INIT.
mounts_under() {
  awk -v d="$1" '$5 == d || index($5, d "/") == 1 { print $5 }' /proc/self/mountinfo | sort -r
}

unmount() {  # detach DIR and anything mounted below it (lazily, without touching the mount)
  local m
  for m in $(mounts_under "$1"); do
    timeout -s KILL 10 umount -l -c "$m" 2>/dev/null || log "warning: could not unmount $m"
  done
}

wait_gone() {  # wait_gone PID SECONDS: 0 once the process has exited
  local pid=$1 deadline=$((SECONDS + $2))
  while kill -0 "$pid" 2>/dev/null; do
    ((SECONDS < deadline)) || return 1
    sleep 0.1
  done
}

stop_prepfs() {
  if [[ -n $PREPFS_PID ]]; then
    kill -TERM "$PREPFS_PID" 2>/dev/null || true
    if ! wait_gone "$PREPFS_PID" "$STOP_TIMEOUT_S"; then
      log "prepfs did not exit ${STOP_TIMEOUT_S}s after SIGTERM; killing it"
      kill -KILL "$PREPFS_PID" 2>/dev/null || true
    fi
    wait "$PREPFS_PID" 2>/dev/null || true
    PREPFS_PID=""
  fi
  unmount "$MNT"
}

stop_slowfs() {
  if [[ -n $SLOWFS_PID ]]; then
    kill -TERM "$SLOWFS_PID" 2>/dev/null || true
    wait_gone "$SLOWFS_PID" "$STOP_TIMEOUT_S" || kill -KILL "$SLOWFS_PID" 2>/dev/null || true
    wait "$SLOWFS_PID" 2>/dev/null || true
    SLOWFS_PID=""
  fi
  unmount "$SLOW_MNT"
}

cleanup() {
  stop_prepfs
  stop_slowfs
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# start_prepfs SOURCE RAM: mounts prepfs at $MNT in the background; sets MOUNT_SECONDS.
start_prepfs() {
  local source=$1 ram=$2 start end
  unmount "$MNT"
  mkdir -p "$MNT" "$SSD_DIR"
  start=$(date +%s.%N)
  "$PREPFS" "$source" "$MNT" -f -o "ram=$ram,ssd=$SSD,ssd_dir=$SSD_DIR,log_level=warn" \
    >>"$WORK/prepfs.log" 2>&1 &
  PREPFS_PID=$!
  local deadline=$((SECONDS + READY_TIMEOUT_S))
  # The probe runs in a killable child: a stat on a mount whose daemon is stuck would block us.
  until timeout -s KILL 2 /usr/bin/test -e "$MNT/.prepfs/stats"; do
    if ! kill -0 "$PREPFS_PID" 2>/dev/null; then
      wait "$PREPFS_PID" 2>/dev/null || true
      PREPFS_PID=""
      unmount "$MNT"
      log "prepfs exited before becoming ready (see $WORK/prepfs.log)"
      return 1
    fi
    if ((SECONDS >= deadline)); then
      log "prepfs not ready after ${READY_TIMEOUT_S}s (see $WORK/prepfs.log)"
      stop_prepfs
      return 1
    fi
    sleep 0.05
  done
  end=$(date +%s.%N)
  MOUNT_SECONDS=$($PY -c "print(f'{$end - $start:.3f}')")
}

start_slowfs() {
  mkdir -p "$SLOW_MNT"
  unmount "$SLOW_MNT"
  "$SLOWFS" "$DATASET" "$SLOW_MNT" -f --open-latency-ms "$SLOW_OPEN_MS" \
    --read-latency-ms "$SLOW_READ_MS" --meta-latency-ms "$SLOW_META_MS" \
    --bandwidth-mbps "$SLOW_MBPS" --threads 64 >>"$WORK/slowfs.log" 2>&1 &
  SLOWFS_PID=$!
  local deadline=$((SECONDS + 10))
  until [[ -n $(mounts_under "$SLOW_MNT") ]]; do
    kill -0 "$SLOWFS_PID" 2>/dev/null || die "prepfs-slowfs failed to start (see $WORK/slowfs.log)"
    ((SECONDS < deadline)) || die "prepfs-slowfs not mounted after 10s"
    sleep 0.05
  done
}

slowfs_stats() { $PY -c "import os,sys; print(os.getxattr(sys.argv[1], 'user.slowfs.stats').decode())" "$SLOW_MNT"; }
slowfs_reset() { $PY -c "import os,sys; os.setxattr(sys.argv[1], 'user.slowfs.reset', b'1')" "$SLOW_MNT"; }

# record SOURCE THREADS CASE PATH PASSES [NOTE]: runs prepfs-readbench, appends one JSON line.
record() {
  local source=$1 threads=$2 case=$3 path=$4 passes=$5 note=${6:-} bench stats=null
  [[ $source == slow ]] && slowfs_reset
  SHUFFLE_SEED=$((SHUFFLE_SEED + 1000))  # every measurement gets its own (reproducible) orders
  if ! bench=$(timeout -s KILL "$BENCH_TIMEOUT_S" "$READBENCH" "$path" --threads "$threads" \
    --passes "$passes" --seed "$SHUFFLE_SEED" --json); then
    note="${note:+$note; }readbench reported errors"
    [[ -n $bench ]] || bench=null
  fi
  [[ $source == slow ]] && stats=$(slowfs_stats)
  printf '{"source":"%s","threads":%s,"case":"%s","passes":%s,"note":"%s","bench":%s,"slowfs":%s}\n' \
    "$source" "$threads" "$case" "$passes" "$note" "$bench" "$stats" >>"$RESULTS"
  log "$source t=$threads $case: $(echo "$bench" | $PY -c 'import json, sys
t = (json.load(sys.stdin) or {}).get("total", {})
print("%.0f files/s, %.1f MB/s" % (t.get("files_per_s", 0), t.get("mb_per_s", 0)))')"
}

skip() {  # skip SOURCE THREADS CASE REASON
  printf '{"source":"%s","threads":%s,"case":"%s","passes":0,"note":"skipped: %s","bench":null,"slowfs":null}\n' \
    "$1" "$2" "$3" "$4" >>"$RESULTS"
  log "$1 t=$2 $3: skipped ($4)"
}

drop_caches() { sync; echo 3 >/proc/sys/vm/drop_caches; }

# ---- main ---------------------------------------------------------------------------------------

[[ $(id -u) -eq 0 ]] || die "run as root (FUSE mounts, drop_caches)"
for bin in "$SLOWFS" "$READBENCH"; do
  [[ -x $bin ]] || die "$bin not found: ninja -C $BUILD bench/$(basename "$bin")"
done
HAVE_PREPFS=1
[[ -x $PREPFS ]] || { HAVE_PREPFS=0; log "warning: $PREPFS not found; prepfs cases are skipped"; }

mkdir -p "$WORK" "$(dirname "$OUT")"
cleanup  # leftovers from an interrupted run
STAMP="classes=$CLASSES per_class=$PER_CLASS seed=$SEED"
if [[ ! -d $DATASET/train || $(cat "$WORK/dataset.stamp" 2>/dev/null) != "$STAMP" ]]; then
  log "generating dataset ($STAMP)"
  rm -rf "$DATASET"
  $PY "$HERE/gen_dataset.py" "$DATASET" --classes "$CLASSES" --per-class "$PER_CLASS" --seed "$SEED" \
    | tee "$WORK/dataset.summary" >&2
  echo "$STAMP" >"$WORK/dataset.stamp"
fi
DATASET_SUMMARY=$(cat "$WORK/dataset.summary" 2>/dev/null || echo "$STAMP")

: >"$RESULTS"
: >"$WORK/prepfs.log"
LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg)
start_slowfs

for source in local slow; do
  if [[ $source == local ]]; then src_path=$DATASET; else src_path=$SLOW_MNT; fi
  for threads in $THREADS_LIST; do
    # (a) direct. The local source is read once beforehand so the page cache is warm; the slow
    # source always fetches (the simulator makes the kernel drop its cached pages on open).
    if [[ $source == local ]]; then
      timeout -s KILL "$BENCH_TIMEOUT_S" "$READBENCH" "$src_path" --threads "$threads" --json >/dev/null
      record "$source" "$threads" direct "$src_path" "$WARM_PASSES" "page cache warm"
    else
      record "$source" "$threads" direct "$src_path" 1 "every read reaches the simulator"
    fi

    if ((!HAVE_PREPFS)); then
      for c in cold warm-ram warm-ssd; do skip "$source" "$threads" "$c" "no prepfs binary"; done
      continue
    fi

    # (b) cold and (c) warm from RAM, on one fresh mount with an empty cache.
    rm -rf "$SSD_DIR"
    if start_prepfs "$src_path" "$RAM"; then
      record "$source" "$threads" cold "$MNT/raw" 1 "empty cache; mounted in ${MOUNT_SECONDS}s"
      record "$source" "$threads" warm-ram "$MNT/raw" "$WARM_PASSES" "ram=$RAM"
      stop_prepfs
    else
      skip "$source" "$threads" cold "prepfs did not start"
      skip "$source" "$threads" warm-ram "prepfs did not start"
    fi

    # (d) warm from the SSD tier only: same ssd_dir, no RAM tier, kernel caches dropped.
    if start_prepfs "$src_path" 0; then
      drop_caches
      record "$source" "$threads" warm-ssd "$MNT/raw" 1 "ram=0, drop_caches; remounted in ${MOUNT_SECONDS}s"
      stop_prepfs
    else
      skip "$source" "$threads" warm-ssd "prepfs did not start with ram=0"
    fi
  done
done

CMD="$0 $*"
$PY "$HERE/read_bench_report.py" --results "$RESULTS" --out "$OUT" \
  --command "$CMD" --dataset "$DATASET_SUMMARY" --slow-mbps "$SLOW_MBPS" \
  --slow-args "--open-latency-ms $SLOW_OPEN_MS --read-latency-ms $SLOW_READ_MS --meta-latency-ms $SLOW_META_MS --bandwidth-mbps $SLOW_MBPS --threads 64" \
  --prepfs-args "-o ram=$RAM,ssd=$SSD,ssd_dir=$SSD_DIR,log_level=warn" --warm-passes "$WARM_PASSES" \
  --load "at start $LOAD_START, at end $(cut -d' ' -f1-3 /proc/loadavg)"
log "wrote $OUT"
