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
#   warm-ram  the same mount, next epochs, each after the kernel's page cache is dropped (raw/ opens
#             keep_cache, so without the drop the kernel, not prepfs's RAM tier, would answer)
#   warm-ssd  prepfs remounted with ram=0 over an ssd_dir filled by one cold epoch (case "fill"),
#             each epoch after drop_caches: SSD tier only
# The three units (direct; cold + warm-ram; warm-ssd) run in ROUNDS rounds, their order rotated by
# one each round, so that load from other work falls on all alike; each ratio to direct is taken
# within a round. Every measurement records the CPU seconds of the prepfs daemon, of prepfs-slowfs
# and of the reader over it (/proc/PID/stat), reported per file.
# Results go to bench/results/read_bench.md (table, ratios vs direct, raw JSON, machine info).
# Environment overrides: WORK, CLASSES, PER_CLASS, SEED, THREADS_LIST, WARM_PASSES, ROUNDS, RAM, SSD,
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
WARM_PASSES=${WARM_PASSES:-3}    # warm cases (and local direct) average this many epochs per round
ROUNDS=${ROUNDS:-3}              # rounds of the three units, their order rotated each round
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
SSD_DIR=$WORK/ssd            # cold + warm-ram: emptied before every cold mount
SSD_WARM_DIR=$WORK/ssd-warm  # warm-ssd: filled once per source and thread count (case "fill")
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

# start_prepfs SOURCE RAM SSD_DIR: mounts prepfs at $MNT in the background; sets MOUNT_SECONDS.
start_prepfs() {
  local source=$1 ram=$2 ssd_dir=$3 start end
  unmount "$MNT"
  mkdir -p "$MNT" "$ssd_dir"
  start=$(date +%s.%N)
  "$PREPFS" "$source" "$MNT" -f -o "ram=$ram,ssd=$SSD,ssd_dir=$ssd_dir,log_level=warn" \
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

# proc_ticks PID [children]: sets TICKS to the user + system CPU of process PID in clock ticks
# (with "children": that of the children it has reaped), or to "" when there is no such process.
# Pure bash, no fork: a command substitution here would add its own CPU to the reader's.
proc_ticks() {
  local line f
  TICKS=""
  [[ -n $1 ]] || return 0
  read -r line 2>/dev/null <"/proc/$1/stat" || return 0
  read -r -a f <<<"${line##*) }"  # after the command name; f[0] is field 3 of proc(5)
  if [[ ${2:-} == children ]]; then TICKS=$((f[13] + f[14])); else TICKS=$((f[11] + f[12])); fi
}

# cpu_delta BEFORE AFTER: seconds between two tick counts, or null when either is missing.
cpu_delta() {
  if [[ -n $1 && -n $2 ]]; then
    printf '%d.%02d' $((($2 - $1) / HZ)) $(((($2 - $1) % HZ) * 100 / HZ))
  else
    printf null
  fi
}

# record SOURCE THREADS ROUND CASE PATH EPOCHS DROP [NOTE]: runs prepfs-readbench once per epoch
# (--passes 1), each after DROP ("" none, "1" the page cache, "3" page cache and dentries/inodes),
# and appends one JSON line: the per-epoch readbench JSON and the CPU seconds, summed over the
# epochs, of the prepfs daemon, prepfs-slowfs and the reader (this shell's reaped children: the
# readbench runs and their timeout wrappers) while readbench ran.
record() {
  local source=$1 threads=$2 round=$3 case=$4 path=$5 epochs=$6 drop=$7 note=${8:-}
  local e out list="" stats=null
  local d0 d1 s0 s1 r0 r1 prepfs_t=0 slowfs_t=0 reader_t=0 have_prepfs=1 have_slowfs=1
  [[ $source == slow ]] && slowfs_reset
  SHUFFLE_SEED=$((SHUFFLE_SEED + 1000))  # every measurement gets its own (reproducible) orders
  for ((e = 0; e < epochs; e++)); do
    case $drop in
      1) sync; echo 1 >/proc/sys/vm/drop_caches ;;
      3) drop_caches ;;
    esac
    proc_ticks "$PREPFS_PID"; d0=$TICKS
    proc_ticks "$SLOWFS_PID"; s0=$TICKS
    proc_ticks "$BASHPID" children; r0=$TICKS
    if ! out=$(timeout -s KILL "$BENCH_TIMEOUT_S" "$READBENCH" "$path" --threads "$threads" \
      --passes 1 --seed $((SHUFFLE_SEED + e)) --json); then
      [[ $note == *"readbench reported errors"* ]] || note="${note:+$note; }readbench reported errors"
      [[ -n $out ]] || out=null
    fi
    proc_ticks "$BASHPID" children; r1=$TICKS
    proc_ticks "$SLOWFS_PID"; s1=$TICKS
    proc_ticks "$PREPFS_PID"; d1=$TICKS
    if [[ -n $d0 && -n $d1 ]]; then prepfs_t=$((prepfs_t + d1 - d0)); else have_prepfs=0; fi
    if [[ -n $s0 && -n $s1 ]]; then slowfs_t=$((slowfs_t + s1 - s0)); else have_slowfs=0; fi
    reader_t=$((reader_t + r1 - r0))
    list="${list:+$list,}$out"
  done
  [[ $source == slow ]] && stats=$(slowfs_stats)
  printf '{"source":"%s","threads":%s,"round":%s,"case":"%s","passes":%s,"drop":"%s","note":"%s","epochs":[%s],"cpu_s":{"prepfs":%s,"slowfs":%s,"reader":%s},"clk_tck":%s,"slowfs":%s}\n' \
    "$source" "$threads" "$round" "$case" "$epochs" "$drop" "$note" "$list" \
    "$( ((have_prepfs)) && cpu_delta 0 "$prepfs_t" || echo null)" \
    "$( ((have_slowfs)) && cpu_delta 0 "$slowfs_t" || echo null)" \
    "$(cpu_delta 0 "$reader_t")" "$HZ" "$stats" >>"$RESULTS"
  log "$source t=$threads round $round $case: $(tail -n 1 "$RESULTS" | $PY -c 'import json, sys
r = json.load(sys.stdin)
eps = [e["total"] for e in r["epochs"] if e]
n, secs = sum(t["files"] for t in eps), sum(t["seconds"] for t in eps)
cpu = r["cpu_s"]["prepfs"]
print("%.0f files/s over %d epoch(s)%s" % (n / secs if secs else 0, len(eps),
      ", prepfs %.1f us/file" % (cpu / n * 1e6) if cpu is not None and n else ""))')"
}

skip() {  # skip SOURCE THREADS ROUND CASE REASON
  printf '{"source":"%s","threads":%s,"round":%s,"case":"%s","passes":0,"note":"skipped: %s","epochs":[],"cpu_s":null,"slowfs":null}\n' \
    "$1" "$2" "$3" "$4" "$5" >>"$RESULTS"
  log "$1 t=$2 round $3 $4: skipped ($5)"
}

drop_caches() { sync; echo 3 >/proc/sys/vm/drop_caches; }

# ---- main ---------------------------------------------------------------------------------------

[[ $(id -u) -eq 0 ]] || die "run as root (FUSE mounts, drop_caches)"
for bin in "$SLOWFS" "$READBENCH"; do
  [[ -x $bin ]] || die "$bin not found: ninja -C $BUILD bench/$(basename "$bin")"
done
HAVE_PREPFS=1
[[ -x $PREPFS ]] || { HAVE_PREPFS=0; log "warning: $PREPFS not found; prepfs cases are skipped"; }

((ROUNDS >= 1 && WARM_PASSES >= 1)) || die "ROUNDS and WARM_PASSES must be at least 1"
HZ=$(getconf CLK_TCK)
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

# The dataset's own pages are read into the page cache before every direct, fill and cold case, so
# that they start alike whatever ran before them (the warm cases drop caches).
warm_source() { timeout -s KILL "$BENCH_TIMEOUT_S" "$READBENCH" "$DATASET" --threads "$1" --json >/dev/null; }

# The three units of a round. unit SOURCE SRC_PATH THREADS ROUND
unit_direct() {
  warm_source "$3"
  if [[ $1 == local ]]; then
    record "$1" "$3" "$4" direct "$2" "$WARM_PASSES" "" "page cache warm"
  else  # the simulator makes the kernel drop its cached pages on open: every epoch fetches
    record "$1" "$3" "$4" direct "$2" 1 "" "every read reaches the simulator"
  fi
}
unit_ram() {  # cold, then warm from prepfs's RAM tier, on one fresh mount with an empty cache
  if ((!HAVE_PREPFS)); then
    skip "$1" "$3" "$4" cold "no prepfs binary"; skip "$1" "$3" "$4" warm-ram "no prepfs binary"; return
  fi
  rm -rf "$SSD_DIR"
  warm_source "$3"
  if start_prepfs "$2" "$RAM" "$SSD_DIR"; then
    record "$1" "$3" "$4" cold "$MNT/raw" 1 "" "empty cache; mounted in ${MOUNT_SECONDS}s"
    record "$1" "$3" "$4" warm-ram "$MNT/raw" "$WARM_PASSES" 1 "ram=$RAM; page cache dropped before each epoch"
    stop_prepfs
  else
    skip "$1" "$3" "$4" cold "prepfs did not start"; skip "$1" "$3" "$4" warm-ram "prepfs did not start"
  fi
}
unit_ssd() {  # warm from the SSD tier only: the filled ssd_dir, no RAM tier, kernel caches dropped
  if ((!HAVE_PREPFS)); then skip "$1" "$3" "$4" warm-ssd "no prepfs binary"; return; fi
  if [[ ! -d $SSD_WARM_DIR ]]; then skip "$1" "$3" "$4" warm-ssd "no filled ssd_dir"; return; fi
  if start_prepfs "$2" 0 "$SSD_WARM_DIR"; then
    record "$1" "$3" "$4" warm-ssd "$MNT/raw" "$WARM_PASSES" 3 "ram=0; drop_caches before each epoch; remounted in ${MOUNT_SECONDS}s"
    stop_prepfs
  else
    skip "$1" "$3" "$4" warm-ssd "prepfs did not start with ram=0"
  fi
}

UNITS=(direct ram ssd)
for source in local slow; do
  if [[ $source == local ]]; then src_path=$DATASET; else src_path=$SLOW_MNT; fi
  for threads in $THREADS_LIST; do
    # The warm-ssd cases' ssd_dir: one cold epoch with the RAM tier, as a cold case (round 0).
    rm -rf "$SSD_WARM_DIR"
    if ((HAVE_PREPFS)); then
      warm_source "$threads"
      if start_prepfs "$src_path" "$RAM" "$SSD_WARM_DIR"; then
        record "$source" "$threads" 0 fill "$MNT/raw" 1 "" "fills the warm-ssd cases' ssd_dir; mounted in ${MOUNT_SECONDS}s"
        stop_prepfs
      else
        rm -rf "$SSD_WARM_DIR"
        skip "$source" "$threads" 0 fill "prepfs did not start"
      fi
    fi
    for ((round = 1; round <= ROUNDS; round++)); do
      k=$(((round - 1) % ${#UNITS[@]}))
      for unit in "${UNITS[@]:k}" "${UNITS[@]:0:k}"; do
        "unit_$unit" "$source" "$src_path" "$threads" "$round"
      done
    done
  done
done

CMD="$0 $*"
$PY "$HERE/read_bench_report.py" --results "$RESULTS" --out "$OUT" \
  --command "$CMD" --dataset "$DATASET_SUMMARY" --slow-mbps "$SLOW_MBPS" \
  --slow-args "--open-latency-ms $SLOW_OPEN_MS --read-latency-ms $SLOW_READ_MS --meta-latency-ms $SLOW_META_MS --bandwidth-mbps $SLOW_MBPS --threads 64" \
  --prepfs-args "-o ram=$RAM,ssd=$SSD,ssd_dir=$SSD_DIR,log_level=warn" --warm-passes "$WARM_PASSES" \
  --rounds "$ROUNDS" \
  --load "at start $LOAD_START, at end $(cut -d' ' -f1-3 /proc/loadavg)"
log "wrote $OUT"
