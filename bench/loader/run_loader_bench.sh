#!/bin/bash
# End-to-end DataLoader benchmark (issues 3 and 13): prepfs' raw/, decoded/ and augmented/ views
# against the plain JPEG loader and each form's pre-made limit, side by side in one run.
#
#   bench/loader/run_loader_bench.sh [BUILD_DIR]     (default /work/main/build; run as root)
#
# Builds nothing: BUILD_DIR/tools/prepfs must exist. Generates the dataset (bench/gen_dataset.py)
# once under $WORK, mounts the prepfs daemons below over it, runs loader_bench.py, and unmounts
# everything on exit (trap), whatever happens. Every mount: ram=2G,ssd=0 and the daemon's defaults
# (partition=auto keeps the decoded pixels in RAM for augmented/ readers) plus:
#   main   aug_reuse=1                           raw/ and decoded/
#   aug    aug_reuse=1                           augmented/ PPM, a new variant per open
#   aug4   aug_reuse=4                           augmented/ PPM, each variant served 4 times
#   npy    decoded_format=npy,aug_reuse=1        augmented/ NPY
#   npy4   decoded_format=npy,aug_reuse=4        augmented/ NPY, each variant served 4 times
#   augfix aug_reuse=1000000                     augmented/ PPM, one variant for the run: the FUSE floor
#   npyfix decoded_format=npy,aug_reuse=1000000  the same for NPY
# COMPARE="OPTION ..." adds, for each option, mounts aug and npy with that option too (cases
# augmented@OPTION, npy@OPTION), measured in the same rounds: COMPARE="cpu=auto cpu=2".
# COMPARE_R4="OPTION ..." does the same for aug4 and npy4 (cases augmented-r4@OPTION,
# npy-r4@OPTION): COMPARE_R4="aug_page_cache=0".
# Idle daemons do no background work (the profiler's ticks aside), so they do not disturb the case
# being measured. Environment overrides: WORK, CLASSES, PER_CLASS, SEED, ROUNDS, EPOCHS, ONLY (case
# subset; its report goes to WORK/results.md unless OUT is given), OUT, ANALYSIS (markdown appended
# to the report), PREPFS_BIN, COMPARE, COMPARE_R4. The report's command line records each of them
# that differs from its default, the arguments, the working directory and `git rev-parse HEAD` of
# this checkout (and of BUILD_DIR's, when that is another one).
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
BENCH=$(cd "$HERE/.." && pwd)
BUILD=$(cd "${1:-$BENCH/../build}" && pwd)

# The command as run, for the report: every environment override that differs from its default
# (read before the defaults below fill them in), the script and its arguments, and the commit of
# the checkout it ran from.
declare -A DEFAULTS=([WORK]=/tmp/prepfs-loader-bench [CLASSES]=20 [PER_CLASS]=100 [SEED]=1 [ROUNDS]=3
  [EPOCHS]=2 [ONLY]= [COMPARE]= [COMPARE_R4]= [OUT]= [ANALYSIS]= [PREPFS_BIN]=)
RUN_CMD=""
for v in WORK CLASSES PER_CLASS SEED ROUNDS EPOCHS ONLY COMPARE COMPARE_R4 OUT ANALYSIS PREPFS_BIN; do
  if [[ -n ${!v+set} && ${!v} != "${DEFAULTS[$v]}" ]]; then RUN_CMD+="$v=$(printf '%q' "${!v}") "; fi
done
RUN_CMD+="$0"
for a in "$@"; do RUN_CMD+=" $(printf '%q' "$a")"; done
REPO=$(cd "$BENCH/.." && pwd)
if COMMIT=$(git -C "$REPO" rev-parse HEAD 2>/dev/null); then
  [[ -z $(git -C "$REPO" status --porcelain 2>/dev/null) ]] || COMMIT+=" plus uncommitted changes"
else
  COMMIT="unknown (not a git checkout)"
fi
RUN_CMD+=" (in $(pwd); checkout $REPO at $COMMIT"
BUILD_REPO=$(git -C "$BUILD" rev-parse --show-toplevel 2>/dev/null || true)
if [[ -n $BUILD_REPO && $BUILD_REPO != "$REPO" ]]; then
  RUN_CMD+="; BUILD_DIR in $BUILD_REPO at $(git -C "$BUILD_REPO" rev-parse HEAD)"
fi
RUN_CMD+=")"

PREPFS=${PREPFS_BIN:-$BUILD/tools/prepfs}
PY=/usr/bin/python3

WORK=$(realpath -m "${WORK:-/tmp/prepfs-loader-bench}")
CLASSES=${CLASSES:-20}
PER_CLASS=${PER_CLASS:-100}   # 20 x 100 = 2,000 JPEGs, ~230 MB
SEED=${SEED:-1}
ROUNDS=${ROUNDS:-3}
EPOCHS=${EPOCHS:-2}
ONLY=${ONLY:-}
COMPARE=${COMPARE:-}
COMPARE_R4=${COMPARE_R4:-}
# A subset run (ONLY=) does not replace the committed full report unless OUT says so.
if [[ -n $ONLY ]]; then OUT=${OUT:-$WORK/results.md}; else OUT=${OUT:-$HERE/results.md}; fi
ANALYSIS=${ANALYSIS:-}
READY_TIMEOUT_S=30
STOP_TIMEOUT_S=15

DATASET=$WORK/dataset
MOUNTS="main aug aug4 npy npy4 augfix npyfix"
declare -A OPTS=(
  [main]="aug_reuse=1"
  [aug]="aug_reuse=1"
  [aug4]="aug_reuse=4"
  [npy]="decoded_format=npy,aug_reuse=1"
  [npy4]="decoded_format=npy,aug_reuse=4"
  [augfix]="aug_reuse=1000000"
  [npyfix]="decoded_format=npy,aug_reuse=1000000"
)
declare -A COMPARED=()  # mount -> the option it adds
i=0
compare() {  # compare REUSE OPTION: mounts aug and npy (aug4, npy4 for REUSE 4) with OPTION added
  local reuse=$1 opt=$2 suffix=""
  [[ $reuse == 1 ]] || suffix=$reuse
  i=$((i + 1))
  MOUNTS+=" aug$suffix-c$i npy$suffix-c$i"
  OPTS[aug$suffix-c$i]="aug_reuse=$reuse,$opt"
  OPTS[npy$suffix-c$i]="decoded_format=npy,aug_reuse=$reuse,$opt"
  COMPARED[aug$suffix-c$i]=$opt
  COMPARED[npy$suffix-c$i]=$opt
}
for opt in $COMPARE; do compare 1 "$opt"; done
for opt in $COMPARE_R4; do compare 4 "$opt"; done
declare -A PIDS=()

log() { echo "[loader-bench] $*" >&2; }
die() { log "error: $*"; exit 1; }

mounts_under() {  # from mountinfo: a stat on a dead FUSE mount would fail or block
  awk -v d="$1" '$5 == d || index($5, d "/") == 1 { print $5 }' /proc/self/mountinfo | sort -r
}

unmount() {
  local m
  for m in $(mounts_under "$1"); do
    timeout -s KILL 10 umount -l -c "$m" 2>/dev/null || log "warning: could not unmount $m"
  done
}

stop_one() {
  local name=$1 pid=${PIDS[$1]:-} deadline
  if [[ -n $pid ]]; then
    kill -TERM "$pid" 2>/dev/null || true
    deadline=$((SECONDS + STOP_TIMEOUT_S))
    while kill -0 "$pid" 2>/dev/null && ((SECONDS < deadline)); do sleep 0.1; done
    if kill -0 "$pid" 2>/dev/null; then
      log "prepfs ($name) did not exit ${STOP_TIMEOUT_S}s after SIGTERM; killing it"
      kill -KILL "$pid" 2>/dev/null || true
    fi
    wait "$pid" 2>/dev/null || true
    PIDS[$name]=""
  fi
  unmount "$WORK/mnt-$name"
}

cleanup() {
  local m
  for m in $MOUNTS; do stop_one "$m"; done
  rm -rf "$WORK"/ssd-*
}
trap cleanup EXIT
trap 'exit 130' INT TERM

start_one() {  # start_one NAME: mounts prepfs at $WORK/mnt-NAME, waits for .prepfs/stats
  local name=$1 mnt=$WORK/mnt-$1 ssd=$WORK/ssd-$1
  unmount "$mnt"
  rm -rf "$ssd"
  mkdir -p "$mnt" "$ssd"
  "$PREPFS" "$DATASET" "$mnt" -f -o "ram=2G,ssd=0,ssd_dir=$ssd,log_level=warn,${OPTS[$name]}" \
    >>"$WORK/prepfs-$name.log" 2>&1 &
  PIDS[$name]=$!
  local deadline=$((SECONDS + READY_TIMEOUT_S))
  until timeout -s KILL 2 /usr/bin/test -e "$mnt/.prepfs/stats"; do
    kill -0 "${PIDS[$name]}" 2>/dev/null || die "prepfs ($name) exited before becoming ready (see $WORK/prepfs-$name.log)"
    ((SECONDS < deadline)) || die "prepfs ($name) not ready after ${READY_TIMEOUT_S}s"
    sleep 0.05
  done
}

[[ $(id -u) -eq 0 ]] || die "run as root (FUSE mounts)"
# A concurrent rebuild of BUILD_DIR replaces the binary (it is briefly missing while it is linked):
# wait for it a little, then run a private copy so every daemon of this run is the same build.
for _ in $(seq 120); do [[ -x $PREPFS ]] && break; sleep 1; done
[[ -x $PREPFS ]] || die "$PREPFS not found (build it first: ninja -C $BUILD)"
mkdir -p "$WORK/bin"
cp "$PREPFS" "$WORK/bin/prepfs.tmp" && mv "$WORK/bin/prepfs.tmp" "$WORK/bin/prepfs"
PREPFS_ORIG=$PREPFS
PREPFS=$WORK/bin/prepfs
# Which binary ran: the checkout's HEAD says nothing of a build that is stale or came from elsewhere.
RUN_CMD+="; binary sha256 $(sha256sum "$PREPFS" | cut -c1-16)"
if [[ -z ${PREPFS_BIN:-} ]] && ! ninja -C "$BUILD" -n tools/prepfs 2>/dev/null | grep -q "no work to do"; then
  RUN_CMD+=" (BUILD_DIR is not up to date with its sources)"
fi
$PY -c 'import torch, torchvision, PIL, numpy' 2>/dev/null ||
  die "$PY lacks torch/torchvision/PIL/numpy (apt-get install python3-torch python3-torchvision python3-pil)"

mkdir -p "$WORK" "$(dirname "$OUT")"
cleanup  # leftovers of an interrupted run
STAMP="classes=$CLASSES per_class=$PER_CLASS seed=$SEED"
if [[ ! -d $DATASET/train || $(cat "$WORK/dataset.stamp" 2>/dev/null) != "$STAMP" ]]; then
  log "generating dataset ($STAMP)"
  rm -rf "$DATASET" "$WORK/limits"
  $PY "$BENCH/gen_dataset.py" "$DATASET" --classes "$CLASSES" --per-class "$PER_CLASS" --seed "$SEED" \
    | tee "$WORK/dataset.summary" >&2
  echo "$STAMP" >"$WORK/dataset.stamp"
fi
DATASET_NOTE=$(cat "$WORK/dataset.summary" 2>/dev/null || echo "$STAMP")

for m in $MOUNTS; do : >"$WORK/prepfs-$m.log"; start_one "$m"; done
log "mounted: $(for m in $MOUNTS; do printf '%s(pid %s) ' "$m" "${PIDS[$m]}"; done)"

args=(--source "$DATASET" --limits "$WORK/limits" --rounds "$ROUNDS" --epochs "$EPOCHS" --out "$OUT"
  --json "$WORK/results.json" --command "$RUN_CMD" --dataset-note "$DATASET_NOTE"
  --mount-note "$PREPFS_ORIG (run from a copy) SOURCE MNT -f -o ram=2G,ssd=0,ssd_dir=DIR,log_level=warn plus, per mount: $(for m in $MOUNTS; do printf '%s: %s; ' "$m" "${OPTS[$m]}"; done)")
[[ -n $ONLY ]] && args+=(--only "$ONLY")
[[ -n $ANALYSIS && -f $ANALYSIS ]] && args+=(--analysis "$ANALYSIS")
case_mount() { args+=(--case "$1=$WORK/mnt-$2" --pid "$1=${PIDS[$2]}"); }
case_mount raw main
case_mount decoded main
case_mount augmented aug
case_mount augmented-r4 aug4
case_mount npy npy
case_mount npy-r4 npy4
case_mount augmented-fixed augfix
case_mount npy-fixed npyfix
for m in $MOUNTS; do
  [[ -n ${COMPARED[$m]:-} ]] || continue
  case $m in
    aug-*) case_mount "augmented@${COMPARED[$m]}" "$m" ;;
    npy-*) case_mount "npy@${COMPARED[$m]}" "$m" ;;
    aug4-*) case_mount "augmented-r4@${COMPARED[$m]}" "$m" ;;
    npy4-*) case_mount "npy-r4@${COMPARED[$m]}" "$m" ;;
  esac
done

$PY "$HERE/loader_bench.py" "${args[@]}"
log "prepfs logs: $WORK/prepfs-*.log; raw results: $WORK/results.json"
