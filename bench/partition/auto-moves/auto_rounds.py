#!/usr/bin/env python3
"""Every partition=auto round of bench/partition results.json files, beside the best fixed
placement's rounds: warm-up and timed epoch rates, plans, moves, plans declined as not worth
their refills (unpaid), and whether the placement moved during the timed epochs.

    /usr/bin/python3 bench/partition/auto-moves/auto_rounds.py [--scenario c] RESULTS.json...
"""
import argparse
import json

p = argparse.ArgumentParser()
p.add_argument("--scenario")
p.add_argument("results", nargs="+")
args = p.parse_args()


def num(x):
    # pearson is None when a run measured too few placements (--max-placements 2)
    return "-" if x is None else f"{x:.3f}"


for f in args.results:
    d = json.load(open(f))
    for k, c in d["scenarios"].items():
        if args.scenario and k != args.scenario:
            continue
        a = c["analysis"]
        print(f"{f} ({k}): r {num(a['pearson'])}, auto/best grid {num(a['auto_vs_best'])}, "
              f"back to back {num(a['confirm']['ratio'])}; best fixed {a['best_fixed']['label']}")
        for r in c["runs"] + c.get("confirm", []):
            if r.get("partition") != "auto" and r["label"] != a["best_fixed"]["label"]:
                continue
            pl = r.get("plan") or {}
            print(f"  {r['label'][:18]:18} warm {r.get('warmup_files_per_s')} timed "
                  f"{[e['files_per_s'] for e in r['epochs']]} measured {r['measured']:.0f}/s; plans {pl.get('plans')}, "
                  f"moves {pl.get('moves')}, unpaid {pl.get('unpaid_moves', '-')}, "
                  f"moved while timed {r.get('moves_during_timing')}; last: {pl.get('last_reason')}")
