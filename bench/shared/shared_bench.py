#!/usr/bin/python3
"""1, 2 and 3 prepfs daemons on this machine, over one slow source (prepfs-slowfs), reading the
same dataset through decoded/ at once: with the shared tier on memcached, and without it.

Reports per case the cluster's source bytes per epoch (in datasets), each daemon's epoch time,
the cluster's decode count and CPU, and the shared tier's hits; writes shared.json (every run) and
results.md (medians) into --out (default bench/shared/results/). Cases are interleaved (a round runs
every case once, in a rotated order).

    /usr/bin/python3 bench/shared/shared_bench.py BUILD_DIR [--rounds 3] [--images 480] [--out DIR]
    /usr/bin/python3 bench/shared/scaling_model.py --bench [--json DIR/shared.json]
"""
import argparse
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.dirname(HERE))
from proc_cpu import cpu_seconds  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--images", type=int, default=480, help="images in the dataset (8 classes)")
    ap.add_argument("--readers", type=int, default=4, help="reader threads per daemon")
    ap.add_argument("--slow", default="--open-latency-ms 2 --read-latency-ms 1 --bandwidth-mbps 40 --threads 64",
                    help="prepfs-slowfs options: one remote-like store for the whole cluster")
    ap.add_argument("--out", default=os.path.join(HERE, "results"),
                    help="directory for shared.json and results.md (default: bench/shared/results)")
    a = ap.parse_args()
    build = os.path.abspath(a.build)
    os.environ["PREPFS_BIN"] = os.path.join(build, "tools", "prepfs")
    os.environ["SLOWFS_BIN"] = os.path.join(build, "bench", "prepfs-slowfs")
    sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
    from memcached_harness import Memcached, shared_option  # noqa: E402  (needs the env above)
    from prepfs_harness import Prepfs, SlowFs, gen_images  # noqa: E402

    if shutil.which("memcached") is None:
        subprocess.run([os.path.join(ROOT, "scripts", "install-deps.sh"), "test"], check=True)

    work = tempfile.mkdtemp(prefix="prepfs-shared-bench-")
    try:
        gen_images(os.path.join(work, "data"), 8, a.images // 8)
        src = os.path.join(work, "data")
        rels = sorted(os.path.relpath(os.path.join(d, n), src) for d, _, ns in os.walk(src) for n in ns)
        dataset_bytes = sum(os.path.getsize(os.path.join(src, r)) for r in rels)
        ppms = [r.rsplit(".", 1)[0] + ".ppm" for r in rels]
        cases = [(n, shared) for n in (1, 2, 3) for shared in (False, True)]
        results = {f"{n}-{'shared' if s else 'plain'}": [] for n, s in cases}
        run = 0
        for rnd in range(a.rounds):
            order = cases[rnd % len(cases):] + cases[:rnd % len(cases)]
            for n, shared in order:
                run += 1
                d = os.path.join(work, f"run{run}")
                os.makedirs(os.path.join(d, "slow"))
                servers = [Memcached(memory_mb=1024), Memcached(memory_mb=1024)] if shared else []
                slow = SlowFs(src, os.path.join(d, "slow"), *a.slow.split())
                daemons = []
                try:
                    for i in range(n):
                        mnt, ssd = os.path.join(d, f"mnt{i}"), os.path.join(d, f"ssd{i}")
                        os.makedirs(mnt)
                        os.makedirs(ssd, mode=0o700)
                        opts = "ram=64M,ssd=0,probe=mount,log_level=warn" + (
                            "," + shared_option(servers) + ",shared_forms=raw/decoded" if shared else "")
                        daemons.append(Prepfs(os.path.join(d, "slow"), mnt, ssd, opts))
                    slow.reset()
                    times = [0.0] * n
                    cpu0 = [cpu_seconds(x.proc.pid) for x in daemons]

                    def epoch(i):
                        t0 = time.monotonic()
                        parts = [ppms[k::a.readers] for k in range(a.readers)]
                        ts = [threading.Thread(target=read_all, args=(os.path.join(daemons[i].mnt, "decoded"), p))
                              for p in parts]
                        for t in ts:
                            t.start()
                        for t in ts:
                            t.join()
                        times[i] = time.monotonic() - t0

                    t0 = time.monotonic()
                    ths = [threading.Thread(target=epoch, args=(i,)) for i in range(n)]
                    for t in ths:
                        t.start()
                    for t in ths:
                        t.join()
                    wall = time.monotonic() - t0
                    c = slow.counters()
                    stats = [x.stats() for x in daemons]
                    r = {
                        "round": rnd, "load": os.getloadavg(), "wall_s": wall, "epoch_s": times,
                        "source_bytes": c["read_bytes"], "source_opens": c["opens"],
                        "source_datasets": c["read_bytes"] / dataset_bytes,
                        "decodes": sum(s["transform"]["decoded"] for s in stats),
                        "transform_cpu_s": sum(s["transform"]["cpu_seconds"] for s in stats),
                        "daemon_cpu_s": sum(cpu_seconds(x.proc.pid) - c0 for x, c0 in zip(daemons, cpu0)),
                        "shared_hits": sum(s["shared"]["by_form"]["decoded"]["hits"] + s["shared"]["by_form"]["raw"]["hits"]
                                           for s in stats) if shared else 0,
                        "lease_waits": sum(sum(f["lease_waits"] for f in s["shared"]["by_form"].values())
                                           for s in stats) if shared else 0,
                    }
                    results[f"{n}-{'shared' if shared else 'plain'}"].append(r)
                    print(f"round {rnd} {n} daemons {'shared' if shared else 'plain '}: source "
                          f"{r['source_datasets']:.2f} datasets, epochs {', '.join(f'{t:.2f}' for t in times)} s, "
                          f"decodes {r['decodes']}, daemon CPU {r['daemon_cpu_s']:.2f} s", flush=True)
                finally:
                    for x in daemons:
                        x.stop()
                    slow.stop()
                    for m in servers:
                        m.stop()
                    shutil.rmtree(d, ignore_errors=True)
        info = {"command": "/usr/bin/python3 bench/shared/shared_bench.py " + " ".join(sys.argv[1:]),
                "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "nproc": os.cpu_count(),
                "kernel": platform.release(), "images": len(rels), "dataset_bytes": dataset_bytes,
                "readers_per_daemon": a.readers, "slowfs": a.slow}
        os.makedirs(a.out, exist_ok=True)
        with open(os.path.join(a.out, "shared.json"), "w") as f:
            json.dump({"info": info, "results": results}, f, indent=1)
        write_md(info, results, os.path.join(a.out, "results.md"))
    finally:
        shutil.rmtree(work, ignore_errors=True)


def read_all(root, rels):
    for r in rels:
        with open(os.path.join(root, r), "rb") as f:
            while f.read(1 << 20):
                pass


def med(xs):
    xs = sorted(xs)
    return xs[len(xs) // 2] if len(xs) % 2 else (xs[len(xs) // 2 - 1] + xs[len(xs) // 2]) / 2


def rng(xs, fmt):
    return f"{fmt.format(med(xs))} ({fmt.format(min(xs))}–{fmt.format(max(xs))})"


def loads(rs):
    return ", ".join(f"{r['load'][0]:.1f}" for r in rs)


def write_md(info, results, path):
    w = [f"# Shared tier: 1, 2 and 3 daemons over one slow source", "",
         f"- command: `{info['command']}`", f"- date: {info['date']}; nproc {info['nproc']}; kernel {info['kernel']}",
         f"- dataset: {info['images']} JPEGs, {info['dataset_bytes'] / 1e6:.1f} MB; each daemon reads all of decoded/ "
         f"once ({info['readers_per_daemon']} reader threads), all daemons at once; ram=64M, ssd=0 per daemon",
         f"- source: prepfs-slowfs `{info['slowfs']}`, one for the cluster; shared: two memcached servers (-m 1024 -I 2m) on loopback, shared_forms=raw/decoded",
         "- medians over rounds (min–max); cases interleaved within each round", "",
         "| daemons | shared tier | cluster source bytes per epoch (datasets) | epoch s per daemon (median over every daemon of every round) | decodes in the cluster | daemon CPU s (cluster) | shared hits | load (1 min) |",
         "|---|---|---|---|---|---|---|---|"]
    for name, rs in results.items():
        n, mode = name.split("-")
        w.append(f"| {n} | {'yes' if mode == 'shared' else 'no'} | {rng([r['source_datasets'] for r in rs], '{:.2f}')} | "
                 f"{rng([t for r in rs for t in r['epoch_s']], '{:.2f}')} | {rng([r['decodes'] for r in rs], '{:.0f}')} | "
                 f"{rng([r['daemon_cpu_s'] for r in rs], '{:.2f}')} | {rng([r['shared_hits'] for r in rs], '{:.0f}')} | "
                 f"{loads(rs)} |")
    w.append("")
    w.append("Raw numbers: shared.json, next to this file.")
    with open(path, "w") as f:
        f.write("\n".join(w) + "\n")


if __name__ == "__main__":
    main()
