#!/usr/bin/python3
"""Partition-model validation bench (issue 4): predicted vs measured epoch throughput.

    /usr/bin/python3 bench/partition/run_partition_bench.py [BUILD_DIR] [--quick] [--scenarios a,b,c]

Run as root (FUSE mounts, drop_caches). BUILD_DIR (default: build) must hold tools/prepfs,
bench/prepfs-slowfs and bench/prepfs-readbench. Three scenarios, each read through augmented/ by a
reader that consumes shuffled epochs (prepfs-readbench, K threads, whole files):

  a  I/O-bound:   ImageNet-like JPEGs behind a slow source (latency per open/read, MB/s cap), RAM tier only
  b  CPU-bound:   the same JPEGs, no throttling: decode + augment on cpu=1 dominate, RAM tier only,
                  aug_reuse=2 (reused variants are what relieves the CPU most)
  c  RAM-scarce:  larger JPEGs (decoded 14x raw), moderate source, RAM well below the decoded
                  dataset, an SSD tier that holds more; aug_reuse=2 so augmented entries pay

For each scenario, for every fixed placement of a grid (>= 20, including no cache and the three
single-form policies) and for partition=auto: mount prepfs (fresh ssd_dir) over the source, fill
the placement with a warm-up epoch (auto: epochs until its plan stops changing), drop the page
cache, time E shuffled epochs, read MNT/.prepfs/plan.json ("predicted", "binding", placement) and
the stats deltas, unmount. Then: Pearson correlation of predicted vs measured over the fixed
placements, auto against the best fixed placement (re-measured back to back with auto) and against
each single-form policy. Output: results.md, results.json and <scenario>.png in --out (default: the
directory of this script). --report-only rebuilds the report and plots from results.json.

Until the daemon has 6-number fixed partitions and plan.json, the bench runs in a legacy mode
(fixed:R/D/A with RAM's shares, the text .prepfs/plan; "predicted" is then this script's own
evaluation of docs/MODEL.md on the mount's reported inputs), so every piece can be exercised.
"""

import argparse
import datetime
import hashlib
import json
import math
import os
import platform
import random
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import zlib
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH = os.path.dirname(HERE)
REPO = os.path.dirname(BENCH)
sys.path.insert(0, BENCH)
from bench_deps import ensure_matplotlib  # noqa: E402
import mounts  # noqa: E402  (bench/mounts.py)
import proc_cpu  # noqa: E402
from mounts import force_unmount, is_mounted  # noqa: E402

FORMS = ("raw", "decoded", "augmented")
TIERS = ("ram", "ssd")
SHORT = {"raw": "r", "decoded": "d", "augmented": "a"}


def log(msg):
    print(f"[partition-bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------------------------
# Scenarios and placement grids
# --------------------------------------------------------------------------------------------

def simplex(step):
    """(r, d, a) percentages in multiples of step that use the whole budget."""
    k = 100 // step
    return [(i * step, j * step, (k - i - j) * step) for i in range(k + 1) for j in range(k + 1 - i)]


def ram_only_grid(step):
    """Fixed placements over the RAM tier only (ssd=0): the simplex plus no cache."""
    return [(0, 0, 0, 0, 0, 0)] + [(r, d, a, 0, 0, 0) for r, d, a in simplex(step)]


def two_tier_grid(ram_set, ssd_set):
    return [tuple(r) + tuple(s) for r in ram_set for s in ssd_set]


NONE3, RAW3, DEC3, AUG3 = (0, 0, 0), (100, 0, 0), (0, 100, 0), (0, 0, 100)

# (b): the RAM budget holds every JPEG in 1/3 of it, and n(f,t) fills RAM raw first, so every raw
# share >= 1/3 is the same placement (all raw). Small raw shares and partial budgets keep the 22
# placements distinct.
CPU_GRID = [(0, 0, 0), (100, 0, 0),
            (0, 100, 0), (0, 80, 20), (0, 60, 40), (0, 40, 60), (0, 20, 80), (0, 0, 100),
            (0, 50, 0), (0, 0, 35), (0, 25, 25), (0, 20, 0), (0, 0, 20),
            (5, 95, 0), (5, 0, 95), (5, 45, 50),
            (10, 90, 0), (10, 0, 90), (10, 40, 50), (10, 0, 0),
            (20, 0, 0), (20, 40, 40)]

SCENARIOS = {
    "a": dict(
        title="I/O-bound: slow source, plenty of CPU",
        dataset=dict(classes=5, per_class=100, scale=1.0, seed=1),
        quick_dataset=dict(classes=3, per_class=50, scale=1.0, seed=1),
        # 3 ms per open and per read request, 15 MB/s for all requests together.
        slowfs=["--open-latency-ms", "3", "--read-latency-ms", "3", "--bandwidth-mbps", "15"],
        prepfs=dict(ram="32M", ssd="0", cpu="1", aug_reuse="1"),
        quick_prepfs=dict(ram="8M"),
        threads=8, epochs=2,
        grid=lambda: ram_only_grid(20), quick_grid=lambda: ram_only_grid(50),
    ),
    "b": dict(
        title="CPU-bound: fast source, decode dominates",
        dataset=dict(classes=5, per_class=100, scale=1.0, seed=1),
        quick_dataset=dict(classes=3, per_class=50, scale=1.0, seed=1),
        slowfs=[],  # a passthrough without throttling
        # aug_reuse=2: with fast_paths (DCT-domain downscaling) augmenting from cached decoded pixels
        # costs about as much CPU as from the JPEG, so only reused variants can relieve the CPU much.
        prepfs=dict(ram="192M", ssd="0", cpu="1", aug_reuse="2"),
        quick_prepfs=dict(ram="40M"),
        threads=8, epochs=4,
        grid=lambda: [g + (0, 0, 0) for g in CPU_GRID], quick_grid=lambda: ram_only_grid(50),
    ),
    "c": dict(
        title="RAM-scarce, with an SSD",
        # 1.6x ImageNet-like sizes (mostly 800 px long side): decoded ~1.4 MB, 14x the JPEG.
        dataset=dict(classes=4, per_class=100, scale=1.6, seed=2),
        quick_dataset=dict(classes=3, per_class=50, scale=1.6, seed=2),
        slowfs=["--open-latency-ms", "2", "--read-latency-ms", "1", "--bandwidth-mbps", "40"],
        prepfs=dict(ram="32M", ssd="256M", cpu="1", aug_reuse="2"),
        quick_prepfs=dict(ram="12M", ssd="96M"),
        threads=8, epochs=2,
        grid=lambda: two_tier_grid([NONE3, RAW3, DEC3, AUG3],
                                   [NONE3, RAW3, DEC3, AUG3, (20, 0, 80), (0, 50, 50)]),
        quick_grid=lambda: [NONE3 + NONE3, RAW3 + RAW3, DEC3 + DEC3, AUG3 + AUG3, RAW3 + DEC3,
                            AUG3 + RAW3, NONE3 + (0, 50, 50)],
    ),
}

SINGLE_FORMS = {"all raw": RAW3 + RAW3, "all decoded": DEC3 + DEC3, "all augmented": AUG3 + AUG3}
NO_CACHE = NONE3 + NONE3


def single_form_of(shares, ssd_budget):
    """The single-form policy a fixed placement is (all raw/decoded/augmented, or no cache), if any.
    With no SSD tier, the SSD shares do not matter."""
    key = shares if ssd_budget else shares[:3] + shares[:3]
    if tuple(key) == NO_CACHE or (not ssd_budget and tuple(shares[:3]) == NONE3):
        return "no cache"
    for name, s in SINGLE_FORMS.items():
        if tuple(key) == s:
            return name
    return None


def shares_label(shares, two_tiers=True):
    def tri(t):
        return "/".join(f"{v:g}" for v in t)
    if not two_tiers:
        return tri(shares[:3])
    return f"{tri(shares[:3])} | {tri(shares[3:])}"


# --------------------------------------------------------------------------------------------
# Dataset (bench/gen_dataset.py's images, optionally scaled)
# --------------------------------------------------------------------------------------------

def _generate_group(args):
    """Mirror of gen_dataset.generate_group with every image size multiplied by `scale`
    (scale 1 gives gen_dataset's exact files)."""
    import gen_dataset as gd
    from PIL import Image
    out_dir, seed, photo_path, jobs, total, scale = args
    photo = None
    if photo_path is not None:
        with Image.open(photo_path) as im:
            factor = 1200 * max(1.0, scale) / min(im.size)
            if factor < 1:
                im.draft("RGB", (round(im.size[0] * factor), round(im.size[1] * factor)))
            photo = im.convert("RGB")
    written = 0
    for index, wnid, filename in jobs:
        rng = gd.image_rng(seed, index)
        rng.random()
        w, h = gd.pick_size(rng)
        size = (round(w * scale), round(h * scale))
        img = gd.photo_crop(photo, rng, size) if photo is not None else gd.synthetic_image(rng, size)
        path = os.path.join(out_dir, "train", wnid, filename)
        written += gd.save_jpeg(img, path, rng, gd.colour_mode(index, total))
    return written


def ensure_dataset(work, spec, jobs):
    """Generates (once; reused while its parameters match) and returns (dir, summary)."""
    import gen_dataset as gd
    name = f"ds-{spec['classes']}x{spec['per_class']}-scale{spec['scale']:g}-seed{spec['seed']}"
    out = os.path.join(work, name)
    done = os.path.join(work, name + ".done.json")
    if os.path.exists(done):
        with open(done) as f:
            meta = json.load(f)
        if meta.get("spec") == spec:
            return out, meta["summary"]
    shutil.rmtree(out, ignore_errors=True)
    t0 = time.time()
    photos = gd.find_photos()
    names = gd.make_names(spec["seed"], spec["classes"], spec["per_class"])
    total = len(names)
    for wnid in sorted({w for w, _ in names}):
        os.makedirs(os.path.join(out, "train", wnid), exist_ok=True)
    groups = {}
    for index, (wnid, filename) in enumerate(names):
        src = photos[int(gd.image_rng(spec["seed"], index).random() * len(photos))] if photos else None
        groups.setdefault(src, []).append((index, wnid, filename))
    tasks = [(out, spec["seed"], src, js[i:i + 50], total, spec["scale"])
             for src, js in groups.items() for i in range(0, len(js), 50)]
    with ProcessPoolExecutor(max_workers=max(1, jobs), initializer=os.nice, initargs=(10,)) as pool:  # gently
        total_bytes = sum(pool.map(_generate_group, tasks))
    kind = f"photos ({len(photos)} source files)" if photos else "synthetic"
    summary = (f"{total} images in {spec['classes']} classes, scale {spec['scale']:g} of gen_dataset sizes, "
               f"{total_bytes / 1e6:.1f} MB, mean {total_bytes / total / 1024:.1f} KB, source: {kind}")
    with open(done, "w") as f:
        json.dump({"spec": spec, "summary": summary}, f)
    log(f"dataset {name}: {summary} ({time.time() - t0:.0f} s)")
    return out, summary


# --------------------------------------------------------------------------------------------
# Processes and mounts
# --------------------------------------------------------------------------------------------

# The daemons stand on bench/mounts.Daemon (start, readiness, stop, unmount everything below);
# this bench adds its log file and CPU seconds, and probes readiness in a thread.
def probe(pred, timeout):
    """Runs pred() in a thread so a hung FUSE mount cannot hang the caller; False on timeout."""
    result = []
    t = threading.Thread(target=lambda: result.append(pred()), daemon=True)
    t.start()
    t.join(timeout)
    return bool(result and result[0])


class Daemon(mounts.Daemon):
    """mounts.Daemon with its output in a log file (after the command line), whose tail goes into
    the error when the daemon exits before it serves."""

    def __init__(self, args, mnt, logpath, ready, what, timeout=30):
        os.makedirs(mnt, exist_ok=True)
        force_unmount(mnt)
        self.logpath = logpath
        self.logf = open(logpath, "ab")
        self.logf.write(("\n$ " + " ".join(args) + "\n").encode())
        self.logf.flush()
        try:
            super().__init__(args, mnt, lambda: probe(ready, 5.0), what, log=self.logf, timeout=timeout)
        except RuntimeError as e:
            self.logf.close()
            raise RuntimeError(f"{e}: {self.log_tail()}") from None
        except BaseException:
            self.logf.close()
            raise

    def log_tail(self, n=2000):
        if not self.logf.closed:
            self.logf.flush()
        with open(self.logpath, "rb") as f:
            return f.read()[-n:].decode(errors="replace")

    def cpu_seconds(self):
        return proc_cpu.cpu_seconds(self.proc.pid, default=float("nan"))

    def stop(self, sig=signal.SIGTERM, timeout=20.0):
        rc = super().stop(sig, timeout)
        if not self.logf.closed:
            self.logf.close()
        return rc


def start_slowfs(tools, dataset, mnt, args, logpath):
    def ready():
        try:
            os.getxattr(mnt, "user.slowfs.stats")
            return is_mounted(mnt)
        except OSError:
            return False
    return Daemon([tools["slowfs"], dataset, mnt, "-f", *args], mnt, logpath, ready, "prepfs-slowfs")


def slowfs_counters(mnt):
    try:
        return json.loads(os.getxattr(mnt, "user.slowfs.stats"))
    except OSError:
        return {}


def start_prepfs(tools, source, mnt, opts, logpath):
    optstr = ",".join(f"{k}={v}" for k, v in opts.items())
    d = Daemon([tools["prepfs"], source, mnt, "-f", "-o", optstr], mnt, logpath,
               lambda: os.path.exists(os.path.join(mnt, ".prepfs", "stats")), "prepfs mount")
    d.optstr = optstr
    return d


def read_json(path):
    with open(path) as f:
        return json.load(f)


def prepfs_stats(mnt):
    try:
        return read_json(os.path.join(mnt, ".prepfs", "stats"))
    except (OSError, ValueError):
        return {}


def drop_caches():
    os.sync()
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")


def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def cpu_times():
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    idle = v[3] + (v[4] if len(v) > 4 else 0)
    return sum(v), idle


def flatten(d, prefix=""):
    out = {}
    for k, v in (d or {}).items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(flatten(v, key + "."))
        elif isinstance(v, (int, float)) and not isinstance(v, bool):
            out[key] = float(v)
    return out


# --------------------------------------------------------------------------------------------
# The reader
# --------------------------------------------------------------------------------------------

def read_whole(path):
    n = 0
    with open(path, "rb", buffering=0) as f:
        while True:
            b = f.read(1 << 20)
            if not b:
                return n
            n += len(b)


def python_epoch(root, rels, threads, seed):
    order = list(rels)
    random.Random(seed).shuffle(order)
    t0 = time.perf_counter()
    with ThreadPoolExecutor(threads) as pool:
        nbytes = sum(pool.map(lambda r: read_whole(os.path.join(root, r)), order))
    dt = time.perf_counter() - t0
    return {"files": len(order), "errors": 0, "bytes": nbytes, "seconds": dt,
            "files_per_s": len(order) / dt if dt > 0 else 0}


def epoch(tools, root, listfile, rels, threads, seed, timeout):
    """One shuffled epoch over rels (whole-file reads by `threads` threads); readbench's totals."""
    if not tools.get("readbench"):
        return python_epoch(root, rels, threads, seed)
    res = subprocess.run([tools["readbench"], root, "--list", listfile, "--threads", str(threads),
                          "--passes", "1", "--seed", str(seed), "--json"],
                         capture_output=True, text=True, timeout=timeout)
    if res.returncode not in (0, 2):
        raise RuntimeError(f"prepfs-readbench failed ({res.returncode}): {res.stderr.strip()[-500:]}")
    total = json.loads(res.stdout)["total"]
    if total.get("errors"):
        raise RuntimeError(f"prepfs-readbench: {total['errors']} files could not be read under {root}")
    return total


def spread_phases(root, rels, reuse, threads):
    """With aug_reuse R > 1 every sample starts the measured epochs at an open count spread evenly
    over 0..R-1 (the k-th path in hash order gets k mod R extra opens: exactly balanced), so each
    measured epoch mixes variant refills and reuses the way the model's steady state does (a refill
    on 1 of R requests) instead of all samples refilling in the same epoch."""
    if reuse <= 1:
        return 0
    by_hash = sorted(rels, key=lambda r: (zlib.crc32(r.encode()), r))
    jobs = [r for k, r in enumerate(by_hash) for _ in range(k % reuse)]
    random.Random(reuse).shuffle(jobs)
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(lambda r: read_whole(os.path.join(root, r)), jobs))
    return len(jobs)


# --------------------------------------------------------------------------------------------
# The plan: plan.json, or the text .prepfs/plan of builds before it
# --------------------------------------------------------------------------------------------

UNIT = {"B": 1, "KiB": 1024, "MiB": 1024 ** 2, "GiB": 1024 ** 3, "TiB": 1024 ** 4}


def parse_human(text):
    """'111.7 KiB' -> 114380.8, '64 MiB/s' -> bytes/s, '6.7e-05 s' -> 6.7e-05, 'unknown ...' -> 0."""
    text = text.strip()
    if text.startswith("unknown") or text == "unlimited":
        return 0.0
    m = re.match(r"([-+0-9.eE]+)\s*([KMGT]?i?B)?", text)
    if not m:
        return 0.0
    return float(m.group(1)) * UNIT.get(m.group(2) or "B", 1)


def parse_text_plan(text):
    """The human-readable plan of builds without plan.json (prepfs plan / explain())."""
    plan = {"mode": "auto", "inputs": {}, "placement": {f: {"ram": 0, "ssd": 0} for f in FORMS},
            "alternatives": {}, "legacy_text": True}
    section = None
    for line in text.splitlines():
        s = line.strip()
        if line.startswith("measured inputs"):
            section = "inputs"
            continue
        if line.startswith("placement"):
            section = "placement"
            continue
        if line.startswith("single-form alternatives"):
            section = "alt"
            continue
        if not line.startswith("  "):
            section = None
        m = re.match(r"predicted throughput: ([0-9.]+|unlimited).*bound by (.+)$", s)
        if m:
            plan["predicted"] = float("inf") if m.group(1) == "unlimited" else float(m.group(1))
            plan["binding"] = m.group(2).strip()
            continue
        if section == "inputs":
            parts = s.split(None, 1)
            if len(parts) == 2:
                plan["inputs"][parts[0]] = parse_human(parts[1])
        elif section == "placement":
            parts = s.split()
            if len(parts) == 3 and parts[0] in FORMS:
                plan["placement"][parts[0]] = {"ram": float(parts[1]), "ssd": float(parts[2])}
        elif section == "alt":
            m = re.match(r"(no cache|all raw|all decoded|all augmented)\s+([0-9.]+|unlimited)", s)
            if m:
                plan["alternatives"][m.group(1)] = float("inf") if m.group(2) == "unlimited" else float(m.group(2))
    return plan


def read_plan(mnt):
    d = os.path.join(mnt, ".prepfs")
    try:
        plan = read_json(os.path.join(d, "plan.json"))
        plan["legacy_text"] = False
    except FileNotFoundError:
        with open(os.path.join(d, "plan")) as f:
            plan = parse_text_plan(f.read())
    plan["inputs"] = normalize_inputs(plan.get("inputs", {}))
    # Not a model input but the planner's: files that are not samples, which the RAM tier holds
    # beside the plan (builds before it was reported: none).
    plan["inputs"]["other_bytes"] = float(plan.get("other_bytes") or 0)
    return plan


def normalize_inputs(raw):
    """Inputs as flat names (those of model::named_inputs), whatever nesting plan.json uses."""
    inp = {}
    for k, v in (raw or {}).items():
        if k in ("size", "sizes", "mean_size") and isinstance(v, dict):
            for f in FORMS:
                if f in v:
                    inp[f"size_{f}"] = float(v[f])
        elif k in ("size", "sizes") and isinstance(v, list) and len(v) == 3:
            for f, x in zip(FORMS, v):
                inp[f"size_{f}"] = float(x)
        elif isinstance(v, (int, float)) and not isinstance(v, bool):
            inp[k] = float(v)
        elif isinstance(v, dict) and isinstance(v.get("value"), (int, float)):
            inp[k] = float(v["value"])
    return inp


def placement_cells(p):
    """{form: {tier: n}} -> 6 numbers (ram r/d/a, ssd r/d/a)."""
    p = p or {}
    return [float((p.get(f) or {}).get(t, 0)) for t in TIERS for f in FORMS]


def placement_label(cells):
    if cells is None:
        return "-"
    ram = "/".join(f"{c:.0f}" for c in cells[:3])
    ssd = "/".join(f"{c:.0f}" for c in cells[3:])
    return f"{ram} | {ssd}"


# --------------------------------------------------------------------------------------------
# docs/MODEL.md, evaluated here (a cross-check of the daemon's numbers)
# --------------------------------------------------------------------------------------------

def fixed_placement(inputs, shares, headroom=1.0):
    """n(f,t) = floor(pct/100 x tier budget / mean size of f), RAM first, at most N in total (the
    daemon plans budgets x headroom, plan.json's "headroom", as entry sizes vary around their means)."""
    n_total = inputs.get("samples", 0)
    left = n_total
    cells = []
    for ti, tier in enumerate(TIERS):
        budget = max(0.0, inputs.get(f"{tier}_capacity", 0) * headroom - inputs.get("other_bytes", 0))
        for fi, form in enumerate(FORMS):
            size = slot_size(inputs, form, tier)
            n = math.floor(shares[ti * 3 + fi] / 100 * budget / size) if size > 0 else 0
            n = max(0, min(n, left))
            left -= n
            cells.append(n)
    return cells


def variant_beside_pixels(inputs):
    """MODEL.md: with R > 1 (and augmented/ read, as here), a sample kept decoded in RAM keeps its
    variant of the moment beside the pixels until the variant's last serve."""
    return inputs.get("aug_reuse", 1) > 1


def slot_size(inputs, form, tier):
    """RAM bytes of one sample placed in (form, tier): model::Inputs::slot_size."""
    size = inputs.get(f"size_{form}", 0)
    if form == "decoded" and tier == "ram" and variant_beside_pixels(inputs):
        size += inputs.get("size_augmented", 0)
    return size


RESOURCES = ("cpu", "ssd", "source bandwidth", "source requests", "copy", "consumer")  # model::resource_name


def model_usage(inputs, cells):
    """Per-request usage of a placement (view augmented/), per docs/MODEL.md, plus the cache hits
    and variant stores it implies (for comparing with the daemon's counters)."""
    g = inputs.get
    n = g("samples", 0)
    if n <= 0 or cells is None:
        return None
    x = {(f, t): cells[ti * 3 + fi] / n for ti, t in enumerate(TIERS) for fi, f in enumerate(FORMS)}
    xf = {f: x[(f, "ram")] + x[(f, "ssd")] for f in FORMS}
    miss = max(0.0, 1 - sum(x.values()))
    r = max(1.0, g("aug_reuse", 1))
    s_raw, s_dec, s_aug = g("size_raw", 0), g("size_decoded", 0), g("size_augmented", 0)
    c_full = g("c_dec", 0) + g("c_aug", 0)
    c_px = g("c_aug_from_decoded", 0)
    # Decoded pixels in RAM with the variant beside them: one request in R renders (and stores) it.
    beside = x[("decoded", "ram")] if variant_beside_pixels(inputs) else 0.0
    u = {"cpu_s": c_full * (miss + xf["raw"]) + c_px * (xf["decoded"] - beside) + c_px / r * beside
                  + c_full / r * xf["augmented"],
         "ssd_read": s_raw * x[("raw", "ssd")] + s_dec * x[("decoded", "ssd")] + s_aug * (r - 1) / r * x[("augmented", "ssd")],
         "ssd_write": s_aug / r * x[("augmented", "ssd")],
         "src_req": miss + xf["augmented"] / r,
         "copy": s_aug + s_aug / r * (x[("augmented", "ram")] + beside),
         "hits": xf["raw"] + xf["decoded"] + xf["augmented"] * (r - 1) / r,
         "stores": (xf["augmented"] + beside) / r}
    # The free room (MODEL.md): the recent fills in the RAM the placement leaves free keep variants,
    # so fewer requests render, and bytes, so fewer renders fetch (model::predict_with_free_room).
    room = free_room(inputs, x, miss)
    outside_raw = miss + xf["raw"]
    saved = 1 - room["renders"]
    u["cpu_s"] -= outside_raw * c_full * saved + x[("decoded", "ssd")] * c_px * saved
    u["ssd_read"] -= (x[("raw", "ssd")] * s_raw + x[("decoded", "ssd")] * s_dec) * saved
    u["src_req"] -= miss * (1 - room["renders"] * (1 - room["raw_survival"]))
    u["src_req"] -= xf["augmented"] / r * room["refill_raw_survival"]
    for k in ("cpu_s", "ssd_read", "src_req"):
        u[k] = max(0.0, u[k])
    u["src_bytes"] = s_raw * u["src_req"]
    u["free_room"] = room
    return u


def two_epoch_gap_cdf(t, n):
    """P(U1 + U2 <= t), U1, U2 uniform on [0, n]: the requests between a sample's serves in two
    consecutive shuffled epochs (model/partition.cc)."""
    if t <= 0:
        return 0.0
    if t <= n:
        return t * t / (2 * n * n)
    if t < 2 * n:
        return 1 - (2 * n - t) ** 2 / (2 * n * n)
    return 1.0


def survival(gap_epochs, touched, room, n):
    """P(an entry among the recent fills is still there gap_epochs epochs later), least recently
    used out, `touched` bytes put or touched per request."""
    if touched <= 0:
        return 1.0
    return two_epoch_gap_cdf(room / touched - (gap_epochs - 1) * n, n)


def free_room(inputs, x, miss):
    """model::free_room for augmented/ readers: the room the recent fills get, and how often a
    variant no tier keeps survives to its next serve, and an uncached sample's bytes to its next
    render."""
    g = inputs.get
    n = g("samples", 0)
    r = max(1.0, g("aug_reuse", 1))
    s_raw, s_dec, s_aug = g("size_raw", 0), g("size_decoded", 0), g("size_augmented", 0)
    held = s_aug * (r - 1) / r  # a variant in a tier is there R-1 of every R gaps between serves
    beside = held if variant_beside_pixels(inputs) else 0.0
    occupied = n * (x[("raw", "ram")] * s_raw + x[("decoded", "ram")] * (s_dec + beside) + x[("augmented", "ram")] * held)
    # plan.json's ram_capacity is the RAM tier's whole budget; it holds the files that are not samples
    # too, which the daemon leaves out of the room (Planner::planning_inputs).
    # (recent_floor: RamTier::kRecentFloor, 8 MiB, where a build before it was reported wrote the inputs)
    budget = g("ram_capacity", 0) - g("other_bytes", 0)
    room = max(budget - occupied, g("recent_floor", 8 << 20))
    outside = miss + x[("raw", "ram")] + x[("raw", "ssd")] + x[("decoded", "ssd")]

    def renders(h):
        return (1 + (r - 1) * (1 - h)) / r

    placed_variants = x[("augmented", "ram")] + x[("augmented", "ssd")]  # their refills fetch too

    def touched(rho):
        return (outside * s_aug * (r - 1) / r + (miss + x[("raw", "ssd")]) * s_raw * rho
                + x[("augmented", "ssd")] * held + placed_variants * s_raw / r)
    h = 0.0
    if r > 1:
        for _ in range(200):
            h_next = survival(1, touched(renders(h)), room, n)
            if abs(h_next - h) < 1e-12:
                h = h_next
                break
            h = h_next
    rho = renders(h)
    t = touched(rho)
    return {"room": room, "touched": t, "variant_survival": h, "renders": rho,
            "raw_survival": survival(1 / rho, t, room, n), "refill_raw_survival": survival(r, t, room, n)}


def model_predict(inputs, cells):
    """Predicted samples/s and binding resource of a placement (view augmented/), per docs/MODEL.md."""
    g = inputs.get
    u = model_usage(inputs, cells)
    if u is None:
        return None, None
    cpu, ssd_r, ssd_w, src_req, src_b, copy_b = (u[k] for k in ("cpu_s", "ssd_read", "ssd_write", "src_req",
                                                                "src_bytes", "copy"))

    def per(amount, cap):
        return amount / cap if cap > 0 else 0.0
    lat = g("src_latency", 0)
    q_src = g("src_concurrency", 1) / lat if lat > 0 else 0
    loads = {
        "cpu": per(cpu, g("cores", 0)),
        "ssd": per(ssd_r, g("ssd_read_bw", 0)) + per(ssd_w, g("ssd_write_bw", 0)),
        "source bandwidth": per(src_b, g("src_bandwidth", 0)),
        "source requests": per(src_req, q_src),
        "copy": per(copy_b, g("copy_bw", 0)),
        "consumer": per(1.0, g("consumer_rate", 0)),
    }
    worst = max(loads, key=loads.get)
    if loads[worst] <= 0:
        return float("inf"), "none"
    return 1.0 / loads[worst], worst


def pooled_inputs(runs):
    """Per input, the median over the scenario's mounts that measured it (non-zero): the model fed
    with the best measurements this run has, to separate model error from measurement error."""
    keys = set()
    for r in runs:
        keys |= set(r.get("plan_inputs", {}))
    pooled = {}
    for k in keys:
        vals = sorted(r["plan_inputs"][k] for r in runs if r.get("plan_inputs", {}).get(k))
        pooled[k] = vals[len(vals) // 2] if vals else 0.0
    return pooled


def pearson(xs, ys):
    pts = [(x, y) for x, y in zip(xs, ys) if x is not None and y is not None and math.isfinite(x) and math.isfinite(y)]
    if len(pts) < 3:
        return None
    mx = sum(p[0] for p in pts) / len(pts)
    my = sum(p[1] for p in pts) / len(pts)
    sxy = sum((p[0] - mx) * (p[1] - my) for p in pts)
    sxx = sum((p[0] - mx) ** 2 for p in pts)
    syy = sum((p[1] - my) ** 2 for p in pts)
    if sxx <= 0 or syy <= 0:
        return None
    return sxy / math.sqrt(sxx * syy)


# --------------------------------------------------------------------------------------------
# One placement
# --------------------------------------------------------------------------------------------

class Bench:
    def __init__(self, args, tools, work, caps):
        self.args = args
        self.tools = tools
        self.work = work
        self.caps = caps  # {"six": bool}
        self.epoch_seed = 1000
        self.mounts = 0  # numbers the per-mount logs of --log-dir

    def partition_option(self, shares):
        if shares is None:
            return "auto"
        nums = shares if self.caps["six"] else shares[:3]
        return "fixed:" + "/".join(f"{v:g}" for v in nums)

    def run_placement(self, sc, source, rels, listfile, shares, label):
        """Mounts prepfs with one partition, warms it, times the epochs; returns a result dict."""
        args = self.args
        mnt = os.path.join(self.work, "mnt")
        ssd_dir = os.path.join(self.work, "ssd")
        shutil.rmtree(ssd_dir, ignore_errors=True)
        os.makedirs(ssd_dir)
        opts = {"ram": sc["prepfs"]["ram"], "ssd": sc["prepfs"]["ssd"], "ssd_dir": ssd_dir,
                "partition": self.partition_option(shares), "aug_reuse": sc["prepfs"]["aug_reuse"],
                "seed": "1", "cpu": sc["prepfs"]["cpu"], "log_level": "info" if args.log_dir else "warn"}
        reuse = int(sc["prepfs"]["aug_reuse"])
        result = {"label": label, "shares": list(shares) if shares is not None else None,
                  "partition": opts["partition"], "load_start": loadavg()}
        t_start = time.time()
        self.mounts += 1
        logpath = os.path.join(self.work, "prepfs.log")
        if args.log_dir:
            logpath = os.path.join(args.log_dir, f"run{self.mounts}-" + opts["partition"].replace("/", "_") + ".log")
        d = start_prepfs(self.tools, source, mnt, opts, logpath)
        # With --log-dir, a line of the mount's cache state after every epoch (its log + ".epochs").
        epoch_state = (lambda r: self.log_epoch_state(mnt, logpath, r)) if args.log_dir else (lambda r: None)
        try:
            root = os.path.join(mnt, "augmented")
            # Warm-up: fill the placement. auto: epochs until neither its placement nor its count of
            # moves changed over a whole epoch (the planner re-plans on drift, and a new plan needs an
            # epoch to fill). Warm-up epochs run under the timed epochs' conditions (drop_caches
            # first): SSD and source rates measured from the page cache would drift once it is gone.
            warm = []
            prev = None
            max_warm = args.auto_max_warmup if shares is None else args.warmup
            min_warm = min(2, max_warm) if shares is None else args.warmup
            for w in range(max_warm):
                if sc["drop_caches"]:
                    drop_caches()
                self.epoch_seed += 1
                warm.append(epoch(self.tools, root, listfile, rels, sc["threads"], self.epoch_seed, args.epoch_timeout))
                epoch_state(warm[-1])
                plan = read_plan(mnt)
                state = placement_cells(plan.get("placement")) + [plan.get("moves", 0)]
                if shares is None and w + 1 >= min_warm and prev is not None and \
                        all(abs(a - b) <= max(0.5, 0.02 * max(a, b)) for a, b in zip(state, prev)):
                    break
                prev = state
            result["warmup_epochs"] = len(warm)
            result["warmup_files_per_s"] = [round(w["files_per_s"], 1) for w in warm]
            result["extra_opens"] = spread_phases(root, rels, reuse, sc["threads"])
            self.settle(mnt)
            result["stats_before"] = prepfs_stats(mnt)
            plan_before = read_plan(mnt)
            # Measured epochs, each after drop_caches (no SSD-tier or source pages from the last one).
            per_epoch = []
            cpu0, t_sum = d.cpu_seconds(), 0.0
            busy0 = cpu_times()
            src0 = slowfs_counters(source)
            for e in range(sc["epochs"]):
                if sc["drop_caches"]:
                    drop_caches()
                self.epoch_seed += 1
                c0 = d.cpu_seconds()
                r = epoch(self.tools, root, listfile, rels, sc["threads"], self.epoch_seed, args.epoch_timeout)
                r["daemon_cpu_s"] = d.cpu_seconds() - c0
                per_epoch.append(r)
                epoch_state(r)
                t_sum += r["seconds"]
            busy1 = cpu_times()
            files = sum(r["files"] for r in per_epoch)
            result["epochs"] = [{"files_per_s": round(r["files_per_s"], 2), "seconds": round(r["seconds"], 4),
                                 "lat_p50_ms": r.get("lat_p50_ms"), "lat_p99_ms": r.get("lat_p99_ms"),
                                 "daemon_cpu_s": r["daemon_cpu_s"]}
                                for r in per_epoch]
            result["measured"] = files / t_sum if t_sum > 0 else 0.0
            result["daemon_cores"] = (d.cpu_seconds() - cpu0) / t_sum if t_sum > 0 else None
            # The daemon's CPU per sample over the timed epochs (the drop_caches between them left out).
            result["daemon_cpu_ms_per_sample"] = 1e3 * sum(r["daemon_cpu_s"] for r in per_epoch) / files if files else None
            dt, di = busy1[0] - busy0[0], busy1[1] - busy0[1]
            result["machine_busy"] = 1 - di / dt if dt > 0 else None
            src1 = slowfs_counters(source)
            result["slowfs_delta_per_sample"] = {k: (src1[k] - src0.get(k, 0)) / files for k in src1
                                                 if isinstance(src1[k], (int, float))} if src1 else {}
            stats_after = prepfs_stats(mnt)
            result["stats_after"] = stats_after
            before, after = flatten(result["stats_before"]), flatten(stats_after)
            result["stats_delta_per_sample"] = {k: (after[k] - before.get(k, 0)) / files for k in after
                                                if not k.startswith("profile.") and after[k] != before.get(k, 0)}
            plan = read_plan(mnt)
            # A re-plan that moved samples during the timed epochs: the measurement mixes placements.
            result["moves_during_timing"] = (plan.get("moves") or 0) - (plan_before.get("moves") or 0)
            result["plans_during_timing"] = (plan.get("plans") or 0) - (plan_before.get("plans") or 0)
            result["placement_before_timing"] = placement_cells(plan_before.get("placement"))
            result["plan"] = {k: v for k, v in plan.items() if k != "inputs"}
            result["plan_inputs"] = plan["inputs"]
            result["placement_cells"] = placement_cells(plan.get("placement"))
            result["binding"] = plan.get("binding")
            daemon_pred = plan.get("predicted")
            fixed_pred_is_daemons = shares is None or (plan.get("mode") == "fixed" and not plan["legacy_text"])
            # The daemon's prediction of this placement (plan.json); with the old text plan, which
            # only describes the auto plan, this script's evaluation of MODEL.md stands in for it.
            headroom = plan.get("headroom") or 1.0
            spec_cells = fixed_placement(plan["inputs"], shares, headroom) if shares is not None else None
            result["spec_cells"] = spec_cells
            model_cells = result["placement_cells"] if fixed_pred_is_daemons else spec_cells
            hp, hb = model_predict(plan["inputs"], model_cells)
            result["harness_predicted"], result["harness_binding"] = hp, hb
            if fixed_pred_is_daemons:
                result["predicted"], result["prediction_source"] = daemon_pred, "daemon"
                if spec_cells is not None and any(abs(a - b) > 1 for a, b in zip(spec_cells, model_cells)):
                    result["placement_mismatch"] = True  # the daemon's n(f,t) is not the spec's formula
            else:
                result["predicted"], result["prediction_source"] = hp, "harness"
                result["binding"] = hb
                result["placement_cells"] = spec_cells
            if shares is None or plan.get("mode") == "fixed":
                result["optimal"] = plan.get("optimal")
                result["alternatives"] = plan.get("alternatives")
        finally:
            d.stop()
            shutil.rmtree(ssd_dir, ignore_errors=True)
        result["load_end"] = loadavg()
        result["wall_s"] = round(time.time() - t_start, 1)
        return result

    @staticmethod
    def log_epoch_state(mnt, logpath, r):
        """Entries per tier, full decodes, the plan's moves and placement after an epoch (--log-dir)."""
        st, pl = prepfs_stats(mnt), read_plan(mnt)
        with open(logpath + ".epochs", "a") as f:
            f.write(json.dumps({"t": time.time(), "rate": round(r["files_per_s"], 1), "ram_entries": st["ram"]["entries"],
                                "ssd_entries": st["ssd"]["entries"], "decoded": st["transform"]["decoded"],
                                "stopped": st["transform"].get("stopped_below_crop"), "moves": pl.get("moves"),
                                "moved": pl.get("moved_samples"), "placement": placement_cells(pl.get("placement")),
                                "samples": pl.get("inputs", {}).get("samples")}) + "\n")

    def settle(self, mnt, timeout=15):
        """Waits until the tiers stop changing (the SSD write queue drained)."""
        def sig():
            s = prepfs_stats(mnt)
            return [(s.get(t) or {}).get(k) for t in TIERS for k in ("bytes", "entries", "inserts")]
        last = sig()
        deadline = time.time() + timeout
        while time.time() < deadline:
            time.sleep(0.3)
            now = sig()
            if now == last:
                return
            last = now


# --------------------------------------------------------------------------------------------
# One scenario
# --------------------------------------------------------------------------------------------

def scenario_settings(key, quick):
    sc = dict(SCENARIOS[key])
    sc["key"] = key
    sc["prepfs"] = dict(sc["prepfs"])
    if quick:
        sc["dataset"] = sc["quick_dataset"]
        sc["prepfs"].update(sc.get("quick_prepfs", {}))
        sc["epochs"] = 1
        sc["grid_shares"] = sc["quick_grid"]()
    else:
        sc["grid_shares"] = sc["grid"]()
    return sc


def run_scenario(bench, key, sc, jobs):
    args = bench.args
    work = bench.work
    dataset, summary = ensure_dataset(work, sc["dataset"], jobs)
    train_rels = sorted(os.path.relpath(os.path.join(dp, f), dataset)
                        for dp, _, fs in os.walk(dataset) for f in fs if f.endswith(".JPEG"))
    rels = [r[:-len(".JPEG")] + ".ppm" for r in train_rels]  # augmented/ names (decoded_format=ppm)
    listfile = os.path.join(work, f"list-{key}.txt")
    with open(listfile, "w") as f:
        f.write("".join(r + "\n" for r in rels))
    two_tiers = sc["prepfs"]["ssd"] not in ("0", "0M", "0G")
    grid = sc["grid_shares"]
    if not bench.caps["six"]:
        # Legacy daemon: one R/D/A for both tiers; keep the grid points that mean that.
        grid = [g for g in grid if not two_tiers or tuple(g[:3]) == tuple(g[3:])] or grid[:1]
        grid = list(dict.fromkeys(tuple(g) for g in grid))
    order = list(range(len(grid))) + [None]  # None: auto
    random.Random(f"order-{key}").shuffle(order)  # load drift on a shared machine becomes noise, not bias
    out = {"key": key, "title": sc["title"], "dataset": summary, "samples": len(rels),
           "slowfs_args": sc["slowfs"], "prepfs": sc["prepfs"], "threads": sc["threads"],
           "epochs": sc["epochs"], "two_tiers": two_tiers, "drop_caches": sc["drop_caches"], "runs": [], "confirm": [],
           "load_start": loadavg(), "started": time.time()}
    slow_mnt = os.path.join(work, "slow")
    slow = start_slowfs(bench.tools, dataset, slow_mnt, sc["slowfs"], os.path.join(work, "slowfs.log"))
    try:
        for i, gi in enumerate(order):
            shares = grid[gi] if gi is not None else None
            label = shares_label(shares, two_tiers) if shares is not None else "auto"
            log(f"{key}: [{i + 1}/{len(order)}] partition={bench.partition_option(shares)} ...")
            try:
                r = bench.run_placement(sc, slow_mnt, rels, listfile, shares, label)
            except (RuntimeError, TimeoutError, OSError, subprocess.TimeoutExpired, ValueError) as e:
                if not args.keep_going:
                    raise
                log(f"{key}: {label}: FAILED: {e}")
                r = {"label": label, "shares": shares, "error": str(e)[-500:]}
            r["kind"] = "auto" if shares is None else "fixed"
            r["single_form"] = single_form_of(shares, two_tiers) if shares is not None else None
            out["runs"].append(r)
            if "measured" in r:
                log(f"{key}: {label}: measured {r['measured']:.1f}/s, predicted "
                    f"{fmt_num(r.get('predicted'))}/s ({r.get('binding')}), load {r['load_end']}, {r['wall_s']} s")
        # Auto against the best fixed placement, back to back (the max of many noisy runs is biased up).
        fixed_ok = [r for r in out["runs"] if r["kind"] == "fixed" and "measured" in r]
        if fixed_ok and args.confirm_rounds > 0:
            best = max(fixed_ok, key=lambda r: r["measured"])
            for rnd in range(args.confirm_rounds):
                for shares in ([None, best["shares"]] if rnd % 2 == 0 else [best["shares"], None]):
                    label = "auto" if shares is None else best["label"]
                    log(f"{key}: confirm round {rnd + 1}: {label} ...")
                    try:
                        r = bench.run_placement(sc, slow_mnt, rels, listfile,
                                                tuple(shares) if shares is not None else None, label)
                        r["kind"] = "auto" if shares is None else "best fixed"
                        out["confirm"].append(r)
                        log(f"{key}: confirm {label}: measured {r['measured']:.1f}/s")
                    except (RuntimeError, TimeoutError, OSError, subprocess.TimeoutExpired, ValueError) as e:
                        if not args.keep_going:
                            raise
                        log(f"{key}: confirm {label}: FAILED: {e}")
    finally:
        slow.stop()
    out["load_end"] = loadavg()
    out["wall_s"] = round(time.time() - out["started"], 1)
    return out


# --------------------------------------------------------------------------------------------
# Analysis, report and plots
# --------------------------------------------------------------------------------------------

def fmt_num(v, digits=1):
    if v is None:
        return "-"
    if isinstance(v, float) and math.isinf(v):
        return "inf"
    return f"{v:,.{digits}f}"


def md(text):
    """Text for a markdown table cell."""
    return str(text).replace("|", "\\|")


def median(xs):
    xs = sorted(x for x in xs if x is not None)
    if not xs:
        return None
    m = len(xs) // 2
    return xs[m] if len(xs) % 2 else (xs[m - 1] + xs[m]) / 2


def analyse(sc):
    runs = [r for r in sc["runs"] if "measured" in r]
    fixed = [r for r in runs if r["kind"] == "fixed"]
    auto = [r for r in runs if r["kind"] == "auto"]
    a = {"n_fixed": len(fixed)}
    a["pearson"] = pearson([r.get("predicted") for r in fixed], [r["measured"] for r in fixed])
    a["pearson_harness"] = pearson([r.get("harness_predicted") for r in fixed], [r["measured"] for r in fixed])
    pooled = pooled_inputs(fixed)
    a["pooled_inputs"] = pooled
    for r in fixed:
        cells = r.get("placement_cells")
        r["pooled_predicted"] = model_predict(pooled, cells)[0] if cells and pooled.get("samples") else None
    a["pearson_pooled"] = pearson([r.get("pooled_predicted") for r in fixed], [r["measured"] for r in fixed])
    for r in runs:
        u = model_usage(r.get("plan_inputs", {}), r.get("placement_cells"))
        dps = r.get("stats_delta_per_sample", {})
        if u:
            r["fidelity"] = {
                "hits": (dps.get("ram.hits", 0) + dps.get("ssd.hits", 0), u["hits"]),
                "inserts": (dps.get("ram.inserts", 0) + dps.get("ssd.inserts", 0), u["stores"]),
                "src_kb": (dps.get("source.bytes", 0) / 1e3, u["src_bytes"] / 1e3),
                "slowfs_kb": r.get("slowfs_delta_per_sample", {}).get("read_bytes", 0) / 1e3,
                "cpu_ms": (dps.get("transform.cpu_seconds", 0) * 1e3, u["cpu_s"] * 1e3),
                "ssd_read_kb": (dps.get("ssd.hit_bytes", 0) / 1e3, u["ssd_read"] / 1e3),
            }
    fid = [r["fidelity"]["hits"] for r in fixed if r.get("fidelity") and r["fidelity"]["hits"][1] > 0.05]
    a["hits_ratio_median"] = median([m / e for m, e in fid]) if fid else None
    fit = [r for r in fixed if r.get("fidelity") and r["fidelity"]["inserts"][0] - r["fidelity"]["inserts"][1] <= 0.05]
    a["n_fit"] = len(fit)
    a["pearson_fit"] = pearson([r.get("predicted") for r in fit], [r["measured"] for r in fit])
    a["auto_moved_during_timing"] = sum(1 for r in runs if r["kind"] == "auto" and r.get("moves_during_timing"))
    errs = [abs(r["measured"] / r["predicted"] - 1) for r in fixed
            if r.get("predicted") and math.isfinite(r["predicted"]) and r["predicted"] > 0]
    a["mean_abs_rel_err"] = sum(errs) / len(errs) if errs else None
    a["prediction_source"] = sorted({r.get("prediction_source") for r in fixed if r.get("prediction_source")})
    if not fixed:
        return a
    best = max(fixed, key=lambda r: r["measured"])
    a["best_fixed"] = {"label": best["label"], "measured": best["measured"], "predicted": best.get("predicted")}
    singles = {}
    for r in fixed:
        if r.get("single_form"):
            singles.setdefault(r["single_form"], r)
    a["singles"] = {k: {"label": v["label"], "measured": v["measured"], "predicted": v.get("predicted")}
                    for k, v in singles.items()}
    if auto:
        au = auto[0]
        a["auto"] = {"measured": au["measured"], "predicted": au.get("predicted"), "binding": au.get("binding"),
                     "placement": au.get("placement_cells"), "warmup_epochs": au.get("warmup_epochs")}
        a["auto_vs_best"] = au["measured"] / best["measured"]
        a["auto_vs_single"] = {k: au["measured"] / v["measured"] for k, v in singles.items() if v["measured"] > 0}
        # The auto plan's own choice, placed among the measured fixed placements by prediction.
        opt = au.get("optimal") or {}
        a["auto_plan_predicted"] = au.get("predicted") or opt.get("predicted")
    conf = sc.get("confirm", [])
    ca = [r["measured"] for r in conf if r["kind"] == "auto" and "measured" in r]
    cb = [r["measured"] for r in conf if r["kind"] == "best fixed" and "measured" in r]
    if ca and cb:
        a["confirm"] = {"auto": ca, "best": cb, "ratio": median(ca) / median(cb),
                        "auto_cpu_ms": [daemon_ms_per_sample(r) for r in conf if r["kind"] == "auto" and "measured" in r],
                        "best_cpu_ms": [daemon_ms_per_sample(r) for r in conf if r["kind"] == "best fixed" and "measured" in r]}
    return a


def daemon_ms_per_sample(r):
    """The daemon's CPU ms per sample over a run's timed epochs: recorded per epoch since the
    per-sample column was added; for older results.json, daemon_cores (CPU seconds over the timed
    span, drop_caches between epochs included, per second of epochs) / measured (samples per second
    of epochs)."""
    if r.get("daemon_cpu_ms_per_sample") is not None:
        return r["daemon_cpu_ms_per_sample"]
    if r.get("daemon_cores") is not None and r.get("measured"):
        return 1e3 * r["daemon_cores"] / r["measured"]
    return None


def verdict(value, target, fmt):
    if value is None:
        return "n/a"
    return f"{fmt(value)} ({'met' if value >= target else 'MISSED'}, target >= {fmt(target)})"


def write_report(data, out_dir):
    lines = ["# Partition model: predicted vs measured epoch throughput (issue 4)", ""]
    m = data["meta"]
    lines += [
        f"- command: `{m['command']}`",
        f"- date: {m['date']}; {m['machine']}",
        f"- load average at start {m['load_start']}, at end {m['load_end']}; whole run {m['wall_s'] / 60:.1f} min",
        f"- prepfs: `{m['prepfs']}` ({m['prepfs_note']}); reader: `prepfs-readbench MNT/augmented --list FILE "
        f"--threads K --passes 1 --seed S` per epoch (whole files, shuffled)",
        f"- daemon interface: {m['interface']}",
        "",
        "How each placement is measured: a fresh mount (`-o ram=..,ssd=..,ssd_dir=<fresh>,partition=..,aug_reuse=R,"
        "seed=1,cpu=..`) over the scenario's prepfs-slowfs source; warm-up epoch(s) through augmented/ (fixed: "
        f"{m['warmup']}; auto: until neither its plan.json placement nor its move count changed over a whole "
        f"epoch, at least 2, at most {m['auto_max_warmup']}); with aug_reuse R > 1 the k-th sample in hash order "
        "gets k mod R extra opens, so the measured epochs hold the steady-state mix of variant refills and reuses; "
        "then E timed shuffled epochs. Every epoch, warm-up included, starts after "
        "`sync; echo 3 > /proc/sys/vm/drop_caches` (unless the scenario says otherwise): the "
        "SSD tier's entries are files, and the pages of source files prepfs still holds open outlive an epoch "
        "(without the drop, a quick run saw slowfs serve ~10% fewer bytes than prepfs fetched, and a no-cache mount "
        "beat the source's cap), so SSD hits and source fetches would be served from memory. *measured* = samples / seconds over "
        "those epochs; *predicted* and *binding* are plan.json's after them (the model with this mount's measured "
        "inputs). Placements run in a shuffled order, so load drift on the shared machine shows as noise, not "
        "as a trend along the grid.",
        "",
        "Columns: *shares* = `fixed:` percentages of each tier's budget for raw/decoded/augmented (RAM | SSD); "
        "*n(f,t)* = samples per (form, tier) as plan.json reports them (RAM r/d/a | SSD r/d/a); *harness* = "
        "docs/MODEL.md evaluated by this script on that placement and the same mount's inputs (a cross-check of "
        "the daemon's number); *pooled* = the same with each input the median over the scenario's mounts (separates model "
        "error from input-measurement error); *busy* = share of both cores busy (all tenants) during the timed "
        "epochs; *daemon* = prepfs CPU seconds per second; *daemon ms/sample* = prepfs CPU per sample over the "
        "timed epochs.",
        "",
    ]
    if m.get("legacy"):
        lines += ["> **Legacy daemon.** This build has no 6-number `fixed:` partition and no plan.json: each "
                  "fixed placement used its RAM shares for both tiers, and *predicted* is the harness's "
                  "evaluation of MODEL.md on the inputs the text plan reports, not the daemon's. These "
                  "numbers test the bench, not the model.", ""]
    summary_rows = []
    for key, sc in data["scenarios"].items():
        a = sc["analysis"]
        lines += [f"## ({key}) {sc['title']}", ""]
        lines += [f"- dataset: {sc['dataset']}",
                  f"- source: `prepfs-slowfs DATASET MNT {' '.join(sc['slowfs_args'])}`" if sc["slowfs_args"]
                  else "- source: `prepfs-slowfs DATASET MNT` (no throttling)",
                  "- prepfs: " + ", ".join(f"{k}={v}" for k, v in sc["prepfs"].items()),
                  f"- reader: {sc['threads']} threads; {sc['epochs']} timed epoch(s) of {sc['samples']} samples per placement"
                  + ("; page cache dropped before each" if sc.get("drop_caches") else ""),
                  f"- load average at start {sc['load_start']}, at end {sc['load_end']}; {sc['wall_s'] / 60:.1f} min",
                  ""]
        if a.get("pooled_inputs"):
            pi = a["pooled_inputs"]
            lines += ["pooled inputs: " + ", ".join(f"{k} {pi[k]:.4g}" for k in sorted(pi) if pi[k]), ""]
        lines += ["| # | shares (RAM \\| SSD) | policy | n(f,t) | predicted /s | binding | harness /s | pooled /s | "
                  "measured /s | meas/pred | busy | daemon | daemon ms/sample | load (1 min) |",
                  "|---:|---|---|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
        runs = sorted(sc["runs"], key=lambda r: (r["kind"] != "auto", -(r.get("predicted") or 0)))
        for i, r in enumerate(runs, 1):
            if "measured" not in r:
                lines.append(f"| {i} | {md(r['label'])} | {r.get('kind')} | - | - | - | - | - | FAILED | - | - | - | - | - |")
                continue
            pred = r.get("predicted")
            ratio = r["measured"] / pred if pred and math.isfinite(pred) and pred > 0 else None
            policy = r.get("single_form") or ("auto" if r["kind"] == "auto" else "")
            lines.append(
                f"| {i} | {md(r['label']) if r['kind'] != 'auto' else '**auto**'} | {policy} | "
                f"{md(placement_label(r.get('placement_cells')))} | {fmt_num(pred)} | {r.get('binding') or '-'} | "
                f"{fmt_num(r.get('harness_predicted'))} | {fmt_num(r.get('pooled_predicted'))} | "
                f"{fmt_num(r['measured'])} | {fmt_num(ratio, 2)} | "
                f"{fmt_num(100 * r['machine_busy'], 0) + '%' if r.get('machine_busy') is not None else '-'} | "
                f"{fmt_num(r.get('daemon_cores'), 2)} | {fmt_num(daemon_ms_per_sample(r), 2)} | "
                f"{r['load_end'].split()[0]} |")
        lines.append("")
        pct = lambda v: f"{100 * v:.1f}%"
        num = lambda v: f"{v:.3f}"
        lines.append(f"- Pearson r, predicted vs measured over {a['n_fixed']} fixed placements "
                     f"(prediction: {', '.join(a.get('prediction_source') or ['-'])}): "
                     f"{verdict(a.get('pearson'), 0.95, num)}")
        lines.append(f"- Pearson r with the harness's evaluation: {fmt_num(a.get('pearson_harness'), 3)}; "
                     f"with pooled inputs: {fmt_num(a.get('pearson_pooled'), 3)}; mean |measured/predicted - 1|: "
                     f"{pct(a['mean_abs_rel_err']) if a.get('mean_abs_rel_err') is not None else '-'}")
        if a.get("best_fixed"):
            b = a["best_fixed"]
            lines.append(f"- best fixed placement: {b['label']}, measured {fmt_num(b['measured'])}/s")
        if a.get("auto"):
            au = a["auto"]
            lines.append(f"- auto: placement {placement_label(au['placement'])}, predicted {fmt_num(au['predicted'])}/s "
                         f"({au['binding']}), measured {fmt_num(au['measured'])}/s after {au['warmup_epochs']} warm-up epoch(s)")
            lines.append(f"- auto vs best fixed (grid runs): {verdict(a.get('auto_vs_best'), 0.95, pct)}")
            if a.get("confirm"):
                c = a["confirm"]
                lines.append(f"- auto vs best fixed re-measured back to back (median of {len(c['auto'])}/{len(c['best'])}): "
                             f"{verdict(c['ratio'], 0.95, pct)} (auto {', '.join(fmt_num(x) for x in c['auto'])}; "
                             f"best {', '.join(fmt_num(x) for x in c['best'])} /s; daemon CPU ms/sample: auto "
                             f"{', '.join(fmt_num(x, 2) for x in c.get('auto_cpu_ms', []))}, best "
                             f"{', '.join(fmt_num(x, 2) for x in c.get('best_cpu_ms', []))})")
            for k in ("all raw", "all decoded", "all augmented", "no cache"):
                if k in a.get("auto_vs_single", {}):
                    lines.append(f"- auto vs {k} ({a['singles'][k]['label']}, measured "
                                 f"{fmt_num(a['singles'][k]['measured'])}/s): {a['auto_vs_single'][k]:.2f}x")
        if a.get("hits_ratio_median") is not None:
            lines.append(f"- placements as realised: median over fixed placements of cache hits per request, "
                         f"measured / implied by n(f,t): {a['hits_ratio_median']:.2f} (table below)")
        if a.get("n_fit") is not None and a["n_fit"] < a["n_fixed"]:
            lines.append(f"- Pearson r over the {a['n_fit']} fixed placements that fit (no refills beyond augmented "
                         f"variants, 0.05 per request tolerance): {fmt_num(a.get('pearson_fit'), 3)}")
        if a.get("auto_moved_during_timing"):
            lines.append(f"- **auto moved samples during the timed epochs in {a['auto_moved_during_timing']} of its runs** "
                         "(a re-plan after the warm-up converged): those numbers mix placements")
        lines += ["", f"![{key}]({key}.png)", ""]
        lines += ["<details><summary>Placement fidelity: the daemon's counters per request during the timed epochs, "
                  "measured (what n(f,t) and MODEL.md imply)</summary>", "",
                  "*hits* = RAM + SSD hits; *stores* = tier inserts (the model expects only augmented refills, "
                  "x_aug/R; more means entries were evicted and refilled: the placement does not fit); *source KB* = "
                  "bytes prepfs fetched (*slowfs KB*: what the source served); *CPU ms* = transform CPU; *SSD KB* = SSD "
                  "hit bytes; *moves* = samples the planner moved during the timed epochs.", "",
                  "| shares | hits | stores | source KB | slowfs KB | CPU ms | SSD KB | moves |",
                  "|---|---:|---:|---:|---:|---:|---:|---:|"]
        for r in runs:
            f = r.get("fidelity")
            if not f:
                continue
            pair = lambda v, d=2: f"{v[0]:.{d}f} ({v[1]:.{d}f})"
            lines.append(f"| {md(r['label'])} | {pair(f['hits'])} | {pair(f['inserts'])} | {pair(f['src_kb'], 0)} | "
                         f"{f['slowfs_kb']:.0f} | {pair(f['cpu_ms'])} | {pair(f['ssd_read_kb'], 0)} | "
                         f"{r.get('moves_during_timing', '-')} |")
        lines += ["", "</details>", ""]
        summary_rows.append((key, sc["title"], a))
    lines += ["## Summary", "", "| scenario | fixed placements | Pearson r (>= 0.95) | auto / best fixed (>= 95%) | "
              "auto / best, back to back | auto / all raw | auto / all decoded | auto / all augmented |",
              "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for key, title, a in summary_rows:
        s = a.get("auto_vs_single", {})
        lines.append(f"| ({key}) {title} | {a['n_fixed']} | {fmt_num(a.get('pearson'), 3)} | "
                     f"{fmt_num(100 * a['auto_vs_best'], 1) + '%' if a.get('auto_vs_best') else '-'} | "
                     f"{fmt_num(100 * a['confirm']['ratio'], 1) + '%' if a.get('confirm') else '-'} | "
                     + " | ".join(f"{s[k]:.2f}x" if k in s else "-" for k in ("all raw", "all decoded", "all augmented"))
                     + " |")
    lines += ["", "Per-run details (warm-up rates, per-epoch rates, plan.json, stats deltas per sample, slowfs "
              "counters) are in results.json.", ""]
    with open(os.path.join(out_dir, "results.md"), "w") as f:
        f.write("\n".join(lines))


def plot(data, out_dir):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    colours = {"cpu": "tab:red", "ssd": "tab:purple", "source bytes": "tab:blue", "source bandwidth": "tab:blue",
               "source requests": "tab:cyan", "copy": "tab:olive", "consumer": "tab:gray"}
    for key, sc in data["scenarios"].items():
        a = sc["analysis"]
        runs = [r for r in sc["runs"] if "measured" in r]
        fixed = [r for r in runs if r["kind"] == "fixed" and r.get("predicted") and math.isfinite(r["predicted"])]
        auto = [r for r in runs if r["kind"] == "auto"]
        fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(13, 5.5))
        seen = set()
        for r in fixed:
            b = r.get("binding") or "?"
            ax1.scatter(r["predicted"], r["measured"], c=colours.get(b, "black"), s=36,
                        label=None if b in seen else f"fixed, bound by {b}")
            seen.add(b)
            if r.get("single_form"):
                ax1.annotate(r["single_form"], (r["predicted"], r["measured"]), fontsize=8,
                             xytext=(4, -10), textcoords="offset points")
        churn = [r for r in fixed if r.get("fidelity") and r["fidelity"]["inserts"][0] - r["fidelity"]["inserts"][1] > 0.05]
        if churn:
            ax1.scatter([r["predicted"] for r in churn], [r["measured"] for r in churn], marker="o", s=110,
                        facecolors="none", edgecolors="black", label="placement did not fit (entries refilled)")
        for r in auto:
            if r.get("predicted") and math.isfinite(r["predicted"]):
                ax1.scatter(r["predicted"], r["measured"], marker="*", s=220, c="gold", edgecolors="black",
                            label="auto", zorder=5)
        vals = [v for r in fixed + auto for v in (r.get("predicted"), r["measured"]) if v and math.isfinite(v)]
        if vals:
            hi = max(vals) * 1.08
            ax1.plot([0, hi], [0, hi], "k--", lw=1, label="y = x")
            ax1.set_xlim(0, hi)
            ax1.set_ylim(0, hi)
        r_txt = f"Pearson r = {a['pearson']:.3f}" if a.get("pearson") is not None else "Pearson r: n/a"
        ax1.set_title(f"({key}) predicted vs measured, {len(fixed)} fixed placements\n{r_txt}", fontsize=10)
        ax1.set_xlabel("predicted samples/s (plan.json)" if not data["meta"].get("legacy")
                       else "predicted samples/s (harness, legacy daemon)")
        ax1.set_ylabel("measured samples/s")
        ax1.legend(fontsize=8, loc="upper left")
        ax1.grid(alpha=0.3)

        bars = []
        if auto:
            bars.append(("auto", auto[0]["measured"], auto[0].get("predicted")))
        if a.get("best_fixed"):
            bars.append((f"best fixed\n{a['best_fixed']['label']}", a["best_fixed"]["measured"], a["best_fixed"]["predicted"]))
        for k in ("all raw", "all decoded", "all augmented", "no cache"):
            if k in a.get("singles", {}):
                bars.append((k, a["singles"][k]["measured"], a["singles"][k]["predicted"]))
        if bars:
            xs = range(len(bars))
            ax2.bar(xs, [b[1] for b in bars], color=["gold"] + ["tab:green"] + ["tab:gray"] * (len(bars) - 2),
                    edgecolor="black", label="measured")
            ax2.scatter(xs, [b[2] if b[2] and math.isfinite(b[2]) else float("nan") for b in bars], marker="_",
                        s=600, c="black", zorder=5, label="predicted")
            conf = sc.get("confirm", [])
            for x, kind in ((0, "auto"), (1, "best fixed")):
                ys = [r["measured"] for r in conf if r["kind"] == kind and "measured" in r]
                if ys and len(bars) > x:
                    ax2.scatter([x] * len(ys), ys, marker="o", s=30, c="white", edgecolors="black", zorder=6,
                                label="re-measured back to back" if x == 0 else None)
            ax2.set_xticks(list(xs))
            ax2.set_xticklabels([b[0] for b in bars], fontsize=8)
            for x, b in zip(xs, bars):
                ax2.annotate(f"{b[1]:.0f}", (x, b[1]), ha="center", va="bottom", fontsize=8,
                             xytext=(0, 2), textcoords="offset points")
            sub = f"auto / best fixed = {100 * a['auto_vs_best']:.1f}%" if a.get("auto_vs_best") else ""
            if a.get("confirm"):
                sub += f"; back to back {100 * a['confirm']['ratio']:.1f}%"
            ax2.set_title(f"({key}) auto vs best fixed vs single forms\n{sub}", fontsize=10)
            ax2.set_ylabel("measured samples/s")
            ax2.legend(fontsize=8)
            ax2.grid(axis="y", alpha=0.3)
        fig.suptitle(sc["title"], fontsize=11)
        fig.tight_layout()
        fig.savefig(os.path.join(out_dir, f"{key}.png"), dpi=110)
        plt.close(fig)


# --------------------------------------------------------------------------------------------
# Main
# --------------------------------------------------------------------------------------------

def daemon_caps(prepfs_bin):
    """What this prepfs build supports: 6-number fixed partitions (from --help)."""
    out = subprocess.run([prepfs_bin, "--help"], capture_output=True, text=True).stdout
    line = next((l for l in out.splitlines() if l.strip().startswith("partition=")), "")
    slashes = max((w.count("/") for w in line.split()), default=0)
    six = slashes >= 5 or bool(re.search(r"RAM.*SSD|ram.*ssd|6 numbers|six", line))
    return {"six": six, "help_line": line.strip()}


def machine_line():
    try:
        cpu = next(l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name"))
    except (OSError, StopIteration):
        cpu = "?"
    mem = next((int(l.split()[1]) for l in open("/proc/meminfo") if l.startswith("MemTotal")), 0)
    return f"{os.cpu_count()} CPUs ({cpu}), {mem / 2 ** 20:.0f} GiB RAM, kernel {platform.release()}"


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__.split("\n\n", 2)[2])
    p.add_argument("build", nargs="?", default="build", help="build directory (default: build)")
    p.add_argument("--quick", action="store_true", help="smoke test: ~150 images, 7 placements, 1 timed epoch")
    p.add_argument("--scenarios", default="a,b,c", help="comma-separated subset of a,b,c")
    p.add_argument("--work", default="/var/tmp/prepfs-partition-bench", help="datasets, mounts, logs")
    p.add_argument("--out", default=HERE, help="where results.md, results.json and the plots go")
    p.add_argument("--warmup", type=int, default=1, help="warm-up epochs of a fixed placement")
    p.add_argument("--auto-max-warmup", type=int, default=6, help="most warm-up epochs for partition=auto")
    p.add_argument("--confirm-rounds", type=int, default=3,
                   help="back-to-back re-measurements of auto and the best fixed placement, the order "
                        "alternating by round (default 3)")
    p.add_argument("--epochs", type=int, help="timed epochs per placement (default: per scenario)")
    p.add_argument("--max-placements", type=int, help="use only the first N grid placements (debugging)")
    p.add_argument("--drop-caches", choices=("always", "ssd", "never"), default="always",
                   help="drop the page cache before each timed epoch: always (default: the SSD tier's entries "
                        "are files, and the pages of source files prepfs still holds open outlive an epoch), "
                        "only in scenarios with an SSD tier, or never")
    p.add_argument("--keep-going", action="store_true", help="record a failed placement and go on")
    p.add_argument("--jobs", type=int, default=1, help="dataset generation processes")
    p.add_argument("--epoch-timeout", type=float, default=600)
    p.add_argument("--python-reader", action="store_true", help="read with Python threads, not prepfs-readbench")
    p.add_argument("--report-only", action="store_true", help="rebuild results.md and the plots from results.json")
    p.add_argument("--log-dir", help="the daemon at log_level=info, one log per mount here (runN-PARTITION.log), and "
                                     "after every epoch a line of its cache state (runN-PARTITION.log.epochs)")
    args = p.parse_args()
    ensure_matplotlib()  # the plots come at the end: fail or install now, not after the run
    out_dir = os.path.abspath(args.out)
    os.makedirs(out_dir, exist_ok=True)
    json_path = os.path.join(out_dir, "results.json")
    if args.log_dir:
        args.log_dir = os.path.abspath(args.log_dir)
        os.makedirs(args.log_dir, exist_ok=True)

    if args.report_only:
        data = read_json(json_path)
        for sc in data["scenarios"].values():
            # This script's MODEL.md evaluation as it is now, on each mount's recorded inputs and
            # placement (the daemon's own prediction stays what plan.json said during the run).
            for r in sc["runs"]:
                if r.get("prediction_source") == "daemon" and r.get("plan_inputs") and r.get("placement_cells"):
                    r["harness_predicted"], r["harness_binding"] = model_predict(r["plan_inputs"], r["placement_cells"])
            sc["analysis"] = analyse(sc)
        write_report(data, out_dir)
        plot(data, out_dir)
        log(f"wrote {out_dir}/results.md and plots")
        return 0

    if os.geteuid() != 0:
        p.error("run as root (FUSE mounts, drop_caches)")
    build = os.path.abspath(args.build)
    work = os.path.abspath(args.work)
    os.makedirs(work, exist_ok=True)
    tools = {"slowfs": os.path.join(build, "bench", "prepfs-slowfs"),
             "readbench": None if args.python_reader else os.path.join(build, "bench", "prepfs-readbench")}
    for name in ("slowfs", "readbench"):
        if tools[name] and not os.access(tools[name], os.X_OK):
            p.error(f"missing {tools[name]} (ninja -C {args.build} bench/prepfs-slowfs bench/prepfs-readbench)")
    src_bin = os.path.join(build, "tools", "prepfs")
    if not os.access(src_bin, os.X_OK):
        p.error(f"missing {src_bin}")
    # Run a copy: a rebuild during the run must not change the binary half way.
    tools["prepfs"] = os.path.join(work, "prepfs")
    shutil.copy2(src_bin, tools["prepfs"])
    with open(src_bin, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()[:12]
    caps = daemon_caps(tools["prepfs"])
    keys = [k.strip() for k in args.scenarios.split(",") if k.strip()]
    for k in keys:
        if k not in SCENARIOS:
            p.error(f"unknown scenario {k}")

    def on_signal(_sig, _frame):  # SIGTERM unwinds like Ctrl-C: every mount is released on the way out
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, on_signal)

    cmd = " ".join(["/usr/bin/python3", os.path.relpath(os.path.abspath(__file__), os.getcwd())] + sys.argv[1:])
    meta = {"command": cmd, "date": datetime.datetime.utcnow().strftime("%Y-%m-%d %H:%M UTC"),
            "machine": machine_line(), "load_start": loadavg(), "legacy": not caps["six"],
            "prepfs": f"{src_bin}", "prepfs_note": f"run from a copy, sha256 {digest}, "
            f"built {time.strftime('%Y-%m-%d %H:%M', time.localtime(os.path.getmtime(src_bin)))}",
            "interface": ("6-number fixed partitions" if caps["six"] else "legacy: 3-number fixed partitions")
            + f"; --help: `{caps['help_line']}`",
            "warmup": f"{args.warmup} epoch(s)", "auto_max_warmup": args.auto_max_warmup, "quick": args.quick}
    log(f"daemon: {meta['interface']}")
    bench = Bench(args, tools, work, caps)
    data = {"meta": meta, "scenarios": {}}
    t0 = time.time()
    try:
        for k in keys:
            sc = scenario_settings(k, args.quick)
            if args.epochs:
                sc["epochs"] = args.epochs
            has_ssd = sc["prepfs"]["ssd"] not in ("0", "0M", "0G")
            sc["drop_caches"] = args.drop_caches == "always" or (args.drop_caches == "ssd" and has_ssd)
            if args.max_placements:
                sc["grid_shares"] = sc["grid_shares"][:args.max_placements]
            log(f"scenario ({k}) {sc['title']}: {len(sc['grid_shares'])} fixed placements + auto")
            data["scenarios"][k] = run_scenario(bench, k, sc, args.jobs)
            data["scenarios"][k]["analysis"] = analyse(data["scenarios"][k])
            meta["load_end"], meta["wall_s"] = loadavg(), time.time() - t0
            with open(json_path, "w") as f:
                json.dump(data, f, indent=1, default=str)
    except KeyboardInterrupt:
        log("interrupted; mounts were released")
        return 130
    finally:
        force_unmount(os.path.join(work, "mnt"))
        force_unmount(os.path.join(work, "slow"))
    meta["load_end"], meta["wall_s"] = loadavg(), time.time() - t0
    with open(json_path, "w") as f:
        json.dump(data, f, indent=1, default=str)
    write_report(data, out_dir)
    plot(data, out_dir)
    log(f"done in {(time.time() - t0) / 60:.1f} min: {out_dir}/results.md, results.json, "
        + ", ".join(f"{k}.png" for k in keys))
    return 0


if __name__ == "__main__":
    sys.exit(main())
