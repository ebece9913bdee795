#!/usr/bin/python3
"""End-to-end PyTorch DataLoader benchmark: prepfs views against the plain JPEG loader and the pre-made limits.

Normally run by run_loader_bench.sh, which generates the dataset and mounts prepfs. Directly:

    /usr/bin/python3 bench/loader/loader_bench.py --source DATASET --limits DIR \
        --case NAME=MOUNT ... [--pid NAME=PID ...] --out bench/loader/results.md

DATASET is the directory holding train/<class>/<image>.JPEG (bench/gen_dataset.py). Each --case
names a prepfs mount for one of the cases below (a case whose mount is not given is skipped):

  name           dataset                              loader work per image
  source         DATASET/train, ImageFolder           JPEG decode + RandomResizedCrop + flip + ToTensor + Normalize  (the plain JPEG loader)
  raw            MNT/raw/train, ImageFolder           same as source
  decoded        MNT/decoded/train, ImageFolder       PPM read + RandomResizedCrop + flip + ToTensor + Normalize
  augmented      MNT/augmented/train, ImageFolder     PPM read + ToTensor + Normalize          (aug_reuse=1: a new variant per open)
  augmented-r4   MNT/augmented/train, ImageFolder     same, mounted with aug_reuse=4           (each variant served 4 times)
  npy            MNT/augmented/train, NPY Dataset     numpy.load + torch.from_numpy (uint8 HWC; normalisation left to the GPU), aug_reuse=1
  npy-r4         MNT/augmented/train, NPY Dataset     same, mounted with aug_reuse=4
  augmented-fixed MNT/augmented/train, ImageFolder    augmented's loader, mounted with aug_reuse=1000000: one
                                                      variant per sample, rendered in round 1's warm-up and
                                                      then served from the page cache (no renders while timed)
  npy-fixed      MNT/augmented/train, NPY Dataset     the same for npy

The -fixed cases are diagnostics, not goals: they are the floor of any per-open augmented/ read on
this machine (a FUSE OPEN and RELEASE round trip per open, the pages already cached), so that the
aug_reuse=4 gap to the pre-made limits splits into the part the FUSE protocol costs and the part
prepfs's renders and page refills cost (the report's "aug_reuse=4 against the FUSE floor").

A case name may carry a suffix after '@' naming the mount's extra option (augmented@cpu=auto): the
same loader over a mount that differs in that option, compared side by side.

The pre-made limits are the same loaders over the same forms made on local disk with PIL and
torchvision (--limits DIR; made once if missing), with the page cache warm:

  limit-decoded  DIR/decoded/train/*.ppm               (PIL's convert('RGB'), saved as PPM)
  limit-augmented DIR/augmented/train/*.ppm            (one torchvision RandomResizedCrop(224)+flip variant)
  limit-npy      DIR/augmented_npy/train/*.npy         (the same variant, np.save of the uint8 HWC array)

Every case runs with the same DataLoader (2 workers, batch 64, shuffle=True, persistent workers):
a warm-up of one full epoch in every round (round 1's warms the page cache and prepfs' tiers; later
rounds' start the workers and end cleanly: see below), then --epochs timed epochs. All cases run once per round, in a rotated order, for --rounds rounds; the
report gives medians, and each ratio is the median of per-round ratios (cases paired within a round).

A case over augmented/ with aug_reuse R > 1 (the mount's stats profile.aug_reuse; failing that, the
name: augmented-r4 and npy-r4 are 4) renders a sample's variant on one open in R. Its timed epochs
are --epochs rounded up to a multiple of R, so that every sample is opened a whole number of reuse
cycles while timed and renders exactly epochs/R times, whatever its open count when timing starts,
in every round; and its warm-up is a full epoch in every round, because a warm-up broken off after
a few batches leaves the batches the workers had prefetched to be loaded (opened) inside the timed
window, uncounted. (Before this, 2 timed epochs at R = 4 measured 0 renders per image in round 1,
0.4-0.9 in round 2 and 0.13 in round 3, against 0.25 in steady state, and the median over rounds
favoured the rounds with few renders.)
--warmup-batches N (rounds 2 on) breaks the warm-up off after N batches instead, which is quicker but
leaves up to prefetch_factor x workers = 4 batches the workers had queued; persistent workers load
them when the first timed epoch starts, inside its window and not counted: up to 256 images of
uncounted work against 2 x 2,000 counted. Cases with aug_reuse R > 1 always warm up a full epoch,
so with N > 0 the aug_reuse goals' references (the limits) would carry that bias and the r4 cases
not: the default, 0, warms every case alike.
Per case and round it records the loader's CPU (main process + workers), the serving daemon's CPU
(its /proc/PID/stat), both per image, and the wall rate; the goal table of issue 13 is judged on
both the wall rates and the CPU-bound rates (nproc / CPU per image), which other tenants of a
shared machine disturb far less.

Labels: before timing, every case's dataset must give the same class_to_idx and the same
(path without extension -> label) mapping as ImageFolder over the source; during every epoch, each
yielded label is checked against that mapping. Any mismatch aborts the run.
"""

import argparse
import datetime
import json
import os
import platform
import statistics
import sys
import time
from multiprocessing import Pool

import numpy as np
import torch
from PIL import Image
from torch.utils.data import DataLoader, Dataset
from torchvision import datasets, transforms

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from proc_cpu import cpu_seconds  # noqa: E402

MEAN = [0.485, 0.456, 0.406]
STD = [0.229, 0.224, 0.225]

# name -> (kind, subdirectory of its root, description)
CASES = {
    "source": ("jpeg_full", "train", "source dir, JPEG + full transform (the plain JPEG loader)"),
    "raw": ("jpeg_full", "raw/train", "prepfs raw/, warm, full transform"),
    "decoded": ("ppm_full", "decoded/train", "prepfs decoded/ PPM, warm, full transform"),
    "augmented": ("ppm_norm", "augmented/train", "prepfs augmented/ PPM, aug_reuse=1 (new variant per open)"),
    "augmented-r4": ("ppm_norm", "augmented/train", "prepfs augmented/ PPM, aug_reuse=4"),
    "npy": ("npy_uint8", "augmented/train", "prepfs augmented/ NPY, aug_reuse=1 (new variant per open)"),
    "npy-r4": ("npy_uint8", "augmented/train", "prepfs augmented/ NPY, aug_reuse=4"),
    "augmented-fixed": ("ppm_norm", "augmented/train",
                        "prepfs augmented/ PPM, one fixed variant (aug_reuse=1000000): the FUSE floor"),
    "npy-fixed": ("npy_uint8", "augmented/train",
                  "prepfs augmented/ NPY, one fixed variant (aug_reuse=1000000): the FUSE floor"),
    "limit-decoded": ("ppm_full", "decoded/train", "local disk, PIL-decoded PPM, full transform"),
    "limit-augmented": ("ppm_norm", "augmented/train", "local disk, pre-augmented PPM, ToTensor+Normalize"),
    "limit-npy": ("npy_uint8", "augmented_npy/train", "local disk, pre-augmented NPY, uint8 tensors"),
}
LIMIT_OF = {
    "raw": "source",
    "decoded": "limit-decoded",
    "augmented": "limit-augmented",
    "augmented-r4": "limit-augmented",
    "npy": "limit-npy",
    "npy-r4": "limit-npy",
    "augmented-fixed": "limit-augmented",
    "npy-fixed": "limit-npy",
}
# aug_reuse=4 cases -> (their FUSE floor, their limit): the report splits the gap with them.
FLOOR_OF = {
    "augmented-r4": ("augmented-fixed", "limit-augmented"),
    "npy-r4": ("npy-fixed", "limit-npy"),
}
# The -fixed cases' aug_reuse (run_loader_bench.sh mounts augfix and npyfix with it; the option's
# maximum): one variant for the whole run, no reuse cycle to time a whole number of (the variant
# was rendered in round 1's warm-up).
FIXED_REUSE = 1_000_000
# Issue 13's goal table: (case, reference, target ratio, what).
GOALS = [
    ("augmented", "source", 1.5, "aug_reuse=1, augmented/ PPM, end to end, vs the plain JPEG loader"),
    ("npy", "source", 2.5, "aug_reuse=1, augmented/ NPY, end to end, vs the plain JPEG loader"),
    ("augmented-r4", "limit-augmented", 0.9, "aug_reuse=4, PPM, vs its pre-made limit"),
    ("npy-r4", "limit-npy", 0.9, "aug_reuse=4, NPY, vs its pre-made limit"),
]


def base(name):
    """The case a name stands for: augmented@cpu=auto is the augmented case on another mount."""
    return name.split("@", 1)[0]


def describe(name):
    kind, _, what = CASES[base(name)]
    return what + (f" ({name.split('@', 1)[1]})" if "@" in name else "")


TARGET = 0.9  # the diagnostic column: every prepfs case against its own limit


def log(msg):
    print(f"[loader-bench] {msg}", file=sys.stderr, flush=True)


# ---- datasets ----------------------------------------------------------------------------------

def npy_loader(path):
    return torch.from_numpy(np.load(path))


def make_dataset(kind, root):
    if kind == "jpeg_full" or kind == "ppm_full":
        t = transforms.Compose([transforms.RandomResizedCrop(224), transforms.RandomHorizontalFlip(),
                                transforms.ToTensor(), transforms.Normalize(MEAN, STD)])
        return datasets.ImageFolder(root, transform=t)
    if kind == "ppm_norm":
        t = transforms.Compose([transforms.ToTensor(), transforms.Normalize(MEAN, STD)])
        return datasets.ImageFolder(root, transform=t)
    if kind == "npy_uint8":
        # The minimal Dataset: numpy.load -> torch.from_numpy, labels from the class directory.
        return datasets.DatasetFolder(root, loader=npy_loader, extensions=(".npy",))
    raise ValueError(kind)


class Indexed(Dataset):
    """Yields (sample, label, index) so every epoch can check the labels it was given."""

    def __init__(self, ds):
        self.ds = ds

    def __len__(self):
        return len(self.ds)

    def __getitem__(self, i):
        x, y = self.ds[i]
        return x, y, i


def stem_map(ds, root):
    out = {}
    for path, label in ds.samples:
        rel = os.path.relpath(path, root)
        out[os.path.splitext(rel)[0]] = label
    return out


def check_labels(name, ds, root, ref):
    ref_c2i, ref_map = ref
    if ds.class_to_idx != ref_c2i:
        raise SystemExit(f"LABEL MISMATCH in {name}: class_to_idx differs from ImageFolder over the source")
    m = stem_map(ds, root)
    if m != ref_map:
        missing = sorted(set(ref_map) - set(m))[:5]
        extra = sorted(set(m) - set(ref_map))[:5]
        wrong = sorted(k for k in set(m) & set(ref_map) if m[k] != ref_map[k])[:5]
        raise SystemExit(f"LABEL MISMATCH in {name}: {len(ref_map)} vs {len(m)} samples; "
                         f"missing {missing} extra {extra} wrong {wrong}")
    return [label for _, label in ds.samples]


# ---- limits: the same forms made on local disk with PIL and torchvision -------------------------

def _make_limit(args):
    src, dec, aug, npy, seed = args
    torch.manual_seed(seed)
    img = Image.open(src).convert("RGB")
    img.save(dec, format="PPM")
    t = transforms.Compose([transforms.RandomResizedCrop(224), transforms.RandomHorizontalFlip()])
    out = t(img)
    out.save(aug, format="PPM")
    np.save(npy, np.asarray(out, dtype=np.uint8))


def prepare_limits(source_train, limits):
    stamp = os.path.join(limits, "complete")
    if os.path.exists(stamp):
        return
    log(f"making the local limit forms in {limits}")
    jobs = []
    for i, (path, _) in enumerate(datasets.ImageFolder(source_train).samples):
        rel = os.path.splitext(os.path.relpath(path, source_train))[0]
        outs = [os.path.join(limits, sub, "train", rel + ext)
                for sub, ext in (("decoded", ".ppm"), ("augmented", ".ppm"), ("augmented_npy", ".npy"))]
        for o in outs:
            os.makedirs(os.path.dirname(o), exist_ok=True)
        jobs.append((path, *outs, 1000 + i))
    with Pool(os.cpu_count() or 2) as pool:
        pool.map(_make_limit, jobs, chunksize=16)
    with open(stamp, "w") as f:
        f.write(f"{len(jobs)} images from {source_train}\n")


# ---- measurement ----------------------------------------------------------------------------------

def cpu_ticks():
    """(busy, total) jiffies of the whole machine."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    idle = v[3] + v[4]
    return sum(v) - idle, sum(v)


def proc_cpu_s(pid):
    return cpu_seconds(pid, default=None)


def aug_reuse_of(name, stats):
    """The aug_reuse R a case's reads see: 1 unless it reads augmented/ (a new variant every R opens).
    The mount's stats say it (profile.aug_reuse); without them, the case name: -r4 cases are R = 4."""
    if CASES[base(name)][1] != "augmented/train" or name.startswith("limit-"):
        return 1
    r = ((stats or {}).get("profile") or {}).get("aug_reuse")
    if r:
        return max(1, int(r))
    if base(name).endswith("-fixed"):
        return FIXED_REUSE
    return 4 if base(name).endswith("-r4") else 1


def timed_epochs(epochs, reuse):
    """epochs rounded up to a whole number of reuse cycles (R opens of each sample); a fixed variant
    (reuse >= FIXED_REUSE) has no cycle to complete."""
    reuse = max(1, reuse)
    if reuse >= FIXED_REUSE:
        return epochs
    return max(reuse, -(-epochs // reuse) * reuse) if reuse > 1 else epochs


def read_stats(mnt):
    try:
        with open(os.path.join(mnt, ".prepfs", "stats")) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


class Runner:
    def __init__(self, args):
        self.args = args

    def run_case(self, name, ds, labels, pid, mnt, full_warmup):
        a = self.args
        g = torch.Generator()
        g.manual_seed(a.seed)
        loader = DataLoader(Indexed(ds), batch_size=a.batch, shuffle=True, num_workers=a.workers,
                            persistent_workers=True, generator=g)
        expected = torch.tensor(labels)

        def epoch(max_batches=None):
            n = 0
            for b, (x, y, idx) in enumerate(loader):
                if not torch.equal(y, expected[idx]):
                    raise SystemExit(f"LABEL MISMATCH in {name}: the loader yielded wrong labels")
                n += x.shape[0]
                if max_batches is not None and b + 1 >= max_batches:
                    break
            return n

        reuse = aug_reuse_of(name, read_stats(mnt) if mnt else None)
        epochs = timed_epochs(a.epochs, reuse)
        if full_warmup or reuse > 1:  # workers start, the page cache and prepfs' tiers fill
            # (aug_reuse > 1: every round, so that no prefetched batch of a broken-off warm-up is
            # opened inside the timed window)
            n = epoch()
            if n != len(ds):
                raise SystemExit(f"{name}: warm-up epoch yielded {n} of {len(ds)} samples")
            warmup = "full epoch"
        else:  # later rounds: everything is warm already; just start the workers
            epoch(a.warmup_batches)
            warmup = f"{a.warmup_batches} batches"
        workers = [w.pid for w in loader._iterator._workers]  # persistent: the same processes next epochs
        stats0 = read_stats(mnt) if mnt else None
        d0 = proc_cpu_s(pid) if pid else None
        l0 = [proc_cpu_s(os.getpid())] + [proc_cpu_s(w) for w in workers]
        b0, t0 = cpu_ticks()
        start = time.perf_counter()
        n = sum(epoch() for _ in range(epochs))
        secs = time.perf_counter() - start
        b1, t1 = cpu_ticks()
        l1 = [proc_cpu_s(os.getpid())] + [proc_cpu_s(w) for w in workers]
        d1 = proc_cpu_s(pid) if pid else None
        stats1 = read_stats(mnt) if mnt else None
        del loader
        if n != epochs * len(ds):
            raise SystemExit(f"{name}: {epochs} timed epochs yielded {n} of {epochs * len(ds)} samples")
        r = {"images": n, "seconds": secs, "img_s": n / secs, "loadavg_1m": os.getloadavg()[0],
             "machine_busy": (b1 - b0) / max(1, t1 - t0), "epochs": epochs, "aug_reuse": reuse,
             "warmup": warmup}
        if None not in l0 + l1:
            r["loader_cpu_ms_per_img"] = 1000 * (sum(l1) - sum(l0)) / n
        if d0 is not None and d1 is not None:
            r["daemon_cpu_ms_per_img"] = 1000 * (d1 - d0) / n
            r["daemon_cores"] = (d1 - d0) / secs
        # CPU-bound rate: what the loader + daemon CPU per image allows on all cores of this machine.
        # Far less sensitive to other tenants than the wall-clock rate (it ignores time spent waiting).
        cpu_ms = r.get("loader_cpu_ms_per_img", 0) + r.get("daemon_cpu_ms_per_img", 0)
        if "loader_cpu_ms_per_img" in r and cpu_ms > 0:
            r["cpu_ms_per_img"] = cpu_ms
            r["cpu_bound_img_s"] = 1000 * (os.cpu_count() or 1) / cpu_ms
        if stats0 and stats1:
            t0s, t1s = stats0["transform"], stats1["transform"]
            r["transform_cpu_ms_per_img"] = 1000 * (t1s["cpu_seconds"] - t0s["cpu_seconds"]) / n
            r["transforms"] = (t1s["decoded"] + t1s["augmented"]) - (t0s["decoded"] + t0s["augmented"])
            r["variants"] = t1s["augmented"] - t0s["augmented"]  # the reuse cycle's renders, decodes apart
            r["from_decoded"] = t1s["augmented_from_decoded"] - t0s["augmented_from_decoded"]
            if r["transforms"] > 0:
                r["transform_cpu_ms_per_render"] = 1000 * (t1s["cpu_seconds"] - t0s["cpu_seconds"]) / r["transforms"]
            r["cpu_waits"] = t1s["cpu_waits"] - t0s["cpu_waits"]
            r["cpu_slots"] = t1s.get("cpu_slots")
            a0, a1 = stats0.get("render_ahead"), stats1.get("render_ahead")
            if a0 and a1:
                r["ahead"] = {k: a1[k] - a0[k] for k in ("rendered", "used", "late", "wasted", "skipped")}
        return r


# ---- report ---------------------------------------------------------------------------------------

def machine():
    cpu = "unknown"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "nproc": os.cpu_count(), "kernel": platform.release(), "cpu": cpu,
            "python": sys.version.split()[0], "torch": torch.__version__,
            "torchvision": __import__("torchvision").__version__,
            "pil": Image.__version__}


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def f(x, d=0):
    return "-" if x is None else f"{x:,.{d}f}"


def write_report(a, info, names, results, final_stats, nimages):
    rounds = range(a.rounds)
    rate = {n: [results[n][r]["img_s"] for r in rounds] for n in names}

    def paired(n, ref, key="img_s"):
        """Median over rounds of n's value over ref's, both from the same round."""
        if ref not in results:
            return None
        return med([x[key] / y[key] for x, y in zip(results[n], results[ref]) if key in x and key in y])

    def m(n, k, scale=1.0):
        v = med([r.get(k) for r in results[n]])
        return None if v is None else v * scale

    lines = []
    w = lines.append
    w("# End-to-end DataLoader benchmark: prepfs views vs the plain JPEG loader and the pre-made limits")
    w("")
    w(f"- command: `{a.command or ' '.join(sys.argv)}`")
    w(f"- date: {info['date']}; nproc: {info['nproc']}; kernel: {info['kernel']}; cpu: {info['cpu']}")
    w(f"- python {info['python']}, torch {info['torch']}, torchvision {info['torchvision']}, PIL {info['pil']}")
    w(f"- dataset: {a.dataset_note or a.source} ({nimages} images)")
    if a.mount_note:
        w(f"- prepfs mounts: {a.mount_note}")
    w(f"- loader: torch.utils.data.DataLoader, {a.workers} workers, batch {a.batch}, shuffle=True, "
      f"persistent workers; per case and round: a warm-up ("
      + (f"a full epoch in round 1, {a.warmup_batches} batches later except for aug_reuse > 1"
         if a.warmup_batches > 0 else "a full epoch in every round")
      + f"), then {a.epochs} timed epoch(s) "
      f"({a.epochs * nimages} images); {a.rounds} rounds, case order rotated each round")
    reused = sorted({(n, r_.get("aug_reuse"), r_.get("epochs")) for n in names for r_ in results[n]
                     if FIXED_REUSE > (r_.get("aug_reuse") or 1) > 1}, key=lambda x: names.index(x[0]))
    if reused:
        w("- cases with aug_reuse R > 1 (a new variant every R opens): a full warm-up epoch in every round and "
          "the timed epochs rounded up to a multiple of R, so each sample renders epochs/R times while timed: "
          + "; ".join(f"{n}: R = {rr}, {ep} timed epochs" for n, rr, ep in reused))
    elif any("r4" in n for n in names) and not any("aug_reuse" in r_ for n in names for r_ in results[n]):
        w("- **aug_reuse = 4 cases measured by the old method** (results without `aug_reuse`/`epochs`): the timed "
          "epochs did not cover a whole reuse cycle and the warm-up after round 1 broke off, so renders per image "
          "varied by round (see the renders/img column); a re-run is pending")
    if any(base(n).endswith("-fixed") for n in names):
        w(f"- -fixed cases (aug_reuse={FIXED_REUSE}: one variant per sample for the whole run, rendered in round "
          "1's warm-up): a full warm-up epoch in every round too, and the timed epochs as given (no reuse cycle)")
    loads = [r_.get("loadavg_1m") for n in names for r_ in results[n] if r_.get("loadavg_1m") is not None]
    if loads:
        w(f"- 1-minute load average at the end of the timed epochs: median {f(med(loads), 1)}, max {f(max(loads), 1)} "
          f"on {info['nproc']} cores" + (" (**oversubscribed by other tenants: judge by the CPU-bound column**)"
                                          if med(loads) > 1.5 * (info["nproc"] or 1) else ""))
    w("- wall = images / seconds; CPU-bound = nproc / (loader + daemon CPU per image): the rate this work allows "
      "with every core to itself, far less disturbed by other tenants. Ratios: median over rounds of the ratio "
      "within a round (cases paired in the same round).")
    w("")
    w("## Issue 13's goals")
    w("")
    w("| goal | case vs reference | target | wall | CPU-bound | verdict (wall / CPU-bound) |")
    w("|---|---|---:|---:|---:|---|")
    misses = []
    for case in sorted({n for n in names if base(n) in {g[0] for g in GOALS}}, key=names.index):
        goal = next(g for g in GOALS if g[0] == base(case))
        _, ref, target, what = goal
        if ref not in results:
            continue
        wall, cpu = paired(case, ref), paired(case, ref, "cpu_bound_img_s")
        verdict = " / ".join("-" if v is None else ("met" if v >= target else "**missed**") for v in (wall, cpu))
        if (wall is not None and wall < target) or (cpu is not None and cpu < target):
            misses.append((case, wall, cpu, target))
        w(f"| {what} | {case} vs {ref} | {target:g}x | {f(wall, 2)}x | {f(cpu, 2)}x | {verdict} |")
    fresh = [(n, m(n, "transform_cpu_ms_per_render")) for n in names if base(n) in ("augmented", "npy")]
    for n, v in fresh:
        if v is not None:
            w(f"| daemon CPU per fresh variant, from cached decoded pixels (transform CPU per render, stats) | {n} "
              f"| <= 0.3 ms | {f(v, 3)} ms | | {'met' if v <= 0.3 else '**missed**'} |")
    w("")
    floor_rows = [(n, *FLOOR_OF[base(n)]) for n in names
                  if base(n) in FLOOR_OF and FLOOR_OF[base(n)][0] in results and FLOOR_OF[base(n)][1] in results]
    if floor_rows:
        w("## aug_reuse=4 against the FUSE floor")
        w("")
        w("The -fixed case is the same loader over a mount that never renders again (aug_reuse=1000000): every open "
          "costs a FUSE OPEN and RELEASE round trip and reads pages the kernel already holds. It is the best any "
          "per-open augmented/ read reaches here, so it splits the aug_reuse=4 case's gap to its local-disk limit into "
          "what the FUSE protocol costs and what the renders and page refills add. CPU ms/img: loader + daemon, "
          "medians over rounds; ratios paired within a round.")
        w("")
        w("| case | limit CPU ms/img | floor CPU ms/img | case CPU ms/img | floor vs limit (wall / CPU-bound) "
          "| case vs floor (wall / CPU-bound) | case vs limit (wall / CPU-bound) | share of the CPU gap that is the floor (per round: median, range) |")
        w("|---|---:|---:|---:|---|---|---|---:|")
        for n, fl, lim in floor_rows:
            cl, cf, cn = m(lim, "cpu_ms_per_img"), m(fl, "cpu_ms_per_img"), m(n, "cpu_ms_per_img")
            # Per round (the three cases of one round share its conditions), clamped to [0, 1]:
            # medians taken apart over rounds can disagree with the paired ratios when close.
            shares = [min(1.0, max(0.0, (f_["cpu_ms_per_img"] - l_["cpu_ms_per_img"]) /
                                   (c_["cpu_ms_per_img"] - l_["cpu_ms_per_img"])))
                      for c_, f_, l_ in zip(results[n], results[fl], results[lim])
                      if all("cpu_ms_per_img" in x for x in (c_, f_, l_))
                      and c_["cpu_ms_per_img"] > l_["cpu_ms_per_img"]]
            share = (f"{100 * med(shares):.0f}% ({100 * min(shares):.0f}-{100 * max(shares):.0f}%)"
                     if shares else "-")

            def both(x, ref):
                return f"{f(paired(x, ref), 2)}x / {f(paired(x, ref, 'cpu_bound_img_s'), 2)}x"
            w(f"| {n} | {f(cl, 2)} | {f(cf, 2)} | {f(cn, 2)} | {both(fl, lim)} | {both(n, fl)} | {both(n, lim)} | "
              f"{share} |")
        w("")
    w("## Per image: loader CPU, daemon CPU and img/s (medians over rounds, timed epochs only)")
    w("")
    w("| case | what | img/s wall (min-max) | vs source | loader CPU ms/img | daemon CPU ms/img | total ms/img "
      "| CPU-bound img/s | CPU-bound vs source | vs own limit (wall / CPU-bound) |")
    w("|---|---|---|---:|---:|---:|---:|---:|---:|---|")
    for n in names:
        xs = rate[n]
        lim = LIMIT_OF.get(base(n))
        vs_lim = "-"
        if lim in results:
            vs_lim = f"{f(paired(n, lim), 2)}x / {f(paired(n, lim, 'cpu_bound_img_s'), 2)}x"
        w(f"| {n} | {describe(n)} | {f(med(xs))} ({f(min(xs))}-{f(max(xs))}) | {f(paired(n, 'source'), 2)}x | "
          f"{f(m(n, 'loader_cpu_ms_per_img'), 2)} | {f(m(n, 'daemon_cpu_ms_per_img'), 2)} | "
          f"{f(m(n, 'cpu_ms_per_img'), 2)} | {f(m(n, 'cpu_bound_img_s'))} | "
          f"{f(paired(n, 'source', 'cpu_bound_img_s'), 2)}x | {vs_lim} |")
    w("")
    w("loader CPU: the DataLoader's main process and its workers; daemon CPU: the prepfs process serving the case "
      "(everything it does: FUSE, cache, transforms).")
    w("")
    w("## Inside the daemon (stats deltas over the timed epochs, medians over rounds)")
    w("")
    w("| case | machine busy | daemon cores | transform CPU ms/img | renders/img | from decoded pixels/img "
      "| transform CPU ms/render | cpu slots at the end | cpu waits | rendered ahead/img | ahead used/img |")
    w("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for n in names:
        if not any("transforms" in r for r in results[n]):
            continue
        per = lambda k: med([r[k] / r["images"] for r in results[n] if k in r])  # noqa: E731
        ahead = lambda k: med([r["ahead"][k] / r["images"] for r in results[n] if "ahead" in r])  # noqa: E731
        w(f"| {n} | {f(m(n, 'machine_busy', 100))}% | {f(m(n, 'daemon_cores'), 2)} | "
          f"{f(m(n, 'transform_cpu_ms_per_img'), 3)} | {f(per('transforms'), 2)} | {f(per('from_decoded'), 2)} | "
          f"{f(m(n, 'transform_cpu_ms_per_render'), 3)} | {f(m(n, 'cpu_slots'))} | {f(m(n, 'cpu_waits'))} | "
          f"{f(ahead('rendered'), 2)} | {f(ahead('used'), 2)} |")
    w("")
    w("machine busy: share of all cores busy (/proc/stat, all tenants) during the timed epochs; daemon cores: the "
      "serving daemon's CPU seconds per second; transform CPU: the stats' transform.cpu_seconds delta (decode and "
      "augment inside the daemon); cpu waits: renders that queued for a cpu slot; rendered ahead / used: "
      "render_ahead.rendered / .used deltas (variants rendered after a serve, and opens that found theirs ready).")
    w("")
    w("## Raw numbers per round")
    w("")
    w("| case | " + " | ".join(f"round {r + 1}: img/s, loader+daemon CPU ms/img (variants rendered/img)"
                              for r in rounds) + " |")
    w("|---|" + "---|" * a.rounds)
    for n in names:
        cells = [f"{f(r_['img_s'], 1)}, {f(r_.get('loader_cpu_ms_per_img'), 2)}+{f(r_.get('daemon_cpu_ms_per_img'), 2)}"
                 + (f" ({f(r_.get('variants', r_.get('transforms', 0)) / r_['images'], 2)})" if "transforms" in r_ else "")
                 for r_ in results[n]]
        w(f"| {n} | " + " | ".join(cells) + " |")
    w("")
    if a.analysis and os.path.exists(a.analysis):
        with open(a.analysis) as fh:
            w(fh.read().rstrip())
        w("")
    w("<details><summary>raw JSON (per case, per round) and final stats JSON of each mount</summary>")
    w("")
    w("```json")
    w(json.dumps({"machine": info, "results": results, "final_stats": final_stats}, indent=1))
    w("```")
    w("</details>")
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    with open(a.out, "w") as fh:
        fh.write("\n".join(lines) + "\n")
    return misses


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--source", required=True, help="dataset directory holding train/")
    p.add_argument("--limits", required=True, help="directory for the pre-made local forms")
    p.add_argument("--case", action="append", default=[], metavar="NAME=MOUNT")
    p.add_argument("--pid", action="append", default=[], metavar="NAME=PID", help="daemon serving a case")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--warmup-batches", type=int, default=0,
                   help="after round 1, warm up with this many batches instead of a full epoch (0, the default: "
                        "a full epoch, alike for every case)")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--only", default="", help="comma-separated subset of case names")
    p.add_argument("--out", required=True)
    p.add_argument("--json", help="also write the raw results here")
    p.add_argument("--command", default="")
    p.add_argument("--dataset-note", default="")
    p.add_argument("--mount-note", default="")
    p.add_argument("--analysis", help="markdown file appended to the report")
    p.add_argument("--report-only", metavar="JSON", help="rewrite the report from a --json file of an earlier run")
    a = p.parse_args()

    if a.report_only:
        with open(a.report_only) as fh:
            saved = json.load(fh)
        results = saved["results"]
        names = [n for n in CASES if n in results] + [n for n in results if n not in CASES]
        a.rounds = len(results[names[0]])
        nimages = results[names[0]][0]["images"] // results[names[0]][0].get("epochs", a.epochs)
        write_report(a, saved["machine"], names, results, saved.get("final_stats", {}), nimages)
        log(f"wrote {a.out} from {a.report_only}")
        return

    # A name may hold '=' itself (augmented@cpu=auto): the value is after the last one.
    mounts = dict(c.rsplit("=", 1) for c in a.case)
    pids = {k: int(v) for k, v in (c.rsplit("=", 1) for c in a.pid)}
    for n in mounts:
        if base(n) not in CASES or n.startswith("limit-") or n == "source":
            raise SystemExit(f"unknown prepfs case {n}")
    source_train = os.path.join(a.source, "train")
    prepare_limits(source_train, a.limits)

    roots = {}
    for n in CASES:
        if n == "source":
            roots[n] = source_train
        elif n.startswith("limit-"):
            roots[n] = os.path.join(a.limits, CASES[n][1])
    for n in mounts:  # in the order given
        roots[n] = os.path.join(mounts[n], CASES[base(n)][1])
    order = [n for n in CASES if n in roots]
    order += [n for n in roots if n not in order]  # the variants of a case (@option), after the plain ones
    names = [n for n in order if not a.only or n in a.only.split(",") or n == "source"]

    ref_ds = datasets.ImageFolder(source_train)
    ref = (ref_ds.class_to_idx, stem_map(ref_ds, source_train))
    dsets, labels = {}, {}
    for n in names:
        dsets[n] = make_dataset(CASES[base(n)][0], roots[n])
        labels[n] = check_labels(n, dsets[n], roots[n], ref)
    log(f"labels identical to ImageFolder over the source for: {', '.join(names)}")

    runner = Runner(a)
    results = {n: [] for n in names}
    for r in range(a.rounds):
        order = names[r % len(names):] + names[:r % len(names)]
        for n in order:
            res = runner.run_case(n, dsets[n], labels[n], pids.get(n), mounts.get(n),
                                  full_warmup=(r == 0 or a.warmup_batches <= 0))
            res["round"] = r + 1
            results[n].append(res)
            log(f"round {r + 1} {n}: {res['img_s']:.0f} img/s")
        for n in names:  # keep results in round order whatever the run order
            results[n].sort(key=lambda x: x["round"])

    final_stats = {n: read_stats(m) for n, m in mounts.items() if n in names}
    info = machine()
    if a.json:
        with open(a.json, "w") as fh:
            json.dump({"machine": info, "results": results, "final_stats": final_stats}, fh, indent=1)
    misses = write_report(a, info, names, results, final_stats, len(ref_ds))
    log(f"wrote {a.out}")
    for n, wall, cpu, target in misses:
        log(f"goal missed: {n} at {wall:.2f}x wall, {cpu:.2f}x CPU-bound (target {target:g}x)")


if __name__ == "__main__":
    main()
