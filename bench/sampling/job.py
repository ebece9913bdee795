#!/usr/bin/python3
"""One training job's input pipeline, for jobs.py: a real DataLoader over MNT/raw/train with
PrepfsSampler, reading every sample's bytes (no decode: the bench measures the cache, not JPEG
decoding on two shared cores).

    job.py MNT NAME MODE SEED EPOCHS CGROUP_PROCS [--window W] [--workers N]

It prints "ready" once the dataset, sampler and workers are set up, waits for a line on stdin
(so that concurrent jobs start together), then one JSON line per epoch and a last one with its
CPU time from "go" to the end of the last epoch: its own (all threads) and its DataLoader workers'
(read from /proc while they are alive), less what it had used at "go" (the torch import, the
ImageFolder scan over FUSE, the sampler's setup), so that only the timed epochs are charged. DataLoader workers move themselves into the readers' memory cgroup (CGROUP_PROCS is
its cgroup.procs; "-" for none), so the page cache they fill is bounded.
"""
import argparse
import json
import os
import resource
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from bench_deps import ensure_modules  # noqa: E402
from proc_cpu import cpu_seconds  # noqa: E402  (0 for a worker that is gone)

# jobs.py checks (and installs) these before it starts any job; this stops a job started by hand.
ensure_modules(["torch", "torchvision", "prepfs"], why="a job's DataLoader and PrepfsSampler")
import torch  # noqa: E402
from torchvision import datasets  # noqa: E402

from prepfs import PrepfsSampler  # noqa: E402

if sys.argv[1:] == ["--check-deps"]:  # jobs.py, before it starts: can this interpreter run a job?
    sys.exit(0)


def child_pids(it=None):
    """This process's live children: the DataLoader iterator's workers when it has them, and
    whatever /proc/self/task/*/children lists (every thread's forks)."""
    pids = {w.pid for w in getattr(it, "_workers", None) or [] if w.pid}
    try:
        for task in os.listdir("/proc/self/task"):
            with open(f"/proc/self/task/{task}/children") as f:
                pids.update(int(x) for x in f.read().split())
    except OSError:
        pass
    return pids


def cpu_now(it=None):
    """CPU seconds so far of this process, of its reaped children, and of its live children."""
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return (me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime
            + sum(cpu_seconds(pid, default=0.0) for pid in child_pids(it)))


def read_bytes(path):
    with open(path, "rb", buffering=0) as f:
        n = 0
        while b := f.read(1 << 20):
            n += len(b)
    return n


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mnt")
    ap.add_argument("name")
    ap.add_argument("mode")
    ap.add_argument("seed", type=int)
    ap.add_argument("epochs", type=int)
    ap.add_argument("cgroup_procs")
    ap.add_argument("--window", type=int, default=1024)
    ap.add_argument("--workers", type=int, default=2)
    a = ap.parse_args()

    def enter_cgroup(_worker_id):
        if a.cgroup_procs != "-":
            with open(a.cgroup_procs, "w") as f:
                f.write(str(os.getpid()))

    ds = datasets.ImageFolder(os.path.join(a.mnt, "raw", "train"), loader=read_bytes)
    sampler = PrepfsSampler(ds, a.mnt, seed=a.seed, mode=a.mode, job=a.name, window=a.window)
    loader = torch.utils.data.DataLoader(ds, batch_size=32, sampler=sampler, num_workers=a.workers,
                                         persistent_workers=True, worker_init_fn=enter_cgroup)
    print("ready", flush=True)
    sys.stdin.readline()
    t_start = time.time()
    cpu_go = cpu_now()  # the setup's CPU: not the samples'; persistent workers start at the first iter
    for epoch in range(a.epochs):
        sampler.set_epoch(epoch)
        t0 = time.time()
        samples = nbytes = 0
        it = iter(loader)  # publishes this epoch's order (the sampler's iter)
        for sizes, _ in it:
            samples += len(sizes)
            nbytes += int(sizes.sum())
        print(json.dumps({"epoch": epoch, "samples": samples, "bytes": nbytes, "start": t0 - t_start,
                          "seconds": time.time() - t0}), flush=True)
    wall = time.time() - t_start
    cpu_end = cpu_now(it)  # the persistent workers are still alive: read from /proc
    sampler.close()
    del it, loader  # the workers exit and are reaped
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    print(json.dumps({"cpu_s": cpu_end - cpu_go, "cpu_setup_s": cpu_go,
                      "cpu_lifetime_s": me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime,
                      "wall_s": wall}), flush=True)


if __name__ == "__main__":
    main()
