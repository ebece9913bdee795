#!/usr/bin/python3
"""Turns the JSON lines written by run_read_bench.sh into bench/results/read_bench.md."""

import argparse
import datetime
import json
import os
import platform
import statistics


def machine_info():
    cpu = "unknown"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    mem_gb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "nproc": os.cpu_count(),
        "kernel": platform.release(),
        "cpu": cpu,
        "memory": f"{mem_gb:.0f} GiB",
    }


def fmt(value, digits=1):
    return "-" if value is None else f"{value:,.{digits}f}"


def median(values):
    """statistics.median of the values measured (None: not measured), None when there are none."""
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def epochs(row):
    """The readbench totals of one measurement: one per epoch (rows of runs before rounds held one
    readbench run of all passes, "bench")."""
    if "epochs" in row:
        return [e["total"] for e in row["epochs"] if e]
    return [row["bench"]["total"]] if row.get("bench") else []


def summary(row):
    """files/s, MB/s over all of a measurement's epochs, the median epoch's p50 and p99, the files
    read, and the CPU microseconds per file of prepfs, prepfs-slowfs and the reader (None where not
    recorded)."""
    eps = epochs(row)
    if not eps:
        return None
    files = sum(t["files"] for t in eps)
    secs = sum(t["seconds"] for t in eps)
    cpu = row.get("cpu_s") or {}
    per_file = {k: (cpu[k] / files * 1e6 if cpu.get(k) is not None and files else None)
                for k in ("prepfs", "slowfs", "reader")}
    return {"files": files, "files_per_s": files / secs if secs else None,
            "mb_per_s": sum(t["bytes"] for t in eps) / 1e6 / secs if secs else None,
            "p50": median(t["lat_p50_ms"] for t in eps), "p99": median(t["lat_p99_ms"] for t in eps),
            "cpu_us": per_file}


def spread(values, digits=0):
    """ "median (v1, v2, ...)" of the rounds' values."""
    shown = [v for v in values if v is not None]
    if not shown:
        return "-"
    m = fmt(median(shown), digits)
    return m if len(shown) == 1 else f"{m} ({', '.join(fmt(v, digits) for v in shown)})"


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--results", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--command", default="")
    parser.add_argument("--dataset", default="")
    parser.add_argument("--slow-mbps", type=float, required=True)
    parser.add_argument("--slow-args", default="")
    parser.add_argument("--prepfs-args", default="")
    parser.add_argument("--warm-passes", default="")
    parser.add_argument("--rounds", default="1")
    parser.add_argument("--load", default="", help="load averages during the run")
    args = parser.parse_args()

    with open(args.results) as f:
        rows = [json.loads(line) for line in f if line.strip()]
    for r in rows:
        r.setdefault("round", 1)
        r["summary"] = summary(r)

    # Each ratio to direct is taken within a round: the cases of one round ran back to back.
    direct = {(r["source"], r["threads"], r["round"]): r["summary"]
              for r in rows if r["case"] == "direct" and r["summary"]}

    def ratio(r):
        t, base = r["summary"], direct.get((r["source"], r["threads"], r["round"]))
        if t and base and t["files_per_s"] and base["files_per_s"]:
            return t["files_per_s"] / base["files_per_s"]
        return None

    groups = {}  # (source, threads, case) -> rows in round order, in the order first met
    for r in rows:
        groups.setdefault((r["source"], r["threads"], r["case"]), []).append(r)

    info = machine_info()
    lines = [
        "# prepfs read benchmark",
        "",
        f"- date: {info['date']}",
        f"- machine: {info['nproc']} CPUs ({info['cpu']}), {info['memory']} RAM, "
        f"kernel {info['kernel']}; load average {args.load or 'not recorded'}",
        f"- command: `{args.command}`",
        f"- dataset: {args.dataset}",
        f"- slow source: `prepfs-slowfs DATASET MNT {args.slow_args}`",
        f"- prepfs: `prepfs SOURCE MNT -f {args.prepfs_args}` (warm-ssd: `ram=0` on the ssd_dir the "
        "*fill* case filled)",
        f"- reader: `prepfs-readbench DIR --threads N --passes 1` once per epoch (whole files, 1 MiB "
        f"read() calls, shuffled); warm cases and local direct average {args.warm_passes} epochs per "
        f"round; {args.rounds} rounds, the order of the units (direct; cold + warm-ram; warm-ssd) "
        "rotated by one each round",
        "",
        "Cases: **direct** = the source read directly (local: page cache warm, the physical limit); "
        "**fill** = one cold epoch that fills the warm-ssd cases' ssd_dir; **cold** = fresh prepfs "
        "mount, empty cache, first epoch; **warm-ram** = same mount, later epochs, each after "
        "`echo 1 > /proc/sys/vm/drop_caches` (raw/ opens keep_cache: without the drop the kernel's "
        "page cache, not prepfs's RAM tier, would answer); **warm-ssd** = remounted with ram=0 on "
        "the filled ssd_dir, each epoch after `echo 3 > /proc/sys/vm/drop_caches`. The dataset's "
        "pages are read into the page cache before every direct, fill and cold case. Values are the "
        "median over the rounds, each round's in brackets. *vs direct* is the median of each "
        "round's files/s over the direct files/s of the same round, source and thread count. *CPU "
        "us/file* is the CPU time of the process (all its threads; /proc/PID/stat, resolution one "
        "clock tick over the measurement's files) while the reader ran, over the files read: "
        "*prepfs* the daemon, *slowfs* the simulated remote, *reader* prepfs-readbench. *source MB* "
        "is what the slow source served (prepfs-slowfs counters).",
        "",
        "| source | threads | case | files/s | MB/s | p50 ms | p99 ms | vs direct | prepfs CPU us/file "
        "| slowfs CPU us/file | reader CPU us/file | source MB | note |",
        "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for (source, threads, case), group in groups.items():
        sums = [r["summary"] for r in group]
        ok = [s for s in sums if s]
        notes = sorted({r.get("note", "") for r in group})
        cells = [
            source, str(threads), case,
            spread([s["files_per_s"] for s in ok]), fmt(median(s["mb_per_s"] for s in ok)),
            fmt(median(s["p50"] for s in ok), 3), fmt(median(s["p99"] for s in ok), 3),
            "-" if case == "direct" else spread([ratio(r) for r in group], 2),
            spread([s["cpu_us"]["prepfs"] for s in ok], 1),
            spread([s["cpu_us"]["slowfs"] for s in ok], 1),
            spread([s["cpu_us"]["reader"] for s in ok], 1),
            spread([r["slowfs"]["read_bytes"] / 1e6 if r.get("slowfs") else None for r in group], 1),
            "; ".join(n for n in notes if n) if len(notes) <= 2 else notes[0] + f" (+{len(notes) - 1} more)",
        ]
        lines.append("| " + " | ".join(cells) + " |")

    lines += ["", "## Targets (reported, not asserted)", ""]
    warm = [ratio(r) for r in groups.get(("local", 8, "warm-ram"), [])]
    warm = [x for x in warm if x is not None]
    if warm:
        m = median(warm)
        verdict = "met" if m >= 0.8 else "NOT met"
        lines.append(f"- warm RAM hits (page cache dropped), 8 threads, local source: {m:.2f}x direct "
                     f"page-cache reads, median of {len(warm)} round(s) ({', '.join(f'{x:.2f}' for x in warm)}) "
                     f"(target >= 0.8x): {verdict}")
    else:
        lines.append("- warm RAM hits, 8 threads, local source: not measured")
    cold = [r["summary"]["mb_per_s"] for r in groups.get(("slow", 32, "cold"), []) if r["summary"]]
    if cold:
        m = median(cold)
        verdict = "met" if m / args.slow_mbps >= 0.9 else "NOT met"
        lines.append(f"- cold read of the slow source, 32 threads: {m:.1f} MB/s median of {len(cold)} "
                     f"round(s) ({', '.join(f'{x:.1f}' for x in cold)}) = {m / args.slow_mbps:.2f}x the "
                     f"simulator's {args.slow_mbps:g} MB/s cap (target >= 0.9x): {verdict}")
    else:
        lines.append("- cold read of the slow source, 32 threads: not measured")

    lines += ["", "## Raw results", "", "<details><summary>JSON lines, one per measurement"
              "</summary>", "", "```json"]
    lines += [json.dumps({k: v for k, v in r.items() if k != "summary"}, separators=(",", ":"))
              for r in rows]
    lines += ["```", "", "</details>", ""]

    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        f.write("\n".join(lines))


if __name__ == "__main__":
    main()
