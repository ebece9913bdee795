#!/usr/bin/env python3
"""Every partition=auto round of scenario (c) runs made with run_partition_bench.py --log-dir: its
rate, the daemon's CPU per item, whether the plan made once every image header was read moved or
was declined as not worth its refills (from the daemon's log), and the SSD entries when the timed
epochs began. Then per binary (the
run name before its last '-'): the median and the slow rounds.

    summary.py RUN...   # RUN: the --log-dir of a run (with --out RUN/out), or
                        # NAME with NAME.json beside logs/NAME/ (as committed here)
"""
import glob
import json
import os
import re
import statistics as st
import sys

rows = {}
for run in sys.argv[1:]:
    name = os.path.basename(run.rstrip("/"))
    if os.path.exists(run + ".json"):
        results, logdir = run + ".json", os.path.join(os.path.dirname(run), "logs", name)
    else:
        results, logdir = os.path.join(run, "out", "results.json"), run
    sc = json.load(open(results))["scenarios"]["c"]
    autos = [x for x in sc["runs"] + sc.get("confirm", []) if x.get("partition") == "auto"]
    logs = sorted(glob.glob(os.path.join(logdir, "run*-auto.log")), key=lambda p: int(re.search(r"run(\d+)", p).group(1)))
    for x, log in zip(autos, logs):
        text = open(log).read()
        if re.search(r"re-planned \(every image header read\); keeping .* but it saves", text):
            header = "declined"
        else:
            header = "moved" if "partition (auto): every image header read" in text else "kept"
        cpu_ms = 1000 * x["daemon_cores"] / x["measured"]
        rows.setdefault(name.rsplit("-", 1)[0], []).append((x["measured"], cpu_ms, header))
        print(f"{name:6} auto {x['measured']:6.1f}/s  daemon CPU {cpu_ms:4.2f} ms/item  header plan {header:8}  "
              f"moved while timed {x['moves_during_timing']}  SSD entries before timing {x['stats_before']['ssd']['entries']:3}  "
              f"warm-up {x['warmup_files_per_s']}  timed {[e['files_per_s'] for e in x['epochs']]}")
for name, r in rows.items():
    rate, cpu = [a[0] for a in r], [a[1] for a in r]
    print(f"{name}: {len(r)} auto rounds, median {st.median(rate):.0f}/s ({min(rate):.0f}-{max(rate):.0f}), daemon CPU "
          f"median {st.median(cpu):.2f} ms/item, header plan declined in {sum(a[2] == 'declined' for a in r)}, "
          f"rounds under 300/s: {sum(v < 300 for v in rate)}")
