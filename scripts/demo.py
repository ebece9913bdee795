"""Demo driver (scripts/demo.sh runs it): prepfs in front of a slow remote-like source.

The source is bench/slowfs.cc (prepfs-slowfs) over a generated dataset: every open, read and
metadata call pays a latency and all reads share one bandwidth cap, and its counters say what it
served. prepfs mounts that, so what the demo prints is what a cache in front of a remote store buys:
cold vs warm epochs, a published order's prefetch, two jobs sharing one cache, then the image views.

Every reader drops the pages it read from the kernel's page cache (posix_fadvise DONTNEED on each
file), so a later pass reaches prepfs instead of being answered by the kernel. That touches only the
demo's own files, unlike a global drop_caches.
"""
import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The sampler package from this checkout: the demo must not need `meson install`.
sys.path.insert(0, os.path.join(REPO, "tools", "python"))
from prepfs import MountClient, PrepfsSampler  # noqa: E402
sys.path.insert(0, os.path.join(REPO, "bench"))
from mounts import Daemon, SlowFs, mounts_under  # noqa: E402  (bench/mounts.py)

# The slow source: a remote object store's per-request latencies and a shared bandwidth cap.
SLOW = {"open": 2.0, "read": 1.0, "meta": 0.2, "mbps": 40.0}
SLOW_ARGS = ["--open-latency-ms", str(SLOW["open"]), "--read-latency-ms", str(SLOW["read"]),
             "--meta-latency-ms", str(SLOW["meta"]), "--bandwidth-mbps", str(SLOW["mbps"]), "--threads", "64"]


def read_file(path):
    with open(path, "rb", buffering=0) as f:
        n = 0
        while b := f.read(1 << 20):
            n += len(b)
        os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
    return n


def files_under(root):
    out = []
    for dirpath, _, names in os.walk(root):
        out += [os.path.join(dirpath, n) for n in names]
    return sorted(out)


class Prepfs(Daemon):
    def __init__(self, exe, src, mnt, ssd_dir, opts, log):
        super().__init__([exe, src, mnt, "-f", "-o", f"ssd_dir={ssd_dir},{opts}"], mnt,
                         lambda: os.path.exists(self.ctl("stats")), "prepfs", log)

    def ctl(self, name):
        return os.path.join(self.mnt, ".prepfs", name)

    def stats(self):
        with open(self.ctl("stats")) as f:
            return json.load(f)


class Counted:
    """What one step cost: wall time, and the source's and the daemon's counters across it."""

    def __init__(self, slow, fs):
        self.slow, self.fs = slow, fs

    def __enter__(self):
        self.c0, self.s0, self.t0 = self.slow.counters(), self.fs.stats(), time.time()
        return self

    def __exit__(self, *exc):
        self.secs = time.time() - self.t0
        c1, s1 = self.slow.counters(), self.fs.stats()
        self.opens = c1["opens"] - self.c0["opens"]
        self.source_mb = (c1["read_bytes"] - self.c0["read_bytes"]) / 1e6
        self.d = lambda a, b: s1[a][b] - self.s0[a][b]


def row(label, files, nbytes, secs, extra):
    print(f"  {label:<38} {files:4d} files {nbytes / 1e6:6.1f} MB {secs:6.2f} s {files / secs:6.0f} files/s | {extra}")


def fresh(path):
    shutil.rmtree(path, ignore_errors=True)
    os.makedirs(path)
    return path


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--classes", type=int, default=8)
    ap.add_argument("--per-class", type=int, default=40)
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    args = ap.parse_args()
    prepfs = os.path.abspath(os.path.join(args.build, "tools", "prepfs"))
    slowfs_exe = os.path.abspath(os.path.join(args.build, "bench", "prepfs-slowfs"))
    # SIGTERM (a CI timeout, kill) unwinds like Ctrl-C, so the finally below unmounts everything.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))

    work = tempfile.mkdtemp(prefix="prepfs-demo-")
    src, slow_mnt, mnt = (os.path.join(work, d) for d in ("dataset", "slow", "mnt"))
    os.makedirs(slow_mnt)
    os.makedirs(mnt)
    log = open(os.path.join(work, "daemons.log"), "ab")
    daemons = []
    try:
        print(f"== generating {args.classes}x{args.per_class} ImageNet-like JPEGs in {src}", flush=True)
        subprocess.run([sys.executable, os.path.join(REPO, "bench", "gen_dataset.py"), src, "--classes",
                        str(args.classes), "--per-class", str(args.per_class)], check=True)
        slow = SlowFs(slowfs_exe, src, slow_mnt, SLOW_ARGS, log)
        daemons.append(slow)
        print(f"== the source: prepfs-slowfs at {slow_mnt}, a remote-like store: {SLOW['open']:g} ms per open, "
              f"{SLOW['read']:g} ms per read, {SLOW['mbps']:g} MB/s shared")
        rel = [os.path.relpath(p, src) for p in files_under(os.path.join(src, "train"))]
        total = sum(os.path.getsize(os.path.join(src, r)) for r in rel)

        # --- 1. cold vs warm -------------------------------------------------------------------
        # raw pinned in both tiers, RAM for about half the files: each sample lives in one tier, so
        # the warm pass shows both, and a restart keeps the SSD half.
        opts = f"ram={int(total * 0.5)},ssd=1G,partition=fixed:100/0/0"
        ssd = fresh(os.path.join(work, "cache"))
        print(f"\n== 1. cold vs warm: prepfs at {mnt} over the slow source ({opts})")
        c0 = slow.counters()
        t0 = time.time()
        nbytes = sum(read_file(os.path.join(slow_mnt, r)) for r in rel)
        secs = time.time() - t0
        c1 = slow.counters()
        row("the slow source itself, no prepfs", len(rel), nbytes, secs,
            f"source {c1['opens'] - c0['opens']:4d} opens {(c1['read_bytes'] - c0['read_bytes']) / 1e6:5.1f} MB")

        def raw_pass(fs, label):
            with Counted(slow, fs) as c:
                n = sum(read_file(os.path.join(mnt, "raw", r)) for r in rel)
            row(label, len(rel), n, c.secs, f"source {c.opens:4d} opens {c.source_mb:5.1f} MB, "
                f"hits RAM {c.d('ram', 'hits'):4d} SSD {c.d('ssd', 'hits'):4d}")

        fs = Prepfs(prepfs, slow_mnt, mnt, ssd, opts, log)
        daemons.append(fs)
        raw_pass(fs, "epoch 1 cold (empty cache)")
        raw_pass(fs, "epoch 2 warm (RAM + SSD tiers)")
        fs.stop()
        fs = Prepfs(prepfs, slow_mnt, mnt, ssd, opts, log)
        daemons.append(fs)
        raw_pass(fs, "epoch 3 after a restart (SSD kept)")
        fs.stop()

        # --- 2. a published order ----------------------------------------------------------------
        # One reader in a shuffled order, on an empty cache: without the order every miss waits for
        # the source; with it (what PrepfsSampler writes each epoch) prepfs fetches ahead.
        print("\n== 2. a published order: fresh mount, empty cache, one reader in a shuffled order")
        order = rel[:]
        random.Random(1).shuffle(order)
        for published in (False, True):
            fs = Prepfs(prepfs, slow_mnt, mnt, fresh(os.path.join(work, "cache")), "ram=256M,ssd=0", log)
            daemons.append(fs)
            if published:  # what PrepfsSampler does at the start of each epoch
                MountClient(mnt).publish("demo", (f"raw/{r}" for r in order), reset=True)
            with Counted(slow, fs) as c:
                n = sum(read_file(os.path.join(mnt, "raw", r)) for r in order)
            label = "order published (.prepfs/order)" if published else "order not published"
            row(label, len(order), n, c.secs, f"source {c.opens:4d} opens {c.source_mb:5.1f} MB, "
                f"prefetched {c.d('prefetch', 'prefetched'):3d}, "
                f"reads from RAM {c.d('ram', 'hits'):3d}, waited on a fetch in flight {c.d('prefetch', 'late'):3d}")
            fs.stop()

        # --- 3. two jobs sharing -----------------------------------------------------------------
        # Two jobs read one epoch each at the same time through PrepfsSampler, with a cache of 30% of
        # the dataset. Plain: each draws its own permutation, so they meet in the cache only by
        # chance. Opportunistic (Seneca): each takes samples that are cached now first, so what one
        # job fetched the other consumes before it is evicted.
        opts = f"ram={int(total * 0.3)},ssd=0,partition=fixed:100/0/0"
        print(f"\n== 3. two jobs sharing one cache ({opts}: 30% of the dataset), one epoch each, together")
        for mode in ("plain", "opportunistic"):
            fs = Prepfs(prepfs, slow_mnt, mnt, fresh(os.path.join(work, "cache")), opts, log)
            daemons.append(fs)
            paths = [os.path.join(mnt, "raw", r) for r in rel]
            done = {}

            def job(i):
                sampler = PrepfsSampler(paths, mnt, seed=10 + i, paths=paths, mode=mode, job=f"job{i}")
                t = time.time()
                done[i] = (sum(read_file(paths[k]) for k in sampler), time.time() - t)
                sampler.close()

            with Counted(slow, fs) as c:
                threads = [threading.Thread(target=job, args=(i,)) for i in (0, 1)]
                for t in threads:
                    t.start()
                for t in threads:
                    t.join()
            if len(done) != 2:
                sys.exit("a job failed (see above)")
            rates = " + ".join(f"{len(paths) / s:.0f}" for _, s in done.values())
            row(f"{mode}: 2 jobs", 2 * len(paths), sum(n for n, _ in done.values()), c.secs,
                f"source {c.source_mb:5.1f} MB = {c.source_mb * 1e6 / total:.2f}x the dataset; "
                f"jobs {rates} files/s")
            fs.stop()

        # --- 4. the image views ------------------------------------------------------------------
        print("\n== 4. the image views: remount with ram=64M, partition=auto (the default)")
        fs = Prepfs(prepfs, slow_mnt, mnt, fresh(os.path.join(work, "cache")), "ram=64M,ssd=1G", log)
        daemons.append(fs)
        print("   top level:", sorted(os.listdir(mnt)))
        for view, label in (("decoded", "decoded/ (PIL-exact PPM)"), ("augmented", "augmented/ (rrc 224 + flip)")):
            before, t0 = fs.stats(), time.time()
            files = files_under(os.path.join(mnt, view))
            nbytes = sum(read_file(p) for p in files)
            t = fs.stats()["transform"]
            row(label, len(files), nbytes, time.time() - t0,
                f"rendered {t['decoded'] - before['transform']['decoded']} decoded, "
                f"{t['augmented'] - before['transform']['augmented']} augmented "
                f"({t['augmented_from_decoded'] - before['transform']['augmented_from_decoded']} from cached pixels)")
        one = files_under(os.path.join(mnt, "augmented"))[0]
        variants = {open(one, "rb").read() for _ in range(3)}
        print(f"   three opens of {os.path.relpath(one, mnt)} gave {len(variants)} different variants")
        time.sleep(2.5)  # two profiler ticks, so the plan below stands on measurements
        with open(fs.ctl("plan.json")) as f:
            plan = json.load(f)
        placed = ", ".join(f"{form} {n['ram']:.0f} RAM/{n['ssd']:.0f} SSD" for form, n in plan["placement"].items())
        rate = lambda v: "unlimited" if v is None else f"{v:.0f}"  # JSON null: nothing constrains it
        # Like with like: the planner compares placements alone; the expected rate adds the recent
        # fills in the RAM the placement leaves free (docs/MODEL.md, "The free room").
        print(f"   partition=auto: {plan['plans']} plan(s), view {plan['inputs']['view']}/: {placed}; "
              f"predicted {rate(plan['placement_alone']['predicted'])} samples/s against "
              f"{rate(plan['alternatives']['no cache'])}/s with no cache, "
              f"bound by {plan['placement_alone']['binding']} "
              f"({rate(plan['predicted'])}/s expected with the recent fills); 'prepctl {mnt} plan' explains it")
        fs.stop()
        slow.stop()
        kept = f"; the daemons' log is {log.name}" if args.keep else " (--keep keeps the work directory)"
        print(f"\n== unmounted cleanly: {not mounts_under(work)}{kept}")
    except (RuntimeError, TimeoutError) as e:  # a daemon that did not mount
        sys.exit(f"{e}; see {log.name} (--keep keeps it)")
    finally:
        for d in reversed(daemons):  # prepfs before the source it reads
            d.stop()
        for p in mounts_under(work):
            subprocess.run(["umount", "-l", p], stderr=subprocess.DEVNULL)
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
