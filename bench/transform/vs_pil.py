#!/usr/bin/python3
"""prepfs's transform paths against PIL (+ torchvision), side by side in one run.

    /usr/bin/python3 bench/transform/vs_pil.py BUILD_DIR DIR [--rounds 3] [--seconds 2] [--out FILE]

Runs prepfs-xfbench and pil_bench.py on the same files (DIR: JPEGs, e.g. bench/gen_dataset.py's
ds1) in ROUNDS rounds; in each, both run every case below once for SECONDS CPU-seconds of their one
thread (`--rounds 1`), the two programs in alternating order (xfbench first in odd rounds, PIL
first in even ones), so that a load change on the shared machine falls on both alike. Each round
gives, per pair, PIL's CPU ms per item over prepfs's from that same round; the report gives every
round's and the median. The pairs:

  resize            prepfs "resize" (SIMD, best target)   vs "resize (PIL)": the very same crop boxes
                    (xfbench --dump-boxes, written once before the rounds)
  decoded->variant  prepfs "decoded->variant"             vs "decoded->variant (PIL+tv)"
  jpeg->variant     prepfs "jpeg crop+dct" (daemon defaults, a file's first render)
                                                          vs "augment (PIL+tv)"
  decode            prepfs "decode"                       vs "decode"

Both programs measure CPU time of their timing thread (CLOCK_THREAD_CPUTIME_ID, time.thread_time()),
so the numbers are CPU per item; each program's wall-clock seconds per invocation (start-up and
file loading included) are in the raw output. Checks before it starts: the xfbench binary, and
PIL, torch and torchvision (installed with scripts/install-deps.sh test when run as root).
Instruction counts, exactly repeatable where times are not: callgrind.sh.
"""
import argparse
import datetime
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
from bench_deps import ensure_modules  # noqa: E402

PY = "/usr/bin/python3"
PIL_BENCH = os.path.join(HERE, "pil_bench.py")
# (label, xfbench case, pil_bench case)
PAIRS = [("resize", "resize", "resize (PIL)"),
         ("decoded->variant", "decoded->variant", "decoded->variant (PIL+tv)"),
         ("jpeg->variant", "jpeg crop+dct", "augment (PIL+tv)"),
         ("decode", "decode", "decode")]


def parse(text, names):
    """CPU ms per item of each case in `names` from an xfbench or pil_bench table printed with
    --rounds 1: the row whose text starts with the case name and goes on with a number (so
    "decode" does not take "decode+ppm" or "decode 8x8")."""
    out = {}
    for line in text.splitlines():
        for name in names:
            if line.startswith(name):
                rest = line[len(name):].split()
                try:
                    out[name] = float(rest[0])
                except (IndexError, ValueError):
                    continue
    missing = [n for n in names if n not in out]
    if missing:
        raise RuntimeError(f"no row for {missing} in:\n{text}")
    return out


def run(cmd):
    t0 = time.time()
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    wall = time.time() - t0
    if res.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {res.returncode}: {res.stderr[-2000:]}")
    return res.stdout, wall


def report(rounds, cmd, xfbench, data_dir, seconds, load):
    """Markdown: per pair, prepfs and PIL ms/item per round and PIL/prepfs per round, medians."""
    lines = ["# Transform paths: prepfs vs PIL (+ torchvision), side by side", "",
             f"- command: `{cmd}`",
             f"- date: {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M UTC}; {os.cpu_count()} CPUs, "
             f"kernel {platform.release()}; load average {load}",
             f"- prepfs-xfbench: `{xfbench}`; data: `{data_dir}`",
             f"- {len(rounds)} rounds; in each, both programs run every case for {seconds:g} CPU-s of one thread "
             "(`--rounds 1`), xfbench first in odd rounds, PIL first in even ones. CPU ms per item; the ratio is "
             "PIL's over prepfs's in the same round.", "",
             "| pair | prepfs case | PIL case | prepfs ms/item per round | PIL ms/item per round | "
             "PIL / prepfs per round | median ratio |",
             "|---|---|---|---|---|---|---:|"]
    for label, xc, pc in PAIRS:
        xs = [r["xf"][xc] for r in rounds]
        ps = [r["pil"][pc] for r in rounds]
        ratios = [p / x for p, x in zip(ps, xs)]
        lines.append(f"| {label} | {xc} | {pc} | {' '.join(f'{x:.3f}' for x in xs)} | "
                     f"{' '.join(f'{p:.3f}' for p in ps)} | {' '.join(f'{q:.2f}' for q in ratios)} | "
                     f"{statistics.median(ratios):.2f}x |")
    lines += ["", "<details><summary>raw output, round by round</summary>", ""]
    for i, r in enumerate(rounds, 1):
        for who in r["order"]:
            lines += [f"round {i}, {who} ({r['wall'][who]:.1f} s wall):", "```", r["raw"][who].rstrip(), "```", ""]
    lines += ["</details>", ""]
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("build")
    ap.add_argument("data")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=2.0, help="CPU-seconds per case per round")
    ap.add_argument("--out", help="also write the markdown report here")
    a = ap.parse_args()
    if a.rounds < 3:
        print("vs_pil.py: note: fewer than 3 rounds", file=sys.stderr)
    xfbench = os.path.join(os.path.abspath(a.build), "bench", "transform", "prepfs-xfbench")
    if not os.access(xfbench, os.X_OK):
        sys.exit(f"vs_pil.py: cannot start: {xfbench} not found (ninja -C {a.build} bench/transform/prepfs-xfbench)")
    ensure_modules(["PIL", "torch", "torchvision"], install="test", why="pil_bench.py's cases")
    if not os.path.isdir(a.data):
        sys.exit(f"vs_pil.py: {a.data} is not a directory")
    load0 = " ".join(open("/proc/loadavg").read().split()[:3])
    xf_cases = [x for _, x, _ in PAIRS]
    pil_cases = [p for _, _, p in PAIRS]
    with tempfile.TemporaryDirectory(prefix="vs-pil-") as tmp:
        boxes = os.path.join(tmp, "boxes")
        run([xfbench, "--dump-boxes", boxes, a.data])
        cmds = {"xf": [xfbench, "--seconds", str(a.seconds), "--rounds", "1", "--only", ",".join(xf_cases), a.data],
                "pil": [PY, PIL_BENCH, "--seconds", str(a.seconds), "--rounds", "1", "--only", ",".join(pil_cases),
                        "--boxes", boxes, a.data]}
        rounds = []
        for i in range(a.rounds):
            order = ["xf", "pil"] if i % 2 == 0 else ["pil", "xf"]
            r = {"order": order, "raw": {}, "wall": {}}
            for who in order:
                r["raw"][who], r["wall"][who] = run(cmds[who])
            r["xf"] = parse(r["raw"]["xf"], xf_cases)
            r["pil"] = parse(r["raw"]["pil"], pil_cases)
            rounds.append(r)
            print(f"round {i + 1}: " + ", ".join(f"{label} {r['pil'][pc] / r['xf'][xc]:.2f}x"
                                                 for label, xc, pc in PAIRS), file=sys.stderr, flush=True)
    load1 = " ".join(open("/proc/loadavg").read().split()[:3])
    cmd = " ".join([PY, os.path.relpath(os.path.abspath(__file__))] + sys.argv[1:])
    text = report(rounds, cmd, xfbench, a.data, a.seconds, f"{load0} at the start, {load1} at the end")
    print(text)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
