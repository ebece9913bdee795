#!/usr/bin/python3
"""Concurrent jobs sharing one cache (Seneca's setting): plain vs opportunistic PrepfsSampler.

    /usr/bin/python3 bench/sampling/jobs.py [--build build] [--repeats 3] [--jobs 1,2,3] [--epochs 3]

One prepfs mount (RAM = 30% of the dataset's bytes, no SSD, partition=fixed:100/0/0 so RAM holds raw
bytes as the auto plan does for a raw/ reader, eviction=auto) over prepfs-slowfs (2 ms per open, 1 ms
per read request, 25 MB/s shared: a remote store slow enough that what is fetched decides the pace).
K jobs (bench/sampling/job.py: a DataLoader with 2 persistent workers, batch 32, PrepfsSampler with
its own seed) start together and each reads E epochs of MNT/raw/train. Each (K, mode) is a fresh
mount; cases of a repeat run in a shuffled order. The DataLoader workers of every job run in one
memory cgroup (common.ReaderCgroup) limited to their own memory plus a few MiB, so the kernel's page
cache cannot share samples between jobs behind prepfs's back. Reported: source bytes per job-epoch
(slowfs counters), each job's samples/s, the makespan, CPU per sample: the jobs' (each job's own
and its workers' CPU from "go" to its last epoch, as job.py reports it), the daemon's and slowfs's
(from "go" to the jobs' end). Writes results/jobs.json.
"""
import argparse
import json
import os
import random
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
from common import log  # noqa: E402

SLOW_ARGS = ["--open-latency-ms", "2", "--read-latency-ms", "1", "--meta-latency-ms", "0.2",
             "--bandwidth-mbps", "25", "--threads", "64"]
JOB = os.path.join(common.HERE, "job.py")
# The workers' own memory charged to the cgroup (measured: 12 MiB for 4 workers; what they share
# with the job's process stays charged to its cgroup) plus room for a few MiB of page cache; the
# limit is on the cgroup of all jobs' workers together.
WORKER_MIB = 8
PAGE_CACHE_MIB = 16


def run_case(tools, work, dataset, total, k, mode, epochs, seed, window):
    slow_mnt = os.path.join(work, "slow")
    limit = (WORKER_MIB * 2 * k + PAGE_CACHE_MIB) << 20
    with common.SlowFs(tools, dataset, slow_mnt, SLOW_ARGS) as slow, \
            common.ReaderCgroup("prepfs-jobs", limit) as cg:
        opts = f"ram={int(0.3 * total)},ssd=0,partition=fixed:100/0/0"
        with common.Prepfs(tools, slow_mnt, os.path.join(work, "mnt"), opts, work) as fs:
            procs = [subprocess.Popen([common.PYTHON, JOB, fs.mnt, f"job{i}", mode, str(seed + i), str(epochs),
                                       os.path.join(cg.path, "cgroup.procs"), "--window", str(window)],
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                     for i in range(k)]
            for p in procs:  # the sample list, the sampler and the dataset listing are set up
                line = p.stdout.readline()
                if line.strip() != "ready":
                    raise RuntimeError(f"job failed to start: {line}{p.stderr.read()}")
            c0, st0, s0, d0, j0 = slow.counters(), fs.stats(), slow.cpu(), fs.cpu(), common.children_cpu()
            stop = threading.Event()

            peak_anon = [0]
            timeline = []  # (seconds, source bytes so far): per-epoch source bytes from the jobs' epoch times

            def watch():
                while not stop.is_set():
                    cg.sample()
                    peak_anon[0] = max(peak_anon[0], cg.stat()["anon"])
                    timeline.append((round(time.time() - t0, 2), slow.counters()["read_bytes"] - c0["read_bytes"]))
                    time.sleep(0.25)

            t0 = time.time()
            watcher = threading.Thread(target=watch)
            watcher.start()
            for p in procs:
                p.stdin.write("go\n")
                p.stdin.flush()
            outs = [p.communicate(timeout=3600) for p in procs]
            makespan = time.time() - t0
            stop.set()
            watcher.join()
            c1, st1 = slow.counters(), fs.stats()
            jobs = []
            for p, (out, err) in zip(procs, outs):
                if p.returncode != 0:
                    raise RuntimeError(f"job exited {p.returncode}: {err[-2000:]}")
                lines = [json.loads(l) for l in out.splitlines() if l.startswith("{")]
                jobs.append({"epochs": lines[:-1], **lines[-1]})
            # jobs_cpu_s: each job's CPU from "go" (job.py subtracts its setup: the torch import, the
            # ImageFolder scan over FUSE), like the daemon's and slowfs's; jobs_cpu_lifetime_s (the
            # RUSAGE_CHILDREN delta) also holds the setup, for reference only.
            return {"jobs": jobs, "makespan_s": makespan, "source_bytes": c1["read_bytes"] - c0["read_bytes"],
                    "source_opens": c1["opens"] - c0["opens"], "slowfs_cpu_s": slow.cpu() - s0,
                    "daemon_cpu_s": fs.cpu() - d0, "jobs_cpu_s": sum(j["cpu_s"] for j in jobs),
                    "jobs_cpu_from": "go", "jobs_cpu_lifetime_s": common.children_cpu() - j0,
                    "ram": {k2: st1["ram"][k2] - st0["ram"][k2] for k2 in ("hits", "misses", "inserts", "evictions", "rejected")},
                    "timeline": timeline,
                    "prefetch": {k2: st1["prefetch"][k2] - st0["prefetch"].get(k2, 0) for k2 in ("prefetched", "hits", "wasted", "bytes")},
                    "peak_page_cache": cg.peak_cache, "peak_anon": peak_anon[0], "oom_kills": cg.oom_kills(), "cgroup": cg.describe(),
                    "options": fs.options}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(common.REPO, "build"))
    ap.add_argument("--work", default="/var/tmp/prepfs-sampling-bench")
    ap.add_argument("--classes", type=int, default=30)
    ap.add_argument("--per-class", type=int, default=100)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--jobs", default="1,2,3")
    ap.add_argument("--modes", default="plain,opportunistic")
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--window", type=int, default=1024, help="PrepfsSampler window (opportunistic)")
    ap.add_argument("--out", default=os.path.join(common.HERE, "results", "jobs.json"))
    args = ap.parse_args()
    # Before any mount: the jobs' modules, installed here when missing (as root), then checked in
    # the interpreter the jobs run with.
    sys.path.insert(0, common.BENCH)
    from bench_deps import ensure_modules
    ensure_modules(["torch", "torchvision", "prepfs"], install="test", why="the jobs' DataLoader and PrepfsSampler")
    if subprocess.run([common.PYTHON, JOB, "--check-deps"]).returncode != 0:
        sys.exit(f"jobs.py: {common.PYTHON} cannot run {JOB} (above: what it lacks)")
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    tools = common.Tools(args.build, args.work)
    dataset = common.ensure_jpegs(args.work, args.classes, args.per_class)
    files = common.files_of(dataset)
    total = sum(os.path.getsize(os.path.join(dataset, p)) for p in files)
    data = common.header(sys.argv)
    data.update({"slowfs": " ".join(["prepfs-slowfs", "DATASET", "MNT"] + SLOW_ARGS), "epochs": args.epochs,
                 "window": args.window, "dataset": {"files": len(files), "bytes": total}, "runs": []})
    for rep in range(args.repeats):
        runs = [(k, m) for k in map(int, args.jobs.split(",")) for m in args.modes.split(",")]
        random.Random(rep).shuffle(runs)
        for k, mode in runs:
            res = run_case(tools, args.work, dataset, total, k, mode, args.epochs, 10 * rep, args.window)
            res.update({"k": k, "mode": mode, "repeat": rep, "load": common.loadavg()})
            per = res["source_bytes"] / (k * args.epochs) / total
            log(f"repeat {rep + 1}: {k} x {mode}: source {res['source_bytes'] / 1e6:.0f} MB = {per:.2f} dataset "
                f"per job-epoch, makespan {res['makespan_s']:.1f} s, page cache peak "
                f"{res['peak_page_cache'] / 2 ** 20:.1f} MiB, OOM kills {res['oom_kills']}")
            data["runs"].append(res)
            common.save(args.out, data)


if __name__ == "__main__":
    main()
