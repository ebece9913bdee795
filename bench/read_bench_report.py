#!/usr/bin/python3
"""Turns the JSON lines written by run_read_bench.sh into bench/results/read_bench.md."""

import argparse
import datetime
import json
import os
import platform


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
    parser.add_argument("--load", default="", help="load averages during the run")
    args = parser.parse_args()

    with open(args.results) as f:
        rows = [json.loads(line) for line in f if line.strip()]

    direct = {(r["source"], r["threads"]): r["bench"]["total"]
              for r in rows if r["case"] == "direct" and r["bench"]}

    def total(source, threads, case):
        for r in rows:
            if (r["source"], r["threads"], r["case"]) == (source, threads, case) and r["bench"]:
                return r["bench"]["total"]
        return None

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
        f"- prepfs: `prepfs SOURCE MNT -f {args.prepfs_args}` (warm-ssd: `ram=0`)",
        f"- reader: `prepfs-readbench DIR --threads N --passes P` (whole files, 1 MiB read() calls, "
        f"shuffled); warm cases average {args.warm_passes} epochs",
        "",
        "Cases: **direct** = the source read directly (local: page cache warm, the physical limit); "
        "**cold** = fresh prepfs mount, empty cache, first epoch; **warm-ram** = same mount, later "
        "epochs; **warm-ssd** = remounted with ram=0 on the same ssd_dir after "
        "`echo 3 > /proc/sys/vm/drop_caches`. *vs direct* divides files/s by the direct files/s "
        "of the same source and thread count. *source MB* is what the slow source served "
        "(prepfs-slowfs counters).",
        "",
        "| source | threads | case | files/s | MB/s | p50 ms | p99 ms | vs direct | source MB | note |",
        "|---|---:|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in rows:
        t = r["bench"]["total"] if r["bench"] else None
        base = direct.get((r["source"], r["threads"]))
        ratio = t["files_per_s"] / base["files_per_s"] if t and base and base["files_per_s"] else None
        fetched = r["slowfs"]["read_bytes"] / 1e6 if r.get("slowfs") else None
        cells = [
            r["source"], str(r["threads"]), r["case"],
            fmt(t and t["files_per_s"], 0), fmt(t and t["mb_per_s"]),
            fmt(t and t["lat_p50_ms"], 3), fmt(t and t["lat_p99_ms"], 3),
            "-" if ratio is None else f"{ratio:.2f}x",
            fmt(fetched), r.get("note", ""),
        ]
        lines.append("| " + " | ".join(cells) + " |")

    lines += ["", "## Targets (reported, not asserted)", ""]
    warm = total("local", 8, "warm-ram")
    base = direct.get(("local", 8))
    if warm and base:
        ratio = warm["files_per_s"] / base["files_per_s"]
        verdict = "met" if ratio >= 0.8 else "NOT met"
        lines.append(f"- warm RAM hits, 8 threads, local source: {ratio:.2f}x direct page-cache "
                     f"reads (target >= 0.8x): {verdict}")
    else:
        lines.append("- warm RAM hits, 8 threads, local source: not measured")
    cold = total("slow", 32, "cold")
    if cold:
        ratio = cold["mb_per_s"] / args.slow_mbps
        verdict = "met" if ratio >= 0.9 else "NOT met"
        lines.append(f"- cold read of the slow source, 32 threads: {cold['mb_per_s']:.1f} MB/s = "
                     f"{ratio:.2f}x the simulator's {args.slow_mbps:g} MB/s cap (target >= 0.9x): "
                     f"{verdict}")
    else:
        lines.append("- cold read of the slow source, 32 threads: not measured")

    lines += ["", "## Raw results", "", "<details><summary>JSON lines, one per measurement"
              "</summary>", "", "```json"]
    lines += [json.dumps(r, separators=(",", ":")) for r in rows]
    lines += ["```", "", "</details>", ""]

    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        f.write("\n".join(lines))


if __name__ == "__main__":
    main()
