#!/usr/bin/python3
"""The cluster model of docs/SCALING.md: epoch time and source egress of N nodes reading one
dataset, with and without the shared tier, and which resource binds. Pure arithmetic on stated
inputs; --bench checks it against bench/shared's measurements on this machine.

    /usr/bin/python3 bench/shared/scaling_model.py            # the 1..64-node table of SCALING.md
    /usr/bin/python3 bench/shared/scaling_model.py --bench    # predicted vs measured, bench/shared
    /usr/bin/python3 bench/shared/scaling_model.py --bench --json DIR/shared.json   # another run's
"""
import argparse
import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))


def epoch(n, p, shared, replicated, cold=False):
    """Seconds per epoch and what binds, for n nodes. replicated: every node reads the whole
    dataset each epoch (concurrent jobs, sweeps, the bench); else each reads 1/n (data parallel).
    cold: the first epoch (every cache empty); else a steady epoch."""
    S, s_raw, s_dec = p["samples"], p["raw_bytes"], p["decoded_bytes"]
    reads_per_node = S if replicated else S / n
    # Fraction of a node's reads its own RAM+SSD answers: decoded pixels kept (as the plan does
    # for a decoded/ reader), a random sample of the set, so their share of the set.
    local = 0.0 if cold else min(1.0, p["node_cache"] / (S * s_dec))
    # Fraction the shared tier answers, of what a node's own tiers miss: decoded pixels up to its
    # capacity. In a cold epoch it is empty, but a lease makes one node fetch and decode each
    # sample while the others wait for it and read what it published.
    cap = min(1.0, p["shared_cache_per_node"] * n / (S * s_dec)) if shared else 0.0
    if cold and shared:
        cluster_fetches = S  # each sample once, by whichever node asked first
        decodes_per_node = S / n
        shared_reads_per_node = reads_per_node - S / n if replicated else 0.0
    else:
        miss = (1 - local) * (1 - cap)
        # What no tier holds is fetched by every node that reads it.
        cluster_fetches = n * reads_per_node * miss
        decodes_per_node = reads_per_node * miss
        shared_reads_per_node = reads_per_node * (1 - local) * cap
    egress = cluster_fetches * s_raw
    local_reads = reads_per_node * local
    times = {
        "source bandwidth": egress / p["source_bw"],
        "source requests": cluster_fetches / p["source_rps"],
        # One resource: a node's cores do its decodes, its shared-tier reads and its local hits.
        "CPU": (decodes_per_node * p["c_dec"] + shared_reads_per_node * p["c_shared"] + local_reads * p["c_local"])
        / p["cores"],
        "shared tier": shared_reads_per_node * s_dec / p["node_nic_bw"],
    }
    bind = max(times, key=times.get)
    return times[bind], bind, egress


def table(p):
    rows = []
    for replicated in (True, False):
        for n in (1, 2, 4, 8, 16, 32, 64):
            t0, b0, e0 = epoch(n, p, False, replicated)
            t1, b1, e1 = epoch(n, p, True, replicated)
            rows.append((("every node reads all" if replicated else "data parallel (1/N each)"), n,
                         t0, b0, e0, t1, b1, e1))
    return rows


# A cluster of GPU nodes over NFS or S3, ImageNet-1k. Per node: 256 GB of RAM+SSD for prepfs, 32
# cores for decodes, a 25 Gb/s NIC, and 128 GB of memcached (RAM + extstore) for the shared tier.
# c_dec and c_shared are this machine's (bench/shared, daemon CPU per image: a miss fetched and
# decoded, a shared-tier hit of decoded pixels); c_local is stated (a local RAM hit).
CLUSTER = {
    "samples": 1_281_167, "raw_bytes": 110e3, "decoded_bytes": 562e3,
    "node_cache": 256e9, "shared_cache_per_node": 128e9, "cores": 32,
    "source_bw": 2.5e9, "source_rps": 20_000, "node_nic_bw": 3.1e9,
    "c_dec": 1.6e-3, "c_shared": 0.64e-3, "c_local": 0.1e-3,
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bench", action="store_true", help="compare the model with a shared_bench.py run")
    ap.add_argument("--json", help="that run's shared.json (default: bench/shared/results/shared.json); "
                    "implies --bench")
    a = ap.parse_args()
    if a.json:
        a.bench = True
    else:
        a.json = os.path.join(HERE, "results", "shared.json")
    if not a.bench:
        print("| pattern | nodes | epoch s, no shared tier | binds | source GB/epoch | epoch s, shared tier | binds | source GB/epoch |")
        print("|---|---:|---:|---|---:|---:|---|---:|")
        for pat, n, t0, b0, e0, t1, b1, e1 in table(CLUSTER):
            print(f"| {pat} | {n} | {t0:,.0f} | {b0} | {e0 / 1e9:,.0f} | {t1:,.0f} | {b1} | {e1 / 1e9:,.0f} |")
        return
    with open(a.json) as f:
        d = json.load(f)
    print(f"measured: {a.json} ({d['info']['command']}, {d['info']['date']})")
    info, res = d["info"], d["results"]
    med = lambda xs: sorted(xs)[len(xs) // 2]
    S = info["images"]
    one, one_sh, three_sh = res["1-plain"], res["1-shared"], res["3-shared"]
    # This machine: every "node" shares its 2 cores and one slowfs of 40 MB/s; no local hits
    # (ram=64M, one cold epoch); memcached on loopback (no network bound).
    c_dec = med([r["daemon_cpu_s"] for r in one]) / S  # fetch + decode + serve, per image
    # What the two other daemons spent per image they read from the shared tier.
    c_shared = (med([r["daemon_cpu_s"] for r in three_sh]) - med([r["daemon_cpu_s"] for r in one_sh])) / (2 * S)
    p = {"samples": S, "raw_bytes": info["dataset_bytes"] / S, "decoded_bytes": 1.0, "node_cache": 0,
         "shared_cache_per_node": 1e30, "cores": 2, "source_bw": 40e6, "source_rps": 64 / 0.004,
         "node_nic_bw": 1e30, "c_dec": c_dec, "c_shared": c_shared, "c_local": 0.0}
    print(f"inputs: c_dec {c_dec * 1e3:.2f} ms (1 daemon, no shared tier), c_shared {c_shared * 1e3:.2f} ms "
          f"(3 daemons sharing, less 1) per image")
    print("| daemons | shared | predicted source datasets | measured | predicted epoch s | binds "
          "| measured epoch s (median over rounds of each round's slowest daemon) |")
    print("|---:|---|---:|---:|---:|---|---:|")
    for n in (1, 2, 3):
        for shared in (False, True):
            # n nodes on one machine: the cores are shared, so the CPU term counts all n nodes' work.
            q = dict(p, cores=2 / n)
            t, b, e = epoch(n, q, shared, True, cold=True)
            m = res[f"{n}-{'shared' if shared else 'plain'}"]
            print(f"| {n} | {'yes' if shared else 'no'} | {e / info['dataset_bytes']:.2f} | "
                  f"{med([r['source_datasets'] for r in m]):.2f} | {t:.2f} | {b} | "
                  f"{med([max(r['epoch_s']) for r in m]):.2f} |")


if __name__ == "__main__":
    main()
