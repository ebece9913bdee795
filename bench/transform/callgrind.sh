#!/bin/sh
# Instructions per item of xfbench's cases and of PIL's resampler, counted by callgrind: exactly
# repeatable, unlike times on a shared machine. Each case runs in its own valgrind process over
# the same N items (file i, variant 0) and only run_items() (xfbench) or ImagingResample* (PIL)
# is counted.
#   bench/transform/callgrind.sh BUILD_DIR DATA_DIR [N]
# DATA_DIR should hold about N JPEGs (every file is loaded and, for some cases, decoded first,
# under valgrind). Valgrind hides AVX-512 from the program, so the SIMD kernels run AVX2 here.
# Needs valgrind (scripts/install-deps.sh bench installs it) and
# /usr/bin/python3 with PIL; checked before anything runs.
set -eu
if [ $# -lt 2 ]; then
  echo "usage: $0 BUILD_DIR DATA_DIR [N]" >&2
  exit 2
fi
build=$1
data=$2
n=${3:-100}
here=$(dirname "$0")
xf="$build/bench/transform/prepfs-xfbench"
die() { echo "callgrind.sh: $*" >&2; exit 1; }
command -v valgrind >/dev/null 2>&1 ||
  die "valgrind is not installed (scripts/install-deps.sh bench, or apt-get install valgrind)"
[ -x "$xf" ] || die "$xf not found (ninja -C $build bench/transform/prepfs-xfbench)"
/usr/bin/python3 -c 'import PIL' 2>/dev/null ||
  die "/usr/bin/python3 lacks PIL, for pil_bench.py (apt-get install python3-pil, or scripts/install-deps.sh test)"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

count() {  # count NAME OUTFILE: instructions per item from a callgrind output file
  awk -v n="$n" -v name="$1" '/^summary:/ { printf "%-28s %12.0f\n", name, $2 / n }' "$2"
}

printf "%-28s %12s\n" "case ($n items)" "instr/item"
for c in "resize ref" "resize" "resize SSE4" "resize SCALAR" "decoded->variant ref" "decoded->variant" "decode 8x8" \
         "decode" "jpeg ref" "jpeg exact" "jpeg crop" "jpeg dct" "jpeg crop+dct" "jpeg crop+dct ref" "jpeg verified"; do
  valgrind --tool=callgrind --callgrind-out-file="$tmp/cg" --toggle-collect='*run_items*' \
    "$xf" --only "$c" --items "$n" "$data" > /dev/null 2>&1
  count "$c" "$tmp/cg"
done
"$xf" --dump-boxes "$tmp/boxes" "$data" > /dev/null
valgrind --tool=callgrind --callgrind-out-file="$tmp/cg" --toggle-collect='ImagingResample*' \
  /usr/bin/python3 "$here/pil_bench.py" --only "resize (PIL)" --boxes "$tmp/boxes" --items "$n" "$data" \
  > /dev/null 2>&1
count "resize (PIL ImagingResample)" "$tmp/cg"
