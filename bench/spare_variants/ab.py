#!/usr/bin/python3
"""Spare SSD copies of augmented variants, old build against new, side by side.

    /usr/bin/python3 bench/spare_variants/ab.py OLD_BUILD NEW_BUILD [--rounds 3] [--epochs 8]

Each round mounts prepfs from each build in turn (which goes first alternates) over the same
dataset (bench/gen_dataset.py --synthetic, 400 JPEGs, made once under --work: the same images
whatever photo packages the machine has) with ram=1G,ssd=1G,aug_reuse=4
and the defaults otherwise (partition=auto keeps the decoded pixels in RAM and each variant beside
them), reads augmented/ once to warm up, then times --epochs epochs of reading every file (2
threads). Per mount: files/s, the daemon's CPU time per file, and the SSD writes that landed per
file (stats.json ssd.inserts). The old build writes a spare SSD copy of each variant the RAM tier
keeps, and unlinks it at the variant's last serve; the new one does not. Prints one row per mount
and the medians per build.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
import mounts  # noqa: E402  (bench/mounts.py)


def read_json(path):
    with open(path) as f:
        return json.load(f)


def read_all(paths, threads=2):
    def one(p):
        with open(p, "rb") as f:
            while f.read(1 << 20):
                pass
    with ThreadPoolExecutor(threads) as ex:
        list(ex.map(one, paths))


def run_mount(build, dataset, work, epochs):
    mnt, ssd = os.path.join(work, "mnt"), os.path.join(work, "ssd")
    shutil.rmtree(ssd, ignore_errors=True)
    os.makedirs(ssd, mode=0o700)
    os.makedirs(mnt, exist_ok=True)
    stats_path = os.path.join(mnt, ".prepfs", "stats")
    opts = f"ram=1G,ssd=1G,ssd_dir={ssd},aug_reuse=4,seed=1,log_level=warn"
    with open(os.path.join(work, "prepfs.log"), "ab") as log, \
            mounts.Daemon([os.path.join(build, "tools", "prepfs"), dataset, mnt, "-f", "-o", opts], mnt,
                          lambda: os.path.exists(stats_path), "prepfs", log) as d:
        aug = os.path.join(mnt, "augmented")
        paths = []
        for root, _, files in os.walk(aug):
            paths += [os.path.join(root, f) for f in files]
        paths.sort()
        read_all(paths)  # warm-up: pixels decoded and kept
        s0, c0, t0 = read_json(stats_path), d.cpu_seconds(), time.monotonic()
        for _ in range(epochs):
            read_all(paths)
        t1, c1, s1 = time.monotonic(), d.cpu_seconds(), read_json(stats_path)
        n = len(paths) * epochs
        return {"files_per_s": n / (t1 - t0), "cpu_ms_per_file": 1000 * (c1 - c0) / n,
                "ssd_writes_per_file": (s1["ssd"]["inserts"] - s0["ssd"]["inserts"]) / n,
                "spares_at_end": s1["cache"]["ssd_spare_entries"]}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("old")
    p.add_argument("new")
    p.add_argument("--work", default="/var/tmp/prepfs-spare-variants")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--epochs", type=int, default=8)
    args = p.parse_args()
    # Its own directory: a dataset made before --synthetic was passed may hold photo crops.
    dataset = os.path.join(args.work, "dataset-synthetic")
    if not os.path.exists(dataset + ".done"):
        subprocess.run(["/usr/bin/python3", os.path.join(HERE, "..", "gen_dataset.py"), dataset, "--classes", "4",
                        "--per-class", "100", "--synthetic"], check=True)
        open(dataset + ".done", "w").close()
    print(f"# {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())} {os.cpu_count()} cores; load average "
          f"{open('/proc/loadavg').read().split()[:3]}")
    rows = {"old": [], "new": []}
    for r in range(args.rounds):
        for v in (("old", "new") if r % 2 == 0 else ("new", "old")):
            m = run_mount(os.path.abspath(getattr(args, v)), dataset, args.work, args.epochs)
            rows[v].append(m)
            print(f"{v} round {r + 1}: {m['files_per_s']:.1f} files/s, daemon CPU {m['cpu_ms_per_file']:.3f} ms/file, "
                  f"SSD writes {m['ssd_writes_per_file']:.3f}/file, spares at the end {m['spares_at_end']}", flush=True)
    for v, ms in rows.items():
        med = {k: statistics.median(m[k] for m in ms) for k in ("files_per_s", "cpu_ms_per_file", "ssd_writes_per_file")}
        print(f"{v}: median {med['files_per_s']:.1f} files/s, daemon CPU {med['cpu_ms_per_file']:.3f} ms/file, "
              f"SSD writes {med['ssd_writes_per_file']:.3f}/file")
    print(f"# load average at the end {open('/proc/loadavg').read().split()[:3]}")


if __name__ == "__main__":
    main()
