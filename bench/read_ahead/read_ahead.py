#!/usr/bin/python3
"""The mount's read-ahead (read_ahead=, default 1M) against the kernel's 128K (read_ahead=0):
CPU and wall time per file read through prepfs, cold in the kernel's page cache and warm in the
daemon's RAM tier, so that only the FUSE round trips differ. Two mounts of one dataset, one per
setting; each round drops the page cache before each case, reads the first FILES files of a view
in 64 KiB reads (as a buffered reader does), and the cases alternate their order round by round.

  /usr/bin/python3 bench/read_ahead/read_ahead.py BUILD_DIR DATASET [--rounds 5] [--files 1000]

DATASET: bench/loader's WORK/dataset (ImageNet-like JPEGs). Run as root (drop_caches); mounts
under /tmp/prepfs-read-ahead, unmounted on exit.
"""
import argparse
import os
import resource
import shutil
import signal
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from proc_cpu import cpu_seconds  # noqa: E402
from mounts import Daemon  # noqa: E402

ROOT = "/tmp/prepfs-read-ahead"
VIEWS = [("decoded", ".npy"), ("raw", ".JPEG")]


def files(mnt, view, ext, n):
    out = []
    for d, _, names in os.walk(os.path.join(mnt, view)):
        out += [os.path.join(d, x) for x in names if x.endswith(ext)]
    return sorted(out)[:n]


def drop_page_cache():
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("1")


def read_all(paths):
    for p in paths:
        with open(p, "rb") as f:
            while f.read(65536):
                pass


def measure(paths, pid):
    drop_page_cache()
    r0, d0, t0 = resource.getrusage(resource.RUSAGE_SELF), cpu_seconds(pid), time.perf_counter()
    read_all(paths)
    wall, r1, d1 = time.perf_counter() - t0, resource.getrusage(resource.RUSAGE_SELF), cpu_seconds(pid)
    own = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    n = len(paths)
    return {"wall": wall / n * 1e6, "reader": own / n * 1e6, "daemon": (d1 - d0) / n * 1e6}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("build")
    ap.add_argument("dataset")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--files", type=int, default=1000)
    a = ap.parse_args()
    prepfs = os.path.join(a.build, "tools", "prepfs")
    shutil.rmtree(ROOT, ignore_errors=True)
    daemons = {}
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    try:
        for name, opt in (("128K", "read_ahead=0"), ("1M", "read_ahead=1M")):
            mnt, ssd = os.path.join(ROOT, "mnt-" + name), os.path.join(ROOT, "ssd-" + name)
            os.makedirs(mnt)
            os.makedirs(ssd)
            d = Daemon([prepfs, a.dataset, mnt, "-f", "-o",
                        f"ram=6G,ssd=0,ssd_dir={ssd},log_level=warn,decoded_format=npy,{opt}"],
                       mnt, lambda m=mnt: os.path.exists(os.path.join(m, ".prepfs", "stats")), "prepfs")
            daemons[name] = (d, mnt)
        time.sleep(1)  # the read-ahead is set just after the mount answers
        cases = {}
        for view, ext in VIEWS:
            for name, (d, mnt) in daemons.items():
                paths = files(mnt, view, ext, a.files)
                if not paths:
                    raise SystemExit(f"no {ext} files in {mnt}/{view}")
                read_all(paths)  # into the daemon's RAM tier
                cases[f"{view} {name}"] = (paths, d.proc.pid)
        results = {c: [] for c in cases}
        names = list(cases)
        for r in range(a.rounds):
            order = names if r % 2 == 0 else names[::-1]
            for c in order:
                m = measure(*cases[c])
                results[c].append(m)
                print(f"round {r + 1} {c}: {m['wall']:.1f} us wall, {m['reader']:.1f} us reader CPU, "
                      f"{m['daemon']:.1f} us daemon CPU per file", file=sys.stderr, flush=True)
        print("| case | files | wall us/file | reader CPU us/file | daemon CPU us/file | total CPU us/file |")
        print("|---|---:|---:|---:|---:|---:|")
        for c in names:
            med = {k: statistics.median(m[k] for m in results[c]) for k in ("wall", "reader", "daemon")}
            tot = statistics.median(m["reader"] + m["daemon"] for m in results[c])
            print(f"| {c} | {len(cases[c][0])} | {med['wall']:.1f} | {med['reader']:.1f} | {med['daemon']:.1f} | "
                  f"{tot:.1f} |")
    finally:
        for d, _ in daemons.values():
            d.stop()
        shutil.rmtree(ROOT, ignore_errors=True)


if __name__ == "__main__":
    main()
