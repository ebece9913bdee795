#!/usr/bin/python3
"""The cost of one open of an augmented/ file, without a DataLoader: a single Python process opens,
reads and closes every .npy file of a tree, pass after pass, and reports per open its wall time,
its own CPU (user + system) and the serving daemon's CPU. With aug_reuse=4 each round first makes
one unmeasured pass (the first open of each file's next variant: renders, reads through the
daemon), then measures the variant's three repeat opens: what a served, unchanged variant costs,
with no render in it. The prepfs mounts run with render_ahead=0: otherwise the next variant's
render ahead, queued at the last serve, lands partly in the measured window (more of it the slower
the reader), and the daemon's CPU per open would include it. Cases, interleaved round by round:

  local        the pre-made NPY files on local disk (the loader bench's limit-npy)
  page-cache   prepfs augmented/ NPY, aug_reuse=4 (repeat opens read the kernel's page cache)
  direct       the same with aug_page_cache=0 (every read reaches the daemon)
  no-open      prepfs raw/ over the pre-made files: the kernel skips OPEN and RELEASE, the page
               cache serves (what a FUSE file costs with no per-open round trip)
  page-cache-unbuffered, local-unbuffered
               page-cache and local again, each file opened with buffering=0: Python's buffered
               open() asks isatty() (an ioctl, TCGETS) on every open, which FUSE forwards to the
               daemon as one more round trip; an unbuffered open does not ask

  /usr/bin/python3 bench/open_cost/open_cost.py BUILD_DIR LIMITS_NPY_DIR DATASET [--rounds 5]

LIMITS_NPY_DIR and DATASET come from bench/loader/run_loader_bench.sh (WORK/limits/augmented_npy
and WORK/dataset). Run as root. Mounts under /tmp/prepfs-open-cost, unmounted on exit.
"""
import argparse
import os
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from proc_cpu import cpu_seconds  # noqa: E402

ROOT = "/tmp/prepfs-open-cost"


def cpu_of(pid):
    return cpu_seconds(pid)


def files_under(root, ext):
    out = []
    for d, _, names in os.walk(root):
        out += [os.path.join(d, n) for n in names if n.endswith(ext)]
    return sorted(out)


def mount(prepfs, source, name, options):
    mnt, ssd = os.path.join(ROOT, "mnt-" + name), os.path.join(ROOT, "ssd-" + name)
    os.makedirs(mnt, exist_ok=True)
    os.makedirs(ssd, exist_ok=True)
    p = subprocess.Popen([prepfs, source, mnt, "-f", "-o", f"ram=2G,ssd=0,ssd_dir={ssd},log_level=warn,{options}"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 30
    while not os.path.exists(os.path.join(mnt, ".prepfs", "stats")):
        if p.poll() is not None or time.time() > deadline:
            raise SystemExit(f"prepfs {name} did not come up")
        time.sleep(0.05)
    return mnt, p


def one_pass(paths, unbuffered=False):
    for p in paths:
        with open(p, "rb", buffering=0 if unbuffered else -1) as f:
            f.read()


def measure(paths, pid, passes, unbuffered):
    r0 = resource.getrusage(resource.RUSAGE_SELF)
    d0 = cpu_of(pid) if pid else 0.0
    t0 = time.perf_counter()
    for _ in range(passes):
        one_pass(paths, unbuffered)
    wall = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    d1 = cpu_of(pid) if pid else 0.0
    n = len(paths) * passes
    own = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    return {"us_wall": wall / n * 1e6, "us_reader_cpu": own / n * 1e6, "us_daemon_cpu": (d1 - d0) / n * 1e6}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("build")
    ap.add_argument("limits_npy")
    ap.add_argument("dataset")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--reuse", type=int, default=4, help="aug_reuse of the prepfs mounts")
    a = ap.parse_args()
    prepfs = os.path.join(a.build, "tools", "prepfs")
    procs = []

    def stop(*_):
        for p in procs:
            p.send_signal(signal.SIGTERM)
        for p in procs:
            p.wait(timeout=20)
        shutil.rmtree(ROOT, ignore_errors=True)

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    try:
        pc_mnt, pc = mount(prepfs, a.dataset, "pc", f"decoded_format=npy,aug_reuse={a.reuse},render_ahead=0")
        dio_mnt, dio = mount(prepfs, a.dataset, "direct", f"decoded_format=npy,aug_reuse={a.reuse},aug_page_cache=0,render_ahead=0")
        raw_mnt, raw = mount(prepfs, a.limits_npy, "raw", "")
        procs += [pc, dio, raw]
        pc2_mnt, pc2 = mount(prepfs, a.dataset, "pc2", f"decoded_format=npy,aug_reuse={a.reuse},render_ahead=0")
        procs.append(pc2)
        local = files_under(a.limits_npy, ".npy")
        cases = {  # name: (paths, daemon pid, unbuffered opens)
            "local": (local, None, False),
            "page-cache": (files_under(os.path.join(pc_mnt, "augmented"), ".npy"), pc.pid, False),
            "direct": (files_under(os.path.join(dio_mnt, "augmented"), ".npy"), dio.pid, False),
            "no-open": (files_under(os.path.join(raw_mnt, "raw"), ".npy"), raw.pid, False),
            "local-unbuffered": (local, None, True),
            # its own mount: each mount's files must see exactly aug_reuse opens per variant
            "page-cache-unbuffered": (files_under(os.path.join(pc2_mnt, "augmented"), ".npy"), pc2.pid, True),
        }
        for name, (paths, _, _) in cases.items():  # warm: the inputs cached, variant 0 served once
            if not paths:
                raise SystemExit(f"{name}: no .npy files")
            one_pass(paths)
        time.sleep(3)  # a few profiler ticks: the plan settles on what augmented/ readers need
        for name, (paths, _, _) in cases.items():  # variant 0's last serves; the next pass is variant 1's first
            for _ in range(a.reuse - 1):
                one_pass(paths)
        results = {n: [] for n in cases}
        names = list(cases)
        for r in range(a.rounds):
            for name in names[r % len(names):] + names[:r % len(names)]:
                paths, pid, unbuffered = cases[name]
                one_pass(paths, unbuffered)  # the variant's first open
                m = measure(paths, pid, a.reuse - 1, unbuffered)
                results[name].append(m)
                print(f"round {r + 1} {name}: {m['us_wall']:.1f} us wall, {m['us_reader_cpu']:.1f} us reader CPU, "
                      f"{m['us_daemon_cpu']:.1f} us daemon CPU per open", file=sys.stderr, flush=True)
        print("| case | files | wall us/open | reader CPU us/open | daemon CPU us/open | total CPU us/open |")
        print("|---|---:|---:|---:|---:|---:|")
        for name in names:
            med = {k: statistics.median(m[k] for m in results[name]) for k in results[name][0]}
            print(f"| {name} | {len(cases[name][0])} | {med['us_wall']:.1f} | {med['us_reader_cpu']:.1f} | "
                  f"{med['us_daemon_cpu']:.1f} | {med['us_reader_cpu'] + med['us_daemon_cpu']:.1f} |")
    finally:
        stop()


if __name__ == "__main__":
    main()
