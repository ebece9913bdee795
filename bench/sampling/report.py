#!/usr/bin/python3
"""Turns bench/sampling/results/*.json into bench/sampling/results.md (markdown tables) and PNG plots.

    /usr/bin/python3 bench/sampling/report.py

Each table gives the median over repeats with the range beside it, so a reader sees the spread on
this shared machine; each section names the command, commit, machine and load averages it ran at.
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import HERE, median  # noqa: E402

sys.path.insert(0, os.path.dirname(HERE))
from bench_deps import ensure_matplotlib  # noqa: E402

RESULTS = os.path.join(HERE, "results")


# Numbers in results/ produced by a method since corrected: each section adds a line, and the
# report lists them at its top.
STALE = []


def load(name):
    path = os.path.join(RESULTS, name)
    return json.load(open(path)) if os.path.exists(path) else None


def spread(xs, fmt="{:.3f}"):
    return f"{fmt.format(median(xs))} ({fmt.format(min(xs))}–{fmt.format(max(xs))})"


def provenance(d):
    return (f"`{d['command']}` — {d['date']}, commit {d['commit']}, {d['machine']}; "
            f"load average {d['load_start']} at the start, {d['load_end']} at the end.\n")


def hit_ratio(d, out):
    out.append("## Hit ratio, one job\n")
    out.append(provenance(d))
    out.append(f"Cache = {d['cache']:.0%} of the dataset (RAM tier only, prefetch off), {d['epochs']} shuffled "
               f"epochs, {len(d['repeats'])} repeats (a fresh trace each). Page cache: {d['page_cache']}.\n")
    for ds, info in d["datasets"].items():
        what = ("ImageNet-like JPEGs: for lru, lfu, random and none the partition's placement fixes "
                "which samples RAM keeps" if ds == "jpeg" else
                "the same sizes of random bytes (.bin, not images): every policy picks its own members")
        out.append(f"\n### {ds}: {info['files']} files, {info['bytes'] / 1e6:.0f} MB, RAM {info['ram'] / 1e6:.0f} MB — {what}\n")
        out.append("Hit ratio = 1 − source reads / accesses over all epochs (the first is cold for every policy). "
                   "MIN is Belady's offline MIN on the same trace at the same capacity; MIN+8MiB adds the "
                   "8 MiB of recent fills the RAM tier keeps outside its budget (the fair reference).\n")
        out.append("| policy | measured hit ratio | epochs 2–5 | offline same policy | ÷ MIN | ÷ MIN+8MiB | "
                   "wall ms/item | CPU ms/item (reader+daemon) |")
        out.append("|---|---|---|---|---|---|---|---|")
        cases = list(d["repeats"][0]["measured"][ds])
        order = ["lru", "lfu", "random", "none", "belady", "belady-epochwise", "importance"]
        for case in sorted(cases, key=order.index):
            hr, late, offl, vs_min, vs_min8, wall, cpu = [], [], [], [], [], [], []
            for rep in d["repeats"]:
                ep = rep["measured"][ds][case]["epochs"]
                acc = sum(e["accesses"] for e in ep)
                h = 1 - sum(e["source_reads"] for e in ep) / acc
                hr.append(h)
                late.append(1 - sum(e["source_reads"] for e in ep[1:]) / sum(e["accesses"] for e in ep[1:]))
                o = rep["offline"][ds]
                mn = sum(e["hits"] for e in o["min"]) / acc
                mn8 = sum(e["hits"] for e in o["min+8MiB"]) / acc
                vs_min.append(h / mn)
                vs_min8.append(h / mn8)
                pol = {"belady": "min", "belady-epochwise": "min"}.get(case, case)
                if pol in o and pol != "min":
                    offl.append(sum(e["hits"] for e in o[pol]) / acc)
                wall.append(1e3 * sum(e["wall_s"] for e in ep) / acc)
                cpu.append(1e3 * sum(e["reader_cpu_s"] + e["daemon_cpu_s"] for e in ep) / acc)
            name = {"belady": "belady (whole trace published)",
                    "belady-epochwise": "belady (published epoch by epoch)"}.get(case, case)
            out.append(f"| {name} | {spread(hr)} | {spread(late)} | {spread(offl) if offl else '—'} | "
                       f"{spread(vs_min, '{:.2f}')} | {spread(vs_min8, '{:.2f}')} | {spread(wall, '{:.2f}')} | "
                       f"{spread(cpu, '{:.2f}')} |")
        mins = [sum(e["hits"] for e in r["offline"][ds]["min"]) / sum(e["accesses"] for e in r["offline"][ds]["min"])
                for r in d["repeats"]]
        mins8 = [sum(e["hits"] for e in r["offline"][ds]["min+8MiB"]) / sum(e["accesses"] for e in r["offline"][ds]["min"])
                 for r in d["repeats"]]
        out.append(f"| offline MIN | {spread(mins)} | | | 1 | | | |")
        out.append(f"| offline MIN+8MiB | {spread(mins8)} | | | | 1 | | |")


def jobs(d, out):
    out.append("\n## Concurrent jobs sharing one cache\n")
    out.append(provenance(d))
    ds = d["dataset"]
    runs = d["runs"]
    out.append(f"Dataset {ds['files']} files, {ds['bytes'] / 1e6:.0f} MB; source `{d['slowfs']}`; "
               f"prepfs RAM = 30% of the dataset, no SSD; {d['epochs']} epochs per job; each job a DataLoader "
               f"(2 persistent workers, batch 32) with PrepfsSampler (opportunistic window {d['window']}); "
               f"page cache: the workers of all jobs in one memory cgroup per run, its limit in the table "
               f"(peak page cache per run in the raw JSON); {len({r['repeat'] for r in runs})} repeats, "
               f"cases shuffled within each.\n")
    if any(r.get("jobs_cpu_from") != "go" for r in runs):
        STALE.append("*Concurrent jobs*: the CPU ms/sample column (the jobs' part counted each job's setup; "
                     "see that section)")
        out.append("**CPU ms/sample below is overstated** in the runs recorded before job.py reported its "
                   "CPU from \"go\": their jobs' part is each job's whole lifetime, its setup included (the "
                   "interpreter and torch import, the ImageFolder scan over FUSE, the sampler's setup), while "
                   "the daemon's and slowfs's count from \"go\". Each value holds that setup CPU spread over "
                   "the job's samples, so neither the values nor their ratios between rows are the timed "
                   "epochs' CPU; a re-run is pending.\n")
    one = [r["source_bytes"] for r in runs if r["k"] == 1]
    one_plain = [r["source_bytes"] for r in runs if r["k"] == 1 and r["mode"] == "plain"]
    ref = median(one_plain) if one_plain else median(one)
    out.append("| jobs | mode | readers' cgroup | source bytes per job-epoch (× dataset) | all jobs' source bytes ÷ one plain job's | "
               "samples/s per job | makespan s | CPU ms/sample (jobs+daemon+slowfs) | load at the end |")
    out.append("|---|---|---|---|---|---|---|---|---|")
    for k in sorted({r["k"] for r in runs}):
        for mode in ("plain", "opportunistic"):
            rs = [r for r in runs if r["k"] == k and r["mode"] == mode]
            if not rs:
                continue
            per = [r["source_bytes"] / (k * d["epochs"]) / ds["bytes"] for r in rs]
            rel = [r["source_bytes"] / ref for r in rs]
            rate = [j["epochs"][-1]["samples"] * len(j["epochs"]) / j["wall_s"] for r in rs for j in r["jobs"]]
            mk = [r["makespan_s"] for r in rs]
            samples = [k * d["epochs"] * ds["files"] for r in rs]
            cpu = [1e3 * (r["jobs_cpu_s"] + r["daemon_cpu_s"] + r["slowfs_cpu_s"]) / s for r, s in zip(rs, samples)]
            cgroups = sorted({r["cgroup"] for r in rs})  # each run's own limit (it grows with k)
            out.append(f"| {k} | {mode} | {'; '.join(cgroups)} | {spread(per, '{:.2f}')} | {spread(rel, '{:.2f}')} | "
                       f"{spread(rate, '{:.0f}')} | {spread(mk, '{:.1f}')} | {spread(cpu, '{:.2f}')} | "
                       f"{', '.join(r['load'].split()[0] for r in rs)} |")


def cold(d, out):
    out.append("\n## Cold epoch over the slow source\n")
    out.append(provenance(d))
    ds = d["dataset"]
    out.append(f"Dataset {ds['files']} files, {ds['bytes'] / 1e6:.0f} MB, read once in a shuffled order by "
               f"prepfs-readbench --in-order; source `{d['slowfs']}` (cap {d['cap_mbps']:.0f} MB/s); prepfs "
               f"{d['prepfs']}. Every file is read once, so the page cache cannot answer anything.\n")
    out.append("| readers | case | MB/s | × cap | source MB | CPU ms/file (reader+daemon+slowfs) | load (1 min) |")
    out.append("|---|---|---|---|---|---|---|")
    runs = d["runs"]
    for t in sorted({r["threads"] for r in runs}):
        for case in ("direct", "cold", "cold+order"):
            rs = [r for r in runs if r["threads"] == t and r["case"] == case]
            if not rs:
                continue
            mbps = [r["bench"]["mb_per_s"] for r in rs]
            cap = [m / d["cap_mbps"] for m in mbps]
            src = [r["source_bytes"] / 1e6 for r in rs]
            cpu = [1e3 * (r["reader_cpu_s"] + r["daemon_cpu_s"] + r["slowfs_cpu_s"]) / ds["files"] for r in rs]
            out.append(f"| {t} | {case} | {spread(mbps, '{:.1f}')} | {spread(cap, '{:.2f}')} | {spread(src, '{:.0f}')} | "
                       f"{spread(cpu, '{:.2f}')} | {', '.join(r['load'].split()[0] for r in rs)} |")


def importance(d, out):
    out.append("\n## Importance on a small real training run\n")
    out.append(provenance(d))
    ds = d["dataset"]
    runs = d["runs"]
    out.append(f"Generated CIFAR-like set, {ds['files']} JPEGs, {ds['bytes'] / 1e6:.0f} MB (see importance.py); "
               f"RAM = {d['cache']:.0%} of it, no SSD, no prefetch; {d['epochs']} epochs of a small CNN (Adam, "
               f"batch 64, 2 DataLoader workers) on CPU; {len({r['repeat'] for r in runs})} repeats (seed = repeat: "
               f"same initial weights and permutations across cases). Page cache: {d['page_cache']}. "
               f"lru runs with partition=fixed:100/0/0, where the placement pins which images RAM keeps, as "
               f"the daemon is deployed (a static 30% set, not textbook LRU; see the blob table above for that).\n")
    if any("workers_cpu_s" not in e for r in runs for e in r["epochs"]):
        STALE.append("*Importance*: the CPU per sample (only the trainer's main process was measured)")
        out.append("**CPU:** the runs recorded before importance.py read its DataLoader workers' and the "
                   "daemon's CPU measured the trainer's main process only (time.process_time()), without the "
                   "two workers that read and decode every JPEG or the daemon: their total column is "
                   "blank and the trainer column is not the pipeline's CPU per sample; a re-run is "
                   "pending.\n")
    out.append("| case | sampler | eviction | hit ratio, epochs 2–E | ÷ uniform+lru | samples/epoch | "
               "train loss, last epoch | test accuracy, last epoch | wall s/epoch | "
               "CPU ms/sample (trainer+workers+daemon) | of which trainer | workers | daemon |")
    out.append("|---|---|---|---|---|---|---|---|---|---|---|---|---|")

    def cpu_ms(r, *keys):  # CPU ms per sample over all epochs, None when a key was not recorded
        eps = r["epochs"]
        if any(k not in e for e in eps for k in keys):
            return None
        return 1e3 * sum(e[k] for e in eps for k in keys) / sum(e["samples"] for e in eps)

    def cpu_col(rs, *keys):
        vals = [cpu_ms(r, *keys) for r in rs]
        return "—" if None in vals else spread(vals, "{:.2f}")

    base = {}
    for r in runs:
        if r["case"] == "uniform+lru":
            ep = r["epochs"][1:]
            base[r["repeat"]] = 1 - sum(e["source_reads"] for e in ep) / sum(e["samples"] for e in ep)
    for case in ("uniform+lru", "importance+lru", "importance+imp"):
        rs = [r for r in runs if r["case"] == case]
        if not rs:
            continue
        hr = [1 - sum(e["source_reads"] for e in r["epochs"][1:]) / sum(e["samples"] for e in r["epochs"][1:]) for r in rs]
        rel = [h / base[r["repeat"]] for h, r in zip(hr, rs) if r["repeat"] in base]
        out.append(f"| {case} | {rs[0]['mode']} | {rs[0]['eviction']} | {spread(hr)} | "
                   f"{spread(rel, '{:.2f}') if rel else '—'} | {rs[0]['epochs'][-1]['samples']} | "
                   f"{spread([r['epochs'][-1]['train_loss'] for r in rs])} | "
                   f"{spread([r['epochs'][-1]['test_acc'] for r in rs])} | "
                   f"{spread([sum(e['wall_s'] for e in r['epochs']) / len(r['epochs']) for r in rs], '{:.1f}')} | "
                   f"{cpu_col(rs, 'trainer_cpu_s', 'workers_cpu_s', 'daemon_cpu_s')} | "
                   f"{cpu_col(rs, 'trainer_cpu_s')} | {cpu_col(rs, 'workers_cpu_s')} | "
                   f"{cpu_col(rs, 'daemon_cpu_s')} |")
    out.append("\nTest accuracy by epoch (median over repeats):\n")
    E = d["epochs"]
    out.append("| case | " + " | ".join(f"epoch {e + 1}" for e in range(E)) + " |")
    out.append("|---|" + "---|" * E)
    for case in ("uniform+lru", "importance+lru", "importance+imp"):
        rs = [r for r in runs if r["case"] == case]
        if rs:
            out.append(f"| {case} | " + " | ".join(f"{median([r['epochs'][e]['test_acc'] for r in rs]):.3f}"
                                                   for e in range(E)) + " |")


def plots(data):
    """One PNG per bench next to results.md (medians; the tables carry the ranges)."""
    ensure_matplotlib()
    import matplotlib
    matplotlib.use("Agg")  # no display on a bench machine
    import matplotlib.pyplot as plt
    made = []
    d = data.get("hit_ratio.json")
    if d:
        fig, ax = plt.subplots(figsize=(8, 3.5))
        cases = ["lru", "lfu", "random", "none", "belady", "belady-epochwise", "importance"]
        for j, ds in enumerate(d["datasets"]):
            xs, ys = [], []
            for i, c in enumerate(cases):
                if c in d["repeats"][0]["measured"][ds]:
                    hr = [1 - sum(e["source_reads"] for e in r["measured"][ds][c]["epochs"]) /
                          sum(e["accesses"] for e in r["measured"][ds][c]["epochs"]) for r in d["repeats"]]
                    xs.append(i + 0.4 * j)
                    ys.append(median(hr))
            ax.bar(xs, ys, width=0.4, label=ds)
        mn = median([sum(e["hits"] for e in r["offline"]["jpeg"]["min"]) /
                     sum(e["accesses"] for e in r["offline"]["jpeg"]["min"]) for r in d["repeats"]])
        ax.axhline(mn, color="k", ls="--", label="offline MIN")
        labels = {"belady-epochwise": "belady\n(per epoch)", "belady": "belady\n(whole order)"}
        ax.set_xticks([i + 0.2 for i in range(len(cases))], [labels.get(c, c) for c in cases], fontsize=8)
        ax.set_ylabel("hit ratio (5 epochs)")
        ax.set_title(f"One job, cache {d['cache']:.0%}")
        ax.legend(fontsize=8, loc="center left")
        fig.tight_layout()
        made.append(("hit_ratio.png", fig))
    d = data.get("jobs.json")
    if d:
        fig, (a1, a2) = plt.subplots(1, 2, figsize=(8, 3.2))
        for mode in ("plain", "opportunistic"):
            ks = sorted({r["k"] for r in d["runs"] if r["mode"] == mode})
            per = [median([r["source_bytes"] / (k * d["epochs"]) / d["dataset"]["bytes"]
                           for r in d["runs"] if r["k"] == k and r["mode"] == mode]) for k in ks]
            rate = [median([j["epochs"][-1]["samples"] * len(j["epochs"]) / j["wall_s"]
                            for r in d["runs"] if r["k"] == k and r["mode"] == mode for j in r["jobs"]]) for k in ks]
            a1.plot(ks, per, "o-", label=mode)
            a2.plot(ks, rate, "o-", label=mode)
        a1.set_xlabel("concurrent jobs")
        a1.set_ylabel("source bytes per job-epoch (x dataset)")
        a2.set_xlabel("concurrent jobs")
        a2.set_ylabel("samples/s per job")
        a1.legend(fontsize=8)
        for a in (a1, a2):
            a.set_xticks(sorted({r["k"] for r in d["runs"]}))
        fig.tight_layout()
        made.append(("jobs.png", fig))
    d = data.get("cold.json")
    if d:
        fig, ax = plt.subplots(figsize=(6, 3.2))
        cases = ["direct", "cold", "cold+order"]
        for j, t in enumerate(sorted({r["threads"] for r in d["runs"]})):
            ys = [median([r["bench"]["mb_per_s"] for r in d["runs"] if r["threads"] == t and r["case"] == c]) for c in cases]
            ax.bar([i + 0.4 * j for i in range(3)], ys, width=0.4, label=f"{t} readers")
        ax.axhline(d["cap_mbps"], color="k", ls="--", label="source cap")
        ax.set_xticks([i + 0.2 for i in range(3)], ["slow source itself", "prepfs cold", "prepfs cold,\norder published"], fontsize=8)
        ax.set_ylabel("MB/s")
        ax.legend(fontsize=8)
        fig.tight_layout()
        made.append(("cold.png", fig))
    d = data.get("importance.json")
    if d:
        fig, ax = plt.subplots(figsize=(6, 3.2))
        for c in ("uniform+lru", "importance+lru", "importance+imp"):
            rs = [r for r in d["runs"] if r["case"] == c]
            ax.plot(range(1, d["epochs"] + 1), [median([r["epochs"][e]["test_acc"] for r in rs])
                                                for e in range(d["epochs"])], "o-", label=c)
        ax.set_xlabel("epoch")
        ax.set_ylabel("test accuracy")
        ax.legend(fontsize=8)
        fig.tight_layout()
        made.append(("importance.png", fig))
    for name, fig in made:
        fig.savefig(os.path.join(HERE, name), dpi=90)
        plt.close(fig)
    return [name for name, _ in made]


def main():
    out = ["# bench/sampling results\n",
           "Generated by `/usr/bin/python3 bench/sampling/report.py` from the raw JSON in `results/`; "
           "what the numbers mean and which targets they meet is in README.md.\n"]
    data = {}
    for name, fn in (("hit_ratio.json", hit_ratio), ("jobs.json", jobs), ("cold.json", cold),
                     ("importance.json", importance)):
        d = load(name)
        if d:
            data[name] = d
            fn(d, out)
    if STALE:
        out[2:2] = ["> **Note: some numbers below were measured by a method since corrected; a re-run is "
                    "pending.** " + "; ".join(STALE) + ".\n"]
    out.append("\n" + " ".join(f"![{n}]({n})" for n in plots(data)))
    with open(os.path.join(HERE, "results.md"), "w") as f:
        f.write("\n".join(out) + "\n")
    print("\n".join(out))


if __name__ == "__main__":
    main()
