#!/usr/bin/env python3
"""run_partition_bench.py with the daemon at log_level=info, one log per mount, and after every
epoch (warm-up included) a line of the mount's cache state in LOG.epochs: entries per tier, full
decodes, the plan's moves and placement. The bench itself is unchanged (results.json as usual).

    LOGDIR=/var/tmp/run1 /usr/bin/python3 bench/partition/auto-moves/header-plan/logged_run.py BUILD \\
        --scenarios c --max-placements 1 --confirm-rounds 3 --work /var/tmp/prepfs-pb --out /var/tmp/run1/out
"""
import importlib.util
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
LOGDIR = os.environ.get("LOGDIR") or sys.exit("set LOGDIR")
os.makedirs(LOGDIR, exist_ok=True)
spec = importlib.util.spec_from_file_location("rpb", os.path.join(HERE, "..", "..", "run_partition_bench.py"))
rpb = importlib.util.module_from_spec(spec)
sys.modules["rpb"] = rpb
spec.loader.exec_module(rpb)

mounts = [0]
current = {}
start_prepfs, epoch = rpb.start_prepfs, rpb.epoch


def logged_start(tools, source, mnt, opts, logpath):
    mounts[0] += 1
    opts = dict(opts, log_level="info")
    log = os.path.join(LOGDIR, f"run{mounts[0]}-" + opts.get("partition", "").replace("/", "_") + ".log")
    current.update(mnt=mnt, log=log)
    return start_prepfs(tools, source, mnt, opts, log)


def logged_epoch(*a, **k):
    r = epoch(*a, **k)
    st, pl = rpb.prepfs_stats(current["mnt"]), rpb.read_plan(current["mnt"])
    with open(current["log"] + ".epochs", "a") as f:
        f.write(json.dumps({"t": time.time(), "rate": round(r["files_per_s"], 1), "ram_entries": st["ram"]["entries"],
                            "ssd_entries": st["ssd"]["entries"], "decoded": st["transform"]["decoded"],
                            "stopped": st["transform"].get("stopped_below_crop"), "moves": pl.get("moves"),
                            "moved": pl.get("moved_samples"), "placement": rpb.placement_cells(pl.get("placement")),
                            "samples": pl.get("inputs", {}).get("samples")}) + "\n")
    return r


rpb.start_prepfs, rpb.epoch = logged_start, logged_epoch
rpb.main()
