#!/bin/bash
# Index memory and mount time of prepfs over a large tree of empty files.
#
#   bench/index_mem.sh [BUILD_DIR]          (default BUILD_DIR: /work/main/build; run as root)
#
# Builds a tree of N_DIRS x FILES_PER_DIR empty files (default 1000 x 1000 = 1,000,000) on a tmpfs,
# and an empty tree, then for each: mounts prepfs, waits until .prepfs/stats exists and the index
# holds every file, and reads the daemon's VmRSS/VmHWM from /proc/PID/status. The RSS difference
# between the two trees divided by the file count is the index cost per file. Then it remounts
# with the same ssd_dir (persisted index): warm (page cache) and after drop_caches.
# Results: bench/results/index_mem.md. Environment overrides: N_DIRS, FILES_PER_DIR, WORK, RAM,
# SSD, PREPFS_BIN, OUT, READY_TIMEOUT_S.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
BUILD=$(cd "${1:-/work/main/build}" && pwd)
PREPFS=${PREPFS_BIN:-$BUILD/tools/prepfs}
PY=/usr/bin/python3
N_DIRS=${N_DIRS:-1000}
FILES_PER_DIR=${FILES_PER_DIR:-1000}
# A tmpfs keeps the 1M-file tree off the disk and makes its creation fast.
if [[ -d /dev/shm ]]; then DEFAULT_WORK=/dev/shm/prepfs-index-mem; else DEFAULT_WORK=/tmp/prepfs-index-mem; fi
WORK=$(realpath -m "${WORK:-$DEFAULT_WORK}")
SSD_BASE=${SSD_BASE:-/tmp/prepfs-index-mem-ssd}  # the persisted index lives on the real disk
RAM=${RAM:-64M}   # small: the RAM tier is not what is measured (and cancels out in the difference)
SSD=${SSD:-1G}
READY_TIMEOUT_S=${READY_TIMEOUT_S:-900}
OUT=${OUT:-$HERE/results/index_mem.md}
TOTAL=$((N_DIRS * FILES_PER_DIR))

MNT=$WORK/mnt
PREPFS_PID=""
ROWS=()

log() { echo "[index-mem] $*" >&2; }
die() { log "error: $*"; exit 1; }

mounts_under() {  # from mountinfo: stat-based checks block or fail on a stuck/dead FUSE mount
  awk -v d="$1" '$5 == d || index($5, d "/") == 1 { print $5 }' /proc/self/mountinfo | sort -r
}
unmount() {
  local m
  for m in $(mounts_under "$1"); do timeout -s KILL 10 umount -l -c "$m" 2>/dev/null || true; done
}

stop_prepfs() {
  if [[ -n $PREPFS_PID ]]; then
    kill -TERM "$PREPFS_PID" 2>/dev/null || true
    local deadline=$((SECONDS + 30))
    while kill -0 "$PREPFS_PID" 2>/dev/null && ((SECONDS < deadline)); do sleep 0.1; done
    kill -KILL "$PREPFS_PID" 2>/dev/null || true
    wait "$PREPFS_PID" 2>/dev/null || true
    PREPFS_PID=""
  fi
  unmount "$MNT"
}
trap stop_prepfs EXIT
trap 'exit 130' INT TERM

now() { date +%s.%N; }
elapsed() { $PY -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.3f}')" "$1" "$2"; }
status_kb() { awk -v k="$2:" '$1 == k { print $2 }' "/proc/$1/status"; }

# index_field NAME: a number from the "index" object of the mount's stats JSON, or -1.
# (grep, not python: this runs in a polling loop and must be cheap.)
index_field() {
  local v
  v=$(timeout -s KILL 5 cat "$MNT/.prepfs/stats" 2>/dev/null | tr -d '\n' |
    grep -o '"index": *{[^}]*}' | grep -o "\"$1\": *[0-9]*" | grep -o '[0-9]*$' || true)
  echo "${v:--1}"
}

# measure LABEL SOURCE SSD_DIR EXPECTED_FILES: mount, wait for readiness, record one row.
measure() {
  local label=$1 source=$2 ssd_dir=$3 expected=$4 t0 t_ready t_indexed files
  unmount "$MNT"
  mkdir -p "$MNT" "$ssd_dir"
  t0=$(now)
  "$PREPFS" "$source" "$MNT" -f -o "ram=$RAM,ssd=$SSD,ssd_dir=$ssd_dir,log_level=warn" \
    >>"$WORK/prepfs.log" 2>&1 &
  PREPFS_PID=$!
  local deadline=$((SECONDS + READY_TIMEOUT_S))
  until timeout -s KILL 2 /usr/bin/test -e "$MNT/.prepfs/stats"; do
    kill -0 "$PREPFS_PID" 2>/dev/null || die "prepfs exited during mount (see $WORK/prepfs.log)"
    ((SECONDS < deadline)) || die "prepfs not ready after ${READY_TIMEOUT_S}s"
    sleep 0.05
  done
  t_ready=$(now)
  # The index may still be filling in after the mount appears: wait until it holds every file
  # (or until its file count stops changing, if the daemon does not report one).
  local last=-2 stable=0
  while :; do
    files=$(index_field files)
    [[ $files == "$expected" ]] && break
    if [[ $files == "$last" ]]; then stable=$((stable + 1)); else stable=0; fi
    ((stable < 20)) || break
    ((SECONDS < deadline)) || die "index incomplete after ${READY_TIMEOUT_S}s ($files files)"
    last=$files
    sleep 0.1
  done
  t_indexed=$(now)
  sleep 1  # let allocator and background threads settle before reading RSS
  ROWS+=("$label|$expected|$(elapsed "$t0" "$t_ready")|$(elapsed "$t0" "$t_indexed")|$(status_kb "$PREPFS_PID" VmRSS)|$(status_kb "$PREPFS_PID" VmHWM)|$files|$(index_field memory_bytes)")
  log "$label: ${ROWS[-1]}"
  stop_prepfs
}

# make_tree DIR DIRS FILES: DIRS directories of FILES empty files each (o_CREAT loop; fast).
make_tree() {
  $PY - "$@" <<'EOF'
import os, sys
root, dirs, files = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
os.makedirs(root, exist_ok=True)
for d in range(dirs):
    path = os.path.join(root, f"d{d:05d}")
    os.makedirs(path, exist_ok=True)
    dfd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for f in range(files):
            os.close(os.open(f"f{f:06d}", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=dfd))
    finally:
        os.close(dfd)
EOF
}

# ---- main ---------------------------------------------------------------------------------------
[[ $(id -u) -eq 0 ]] || die "run as root (FUSE mounts, drop_caches)"
[[ -x $PREPFS ]] || die "$PREPFS not found (build it: ninja -C $BUILD tools/prepfs)"
mkdir -p "$WORK" "$(dirname "$OUT")"
unmount "$MNT"
: >"$WORK/prepfs.log"

BIG=$WORK/tree-$N_DIRS-$FILES_PER_DIR
EMPTY=$WORK/tree-empty
if [[ ! -f $WORK/.tree-$N_DIRS-$FILES_PER_DIR.done ]]; then
  log "creating $TOTAL empty files under $BIG"
  rm -rf "$BIG"
  t0=$(now)
  make_tree "$BIG" "$N_DIRS" "$FILES_PER_DIR"
  log "created in $(elapsed "$t0" "$(now)")s"
  touch "$WORK/.tree-$N_DIRS-$FILES_PER_DIR.done"
fi
mkdir -p "$EMPTY"
LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg)

rm -rf "$SSD_BASE"
measure "empty tree, first mount" "$EMPTY" "$SSD_BASE/empty" 0
measure "$TOTAL files, first mount" "$BIG" "$SSD_BASE/big" "$TOTAL"
measure "$TOTAL files, remount (persisted index)" "$BIG" "$SSD_BASE/big" "$TOTAL"
sync
echo 3 >/proc/sys/vm/drop_caches
measure "$TOTAL files, remount after drop_caches" "$BIG" "$SSD_BASE/big" "$TOTAL"

# ---- report -------------------------------------------------------------------------------------
CMD="$0 $*"
$PY - "$OUT" "$CMD" "$TOTAL" "$N_DIRS" "$FILES_PER_DIR" "$RAM" "$SSD" "$LOAD_START" "${ROWS[@]}" <<'EOF'
import datetime, os, platform, sys
out, cmd, total, ndirs, nfiles, ram, ssd, load = sys.argv[1:9]
rows = [r.split("|") for r in sys.argv[9:]]
total = int(total)
def num(s):
    try:
        return float(s)
    except ValueError:
        return None
base_rss = num(rows[0][4])
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
lines = [
    "# prepfs index memory and mount time",
    "",
    f"- date: {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M UTC}",
    f"- machine: {os.cpu_count()} CPUs ({cpu}), kernel {platform.release()}, "
    f"load average at start {load}",
    f"- command: `{cmd}`",
    f"- tree: {ndirs} directories x {nfiles} empty files = {total:,} files, on tmpfs",
    f"- prepfs: `prepfs TREE MNT -f -o ram={ram},ssd={ssd},ssd_dir=DIR,log_level=warn`",
    "",
    "*ready*: until `MNT/.prepfs/stats` exists; *indexed*: until the stats report every file in "
    "the index. RSS/HWM: `VmRSS`/`VmHWM` of the daemon one second after that. *per file*: RSS "
    "above the empty-tree mount divided by the file count. *index bytes*: the daemon's own "
    "`index.memory_bytes`.",
    "",
    "| case | files | ready s | indexed s | RSS MiB | HWM MiB | per file (RSS) | index bytes | index bytes/file |",
    "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
]
for label, files, ready, indexed, rss, hwm, indexed_files, index_bytes in rows:
    n = int(files)
    rss_kb, hwm_kb, ib = num(rss), num(hwm), num(index_bytes)
    per_file = f"{(rss_kb - base_rss) * 1024 / n:.0f} B" if n and rss_kb and base_rss else "-"
    ib_per = f"{ib / n:.0f} B" if n and ib and ib > 0 else "-"
    lines.append(f"| {label} | {n:,} | {ready} | {indexed} | "
                 f"{rss_kb / 1024:.1f} | {hwm_kb / 1024:.1f} | {per_file} | "
                 f"{'-' if ib is None or ib < 0 else f'{ib:,.0f}'} | {ib_per} |")
with open(out, "w") as f:
    f.write("\n".join(lines) + "\n")
EOF
log "wrote $OUT"
