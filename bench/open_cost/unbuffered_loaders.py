#!/usr/bin/python3
"""Does opening unbuffered help a real loader? open_cost.py shows that an unbuffered open of
augmented/ skips one round trip (Python's buffered open() asks isatty(), an ioctl FUSE forwards).
Here the reads are the loaders' own: numpy.load and PIL's Image.open(...).load(), given a path
(buffered) or an unbuffered file object, over 1,000 files of augmented/ (NPY and PPM,
aug_reuse=4, render_ahead=0 as in open_cost.py, one mount per case). Only a variant's three
repeat opens are measured, in 3 interleaved rounds; CPU per open of this process and of the
case's daemon.

  /usr/bin/python3 bench/open_cost/unbuffered_loaders.py BUILD_DIR DATASET

DATASET: bench/loader's WORK/dataset. Run as root; mounts under /tmp/prepfs-open-cost.
"""
import os
import resource
import statistics
import sys
import time

import numpy as np
from PIL import Image

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import open_cost as oc  # noqa: E402


def main():
    build, dataset = sys.argv[1], sys.argv[2]
    prepfs = os.path.join(build, "tools", "prepfs")
    loaders = {
        "npy, np.load(path)": ("decoded_format=npy", ".npy", lambda p: np.load(p)),
        "npy, np.load(open(path, buffering=0))": ("decoded_format=npy", ".npy",
                                                  lambda p: np.load(open(p, "rb", buffering=0))),
        "ppm, Image.open(path).load()": ("", ".ppm", lambda p: Image.open(p).load()),
        "ppm, Image.open(open(path, buffering=0)).load()": ("", ".ppm",
                                                            lambda p: Image.open(open(p, "rb", buffering=0)).load()),
    }
    procs, cases = [], {}
    try:
        for i, (name, (opts, ext, fn)) in enumerate(loaders.items()):
            mnt, p = oc.mount(prepfs, dataset, f"loader{i}", ",".join(filter(None, [opts, "aug_reuse=4,render_ahead=0"])))
            procs.append(p)
            cases[name] = (oc.files_under(os.path.join(mnt, "augmented"), ext)[:1000], p.pid, fn)

        def one_pass(paths, fn):
            for path in paths:
                fn(path)
        for paths, _, fn in cases.values():
            for _ in range(4):  # warm: inputs cached, one whole variant cycle
                one_pass(paths, fn)
        time.sleep(3)
        names, totals = list(cases), {n: [] for n in cases}
        for r in range(3):
            for name in names[r % len(names):] + names[:r % len(names)]:
                paths, pid, fn = cases[name]
                one_pass(paths, fn)  # the next variant's first open
                r0, d0 = resource.getrusage(resource.RUSAGE_SELF), oc.cpu_of(pid)
                for _ in range(3):
                    one_pass(paths, fn)
                r1, d1 = resource.getrusage(resource.RUSAGE_SELF), oc.cpu_of(pid)
                n = 3 * len(paths)
                own = (r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime) / n * 1e6
                daemon = (d1 - d0) / n * 1e6
                totals[name].append(own + daemon)
                print(f"round {r + 1} {name}: reader {own:.1f} us, daemon {daemon:.1f} us, "
                      f"total {own + daemon:.1f} us per open", file=sys.stderr, flush=True)
        print("| loader | total CPU us/open (median of 3) | rounds |")
        print("|---|---:|---|")
        for name in names:
            print(f"| {name} | {statistics.median(totals[name]):.1f} | "
                  + ", ".join(f"{t:.1f}" for t in totals[name]) + " |")
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            p.wait(timeout=20)


if __name__ == "__main__":
    main()
