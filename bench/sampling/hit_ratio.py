#!/usr/bin/python3
"""Hit ratio of one job: every eviction policy on the same shuffled-epoch trace, beside Belady's MIN.

    /usr/bin/python3 bench/sampling/hit_ratio.py [--build build] [--repeats 3] [--epochs 5] [--cache 0.3]

Two datasets of the same file sizes: ImageNet-like JPEGs (samples: for lru, lfu, random and none the
partition's placement fixes which samples RAM keeps, as the daemon is deployed) and the same sizes
of random bytes named .bin (not images: every policy chooses its own members, the textbook setting).
Each repeat draws a trace of E shuffled epochs and replays it through a fresh mount per policy (cases
in a shuffled order), RAM = cache x dataset bytes, no SSD, no prefetch (prefetch_window=0: the policy
alone decides what is there). The reader is prepfs-readbench --in-order --threads 1 (the exact trace),
in a memory cgroup (see common.ReaderCgroup) whose page cache is emptied before every epoch. Offline,
offline.py replays the same trace through MIN, LRU, LFU, random and none at the same capacity.
Writes bench/sampling/results/hit_ratio.json; report.py turns it into results.md.
"""
import argparse
import os
import random
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
import offline  # noqa: E402
from common import log  # noqa: E402

# (case, eviction=, how the order is published, which datasets)
CASES = [
    ("lru", "lru", None, ("jpeg", "blob")),
    ("lfu", "lfu", None, ("jpeg", "blob")),
    ("random", "random", None, ("jpeg", "blob")),
    ("none", "none", None, ("jpeg", "blob")),
    ("belady", "belady", "whole", ("jpeg", "blob")),
    ("belady-epochwise", "belady", "epoch", ("jpeg", "blob")),
    ("importance", "importance", None, ("jpeg",)),  # importance is per sample index: images only
]
RECENT_FLOOR = 8 << 20
READER_LIMIT = 16 << 20  # readbench needs ~3 MiB; the rest is at most ~13 MiB of page cache


def run_case(tools, work, cg, dataset, files, trace, case, eviction, publish, ram, seed):
    mnt = os.path.join(work, "mnt")
    opts = f"ram={ram},ssd=0,prefetch_window=0,partition=fixed:100/0/0,eviction={eviction}"
    with common.Prepfs(tools, dataset, mnt, opts, work) as fs:
        mounted = fs.stats()["source"]["bytes"]
        if eviction == "importance":
            # A uniform trace gives importance nothing to know; give it a fixed, skewed value per
            # sample (as losses would be), so it keeps a fixed set: the highest-valued that fit.
            index = {raw: i for i, (raw, _) in enumerate(fs.samples())}
            rng = random.Random(seed)
            with open(fs.ctl("importance"), "w") as f:
                f.write("".join(f"{index[p]} {rng.expovariate(1.0):.6f}\n" for p in files))
        if publish == "whole":
            fs.publish("trace", ["raw/" + p for epoch in trace for p in epoch])
        setup = fs.stats()["source"]["bytes"] - mounted  # the sample list's header reads (importance)
        epochs = []
        for e, order in enumerate(trace):
            if publish == "epoch":  # as PrepfsSampler: at each epoch's start, reset + this epoch
                fs.publish("trace", ["raw/" + p for p in order], reset=True)
            listfile = os.path.join(work, "epoch.txt")
            with open(listfile, "w") as f:
                f.write("".join(p + "\n" for p in order))
            cg.drop()
            before, cpu0, dcpu0, t0 = fs.stats(), common.children_cpu(), fs.cpu(), time.time()
            r = subprocess.run([tools.readbench, os.path.join(mnt, "raw"), "--list", listfile, "--in-order",
                                "--threads", "1", "--json"], preexec_fn=cg.enter, capture_output=True, text=True)
            wall = time.time() - t0
            if r.returncode != 0:
                raise RuntimeError(f"readbench failed: {r.stderr}")
            after = fs.stats()
            cache = cg.sample()
            d = lambda a, b: after[a][b] - before[a][b]
            epochs.append({"accesses": len(order), "source_reads": d("source", "reads"),
                           "source_bytes": d("source", "bytes"), "ram_hits": d("ram", "hits"),
                           "ram_misses": d("ram", "misses"), "daemon_reads": d("fs", "reads"),
                           "unexpected_reads": after["jobs"]["unexpected_reads"], "wall_s": wall,
                           "reader_cpu_s": common.children_cpu() - cpu0, "daemon_cpu_s": fs.cpu() - dcpu0,
                           "page_cache_bytes": cache, "ram_entries": after["ram"]["entries"],
                           "ram_bytes": after["ram"]["bytes"], "recent_bytes": after["cache"]["recent_bytes"]})
        return {"options": fs.options, "setup_source_bytes": setup, "epochs": epochs}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(common.REPO, "build"))
    ap.add_argument("--work", default="/var/tmp/prepfs-sampling-bench")
    ap.add_argument("--classes", type=int, default=30)
    ap.add_argument("--per-class", type=int, default=100)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--cache", type=float, default=0.3)
    ap.add_argument("--out", default=os.path.join(common.HERE, "results", "hit_ratio.json"))
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    tools = common.Tools(args.build, args.work)
    jpeg = common.ensure_jpegs(args.work, args.classes, args.per_class)
    datasets = {"jpeg": jpeg, "blob": common.ensure_blobs(args.work, jpeg)}
    files = {k: common.files_of(v) for k, v in datasets.items()}
    sizes = {k: [os.path.getsize(os.path.join(datasets[k], p)) for p in files[k]] for k in datasets}
    total = {k: sum(v) for k, v in sizes.items()}
    ram = {k: int(args.cache * total[k]) for k in datasets}
    data = common.header(sys.argv)
    data.update({"epochs": args.epochs, "cache": args.cache, "repeats": [],
                 "datasets": {k: {"files": len(files[k]), "bytes": total[k], "ram": ram[k]} for k in datasets}})
    with common.ReaderCgroup("prepfs-hit-ratio", READER_LIMIT) as cg:
        data["page_cache"] = (f"readers in a {cg.describe()} (their page cache emptied before every epoch via "
                              f"{'memory.reclaim' if cg.v2 else 'memory.force_empty'})")
        for rep in range(args.repeats):
            seed = 100 + rep
            # The same order of files by index in both datasets: blob i is jpeg i's size.
            idx_trace = common.shuffled_epochs(list(range(len(files["jpeg"]))), args.epochs, seed)
            runs = [(c, k) for c in CASES for k in c[3]]
            random.Random(seed).shuffle(runs)
            rep_data = {"seed": seed, "measured": {}, "offline": {}}
            for k in datasets:
                for pol in offline.POLICIES:
                    rep_data["offline"].setdefault(k, {})[pol] = offline.simulate(pol, idx_trace, sizes[k], ram[k], seed)
                # The RAM tier also keeps up to 8 MiB of recent fills outside its budget (RamTier::kRecentFloor).
                rep_data["offline"][k]["min+8MiB"] = offline.simulate("min", idx_trace, sizes[k], ram[k] + RECENT_FLOOR)
            for (case, eviction, publish, _), k in runs:
                trace = [[files[k][i] for i in ep] for ep in idx_trace]
                log(f"repeat {rep + 1}/{args.repeats}: {k} {case}")
                res = run_case(tools, args.work, cg, datasets[k], files[k], trace, case, eviction, publish, ram[k], seed)
                ep = res["epochs"]
                hr = 1 - sum(e["source_reads"] for e in ep) / sum(e["accesses"] for e in ep)
                log(f"  hit ratio {hr:.3f} (offline MIN "
                    f"{sum(e['hits'] for e in rep_data['offline'][k]['min']) / sum(e['accesses'] for e in ep):.3f})")
                rep_data["measured"].setdefault(k, {})[case] = res
            data["repeats"].append(rep_data)
            common.save(args.out, data)


if __name__ == "__main__":
    main()
