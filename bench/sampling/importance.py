#!/usr/bin/python3
"""Importance (SHADE's setting) on a small real training run: hit ratio and accuracy.

    /usr/bin/python3 bench/sampling/importance.py [--build build] [--repeats 3] [--epochs 6]

A generated CIFAR-like set: 10 classes (5 colours of a square x horizontal or vertical stripes) of
160x160 JPEGs with noise, each image at its own contrast so that some are hard (low contrast) and
most easy; the loader decodes and downsizes to 32x32. A small CNN trains on CPU with Debian's torch
for E epochs through a prepfs mount of the set (RAM = 30% of the dataset bytes, no SSD, no
prefetch, partition=fixed:100/0/0) with PrepfsSampler, in three runs per repeat (same seed, same
initial weights, shuffled order):

  uniform+lru          mode="plain", eviction=lru: the baseline
  importance+lru       mode="importance" (25% extra visits to high-loss samples), eviction=lru
  importance+imp       mode="importance", eviction=importance (report_loss feeds .prepfs/importance)

Every run reports its per-sample losses (report_loss), so only the mode and the policy differ.
Hit ratio = 1 - source reads / samples read (prepfs stats), over epochs 2..E (the first is cold for
all). Accuracy on 1000 held-out images generated the same way, after each epoch. Page cache: the
loader drops each file's pages after reading it (posix_fadvise DONTNEED), so every read reaches
prepfs. CPU per sample, per epoch: the trainer's (the main process), its two DataLoader workers'
(who read and decode; /proc of the iterator's workers) and the prepfs daemon's. Writes
results/importance.json.
"""
import argparse
import io
import os
import random
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from bench_deps import ensure_modules  # noqa: E402

ensure_modules(["numpy", "torch", "torchvision", "PIL", "prepfs"], install="test",
               why="the training run's loader, CNN and PrepfsSampler")
import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
from PIL import Image  # noqa: E402
from torchvision import datasets  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
from common import log  # noqa: E402
from prepfs import Indexed, PrepfsSampler  # noqa: E402

COLOURS = [(220, 40, 40), (40, 200, 40), (40, 60, 230), (230, 210, 40), (200, 40, 210)]
SIDE = 160


def image(cls, rng):
    """One sample of class cls: stripes (horizontal or vertical) with a coloured square, at a random
    contrast (hard when low) over noise. Pure function of the rng state."""
    colour, vertical = COLOURS[cls % 5], cls >= 5
    contrast = rng.choice([rng.uniform(0.04, 0.15), rng.uniform(0.3, 1.0)], p=[0.3, 0.7])
    y, x = np.mgrid[0:SIDE, 0:SIDE]
    period = rng.integers(10, 18)
    stripes = ((x if vertical else y) // (period // 2)) % 2
    img = np.full((SIDE, SIDE, 3), 128.0) + (stripes[..., None] - 0.5) * 120 * contrast
    s = rng.integers(30, 60)
    top, left = rng.integers(0, SIDE - s, size=2)
    img[top:top + s, left:left + s] = img[top:top + s, left:left + s] * (1 - contrast) + np.array(colour) * contrast
    img += rng.normal(0, 40, img.shape)
    return Image.fromarray(np.clip(img, 0, 255).astype(np.uint8))


def to_tensor(im):
    a = np.asarray(im.convert("RGB").resize((32, 32), Image.BILINEAR), dtype=np.float32) / 255.0
    return torch.from_numpy((a - 0.5) / 0.25).permute(2, 0, 1)


def ensure_dataset(work, classes, per_class):
    root = os.path.join(work, f"cifarlike2-{classes}x{per_class}")
    if not os.path.exists(root + ".done"):
        log(f"generating {classes}x{per_class} images in {root}")
        rng = np.random.default_rng(7)
        for c in range(classes):
            d = os.path.join(root, "train", f"c{c:02d}")
            os.makedirs(d, exist_ok=True)
            for i in range(per_class):
                image(c, rng).save(os.path.join(d, f"{i:05d}.jpg"), quality=95)
        open(root + ".done", "w").close()
    return root


def test_set(classes, n):
    rng = np.random.default_rng(12345)
    xs, ys = [], []
    for i in range(n):
        c = i % classes
        buf = io.BytesIO()
        image(c, rng).save(buf, format="JPEG", quality=95)  # the same JPEG round trip as training
        xs.append(to_tensor(Image.open(io.BytesIO(buf.getvalue()))))
        ys.append(c)
    return torch.stack(xs), torch.tensor(ys)


def load(path):
    with open(path, "rb", buffering=0) as f:
        data = f.read()
        os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)  # the next read reaches prepfs
    return to_tensor(Image.open(io.BytesIO(data)))


def model(classes):
    return nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Flatten(), nn.Linear(32 * 8 * 8, 64), nn.ReLU(), nn.Linear(64, classes))


def workers_cpu(it):
    """CPU seconds so far of a DataLoader iterator's worker processes (persistent: alive across
    epochs, so the count only grows)."""
    return sum(common.proc_cpu(w.pid) for w in getattr(it, "_workers", None) or [])


def run(tools, work, dataset, classes, test, case, epochs, seed, ram):
    mode, eviction = {"uniform+lru": ("plain", "lru"), "importance+lru": ("importance", "lru"),
                      "importance+imp": ("importance", "importance")}[case]
    opts = f"ram={ram},ssd=0,prefetch_window=0,partition=fixed:100/0/0,eviction={eviction}"
    with common.Prepfs(tools, dataset, os.path.join(work, "mnt"), opts, work) as fs:
        ds = datasets.ImageFolder(os.path.join(fs.mnt, "raw", "train"), loader=load)
        sampler = PrepfsSampler(Indexed(ds), fs.mnt, seed=seed, mode=mode, job="train", importance_flush=256)
        loader = torch.utils.data.DataLoader(Indexed(ds), batch_size=64, sampler=sampler, num_workers=2,
                                             persistent_workers=True)
        torch.manual_seed(seed)
        net = model(classes)
        opt = torch.optim.Adam(net.parameters(), lr=1e-3)
        lossf = nn.CrossEntropyLoss(reduction="none")
        out = []
        workers0, it = 0.0, None  # the persistent workers start at the first epoch's iter()
        for epoch in range(epochs):
            sampler.set_epoch(epoch)
            s0, t0, cpu0, daemon0 = fs.stats(), time.time(), time.process_time(), fs.cpu()
            samples, loss_sum = 0, 0.0
            net.train()
            it = iter(loader)
            for idx, (x, y) in it:
                losses = lossf(net(x), y)
                opt.zero_grad()
                losses.mean().backward()
                opt.step()
                sampler.report_loss(idx, losses.detach())
                samples += len(idx)
                loss_sum += float(losses.sum())
            wall = time.time() - t0
            trainer_cpu, daemon_cpu, workers1 = time.process_time() - cpu0, fs.cpu() - daemon0, workers_cpu(it)
            s1 = fs.stats()
            net.eval()
            with torch.no_grad():
                acc = float((net(test[0]).argmax(1) == test[1]).float().mean())
            out.append({"epoch": epoch, "samples": samples, "train_loss": loss_sum / samples, "test_acc": acc,
                        "source_reads": s1["source"]["reads"] - s0["source"]["reads"],
                        "source_bytes": s1["source"]["bytes"] - s0["source"]["bytes"],
                        "ram_hits": s1["ram"]["hits"] - s0["ram"]["hits"], "wall_s": wall,
                        "trainer_cpu_s": trainer_cpu, "workers_cpu_s": workers1 - workers0,
                        "daemon_cpu_s": daemon_cpu, "load": common.loadavg()})
            workers0 = workers1
            log(f"  {case} epoch {epoch}: loss {out[-1]['train_loss']:.3f} acc {acc:.3f} "
                f"hit {1 - out[-1]['source_reads'] / samples:.3f} ({wall:.1f} s)")
        sampler.close()
        del it, loader
        return {"options": fs.options, "mode": mode, "eviction": eviction, "epochs": out}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(common.REPO, "build"))
    ap.add_argument("--work", default="/var/tmp/prepfs-sampling-importance")
    ap.add_argument("--classes", type=int, default=10)
    ap.add_argument("--per-class", type=int, default=500)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--epochs", type=int, default=6)
    ap.add_argument("--cache", type=float, default=0.3)
    ap.add_argument("--out", default=os.path.join(common.HERE, "results", "importance.json"))
    args = ap.parse_args()
    torch.set_num_threads(1)  # two shared cores: the trainer and the two loader workers
    os.makedirs(args.work, exist_ok=True)
    tools = common.Tools(args.build, args.work)
    dataset = ensure_dataset(args.work, args.classes, args.per_class)
    files = common.files_of(dataset)
    total = sum(os.path.getsize(os.path.join(dataset, p)) for p in files)
    test = test_set(args.classes, 1000)
    data = common.header(sys.argv)
    data.update({"dataset": {"files": len(files), "bytes": total}, "cache": args.cache, "epochs": args.epochs,
                 "page_cache": "the loader drops each file's pages after reading it (posix_fadvise DONTNEED)",
                 "runs": []})
    cases = ["uniform+lru", "importance+lru", "importance+imp"]
    for rep in range(args.repeats):
        random.Random(rep).shuffle(cases)
        for case in cases:
            log(f"repeat {rep + 1}: {case}")
            res = run(tools, args.work, dataset, args.classes, test, case, args.epochs, rep, int(args.cache * total))
            res.update({"case": case, "repeat": rep})
            data["runs"].append(res)
            common.save(args.out, data)


if __name__ == "__main__":
    main()
