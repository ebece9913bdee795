#!/usr/bin/python3
"""A cold epoch over the slow-source simulator, with and without the job's order published.

    /usr/bin/python3 bench/sampling/cold.py [--build build] [--repeats 3] [--threads 8,32]

The source is prepfs-slowfs over the JPEG set with bench/results/read_bench.md's settings: 2 ms per
open, 1 ms per read request, 0.2 ms per metadata call, 200 MB/s shared by all requests. For each
thread count and repeat, in a shuffled order: `direct` reads the slow mount itself (the simulator's
own limit with that many readers), `cold` is a fresh prepfs mount (empty cache) read in a shuffled
order nobody told it, `cold+order` the same with that order written to .prepfs/order first (as
PrepfsSampler does), so prefetch_threads requests run ahead of the readers within prefetch_window.
The reader is prepfs-readbench --in-order --threads N over the same list. Every file is read once,
so the kernel's page cache cannot answer anything: no cgroup needed here. Writes results/cold.json.
"""
import argparse
import json
import os
import random
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
from common import log  # noqa: E402

MBPS = 200.0
SLOW_ARGS = ["--open-latency-ms", "2", "--read-latency-ms", "1", "--meta-latency-ms", "0.2",
             "--bandwidth-mbps", str(MBPS), "--threads", "64"]
PREPFS_OPTS = "ram=2G,ssd=0"


def read_epoch(tools, root, listfile, threads):
    cpu0 = common.children_cpu()
    r = subprocess.run([tools.readbench, root, "--list", listfile, "--in-order", "--threads", str(threads), "--json"],
                       capture_output=True, text=True, timeout=900)
    if r.returncode != 0:
        raise RuntimeError(f"readbench: {r.stderr}")
    return json.loads(r.stdout)["total"], common.children_cpu() - cpu0


def run_case(tools, work, dataset, order, case, threads):
    slow_mnt = os.path.join(work, "slow")
    listfile = os.path.join(work, "order.txt")
    with open(listfile, "w") as f:
        f.write("".join(p + "\n" for p in order))
    with common.SlowFs(tools, dataset, slow_mnt, SLOW_ARGS) as slow:
        if case == "direct":
            c0, s0 = slow.counters(), slow.cpu()
            total, reader_cpu = read_epoch(tools, slow_mnt, listfile, threads)
            c1 = slow.counters()
            return {"bench": total, "reader_cpu_s": reader_cpu, "slowfs_cpu_s": slow.cpu() - s0, "daemon_cpu_s": 0.0,
                    "source_bytes": c1["read_bytes"] - c0["read_bytes"], "source_opens": c1["opens"] - c0["opens"]}
        t0 = time.time()
        with common.Prepfs(tools, slow_mnt, os.path.join(work, "mnt"), PREPFS_OPTS, work) as fs:
            mount_s = time.time() - t0
            if case == "cold+order":
                fs.publish("cold", ["raw/" + p for p in order])
            c0, s0, d0 = slow.counters(), slow.cpu(), fs.cpu()
            total, reader_cpu = read_epoch(tools, os.path.join(fs.mnt, "raw"), listfile, threads)
            c1, st = slow.counters(), fs.stats()
            return {"bench": total, "reader_cpu_s": reader_cpu, "slowfs_cpu_s": slow.cpu() - s0,
                    "daemon_cpu_s": fs.cpu() - d0, "mount_s": mount_s,
                    "source_bytes": c1["read_bytes"] - c0["read_bytes"], "source_opens": c1["opens"] - c0["opens"],
                    "prefetch": st["prefetch"], "options": fs.options}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(common.REPO, "build"))
    ap.add_argument("--work", default="/var/tmp/prepfs-sampling-bench")
    ap.add_argument("--classes", type=int, default=30)
    ap.add_argument("--per-class", type=int, default=100)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", default="8,32")
    ap.add_argument("--cases", default="direct,cold,cold+order")
    ap.add_argument("--out", default=os.path.join(common.HERE, "results", "cold.json"))
    args = ap.parse_args()
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    tools = common.Tools(args.build, args.work)
    dataset = common.ensure_jpegs(args.work, args.classes, args.per_class)
    files = common.files_of(dataset)
    data = common.header(sys.argv)
    data.update({"slowfs": " ".join(["prepfs-slowfs", "DATASET", "MNT"] + SLOW_ARGS), "cap_mbps": MBPS,
                 "prepfs": PREPFS_OPTS + " (defaults: prefetch_window=256M, prefetch_threads=16)",
                 "dataset": {"files": len(files), "bytes": sum(os.path.getsize(os.path.join(dataset, p)) for p in files)},
                 "runs": []})
    threads = [int(t) for t in args.threads.split(",")]
    cases = args.cases.split(",")
    for rep in range(args.repeats):
        runs = [(c, t) for c in cases for t in threads]
        random.Random(rep).shuffle(runs)
        for case, t in runs:
            order = files[:]
            random.Random(1000 * rep + t).shuffle(order)  # the same order for every case of (repeat, threads)
            res = run_case(tools, args.work, dataset, order, case, t)
            res.update({"case": case, "threads": t, "repeat": rep, "load": common.loadavg()})
            log(f"repeat {rep + 1}: {case} x{t}: {res['bench']['mb_per_s']:.1f} MB/s "
                f"({res['bench']['mb_per_s'] / MBPS:.2f}x the cap), source {res['source_bytes'] / 1e6:.0f} MB")
            data["runs"].append(res)
            common.save(args.out, data)


if __name__ == "__main__":
    main()
