#!/usr/bin/python3
"""Per-core PIL (+ torchvision) baseline for prepfs-xfbench, on the same files.

    /usr/bin/python3 bench/transform/pil_bench.py [--seconds T] [--rounds R] [--only CASE,...]
                                                  [--boxes FILE] [--items N] PATH...
    /usr/bin/python3 bench/transform/pil_bench.py --verify DUMPDIR

Cases (one thread: torch.set_num_threads(1); files read into memory first):
  decode                    Image.open(f).convert('RGB')
  decode+ppm                the same, then PPM encoding (what the decoded/ view serves)
  augment (PIL+tv)          decode + RandomResizedCrop(224) + RandomHorizontalFlip() (torchvision)
  decoded->variant (PIL+tv) the same transform on already decoded images
  resize (PIL)              crop + resize((224, 224), BILINEAR) on already decoded images, over the
                            crop boxes `prepfs-xfbench --dump-boxes FILE` wrote (needs --boxes):
                            exactly the work of xfbench's "resize" cases
Timing as in xfbench: R rounds (default 3), each running every case for T/R CPU-seconds of this
thread, interleaved; printed are the CPU ms per item of each round and items/s per core from the
median round. --items N runs each case over exactly N items once instead, for
    valgrind --tool=callgrind --toggle-collect='ImagingResample*' /usr/bin/python3 pil_bench.py ...
which counts the instructions of PIL's resampler alone.
--verify compares the PPMs written by `prepfs-xfbench --dump-decoded DUMPDIR` with PIL's decode
of each listed source file, byte for byte.
"""
import argparse
import io
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from bench_deps import ensure_modules  # noqa: E402


def load(paths):
    files = []
    for p in paths:
        if os.path.isdir(p):
            for root, _, names in sorted(os.walk(p)):
                for n in sorted(names):
                    files.extend(load([os.path.join(root, n)]))
        else:
            with open(p, "rb") as f:
                b = f.read()
            if b[:3] == b"\xff\xd8\xff":
                files.append((p, b))
    return files


def verify(dump):
    from PIL import Image
    with open(os.path.join(dump, "list.txt")) as f:
        srcs = [line.rstrip("\n") for line in f]
    same = differ = 0
    for i, src in enumerate(srcs):
        with open(os.path.join(dump, f"{i}.ppm"), "rb") as f:
            ours = f.read()
        try:
            im = Image.open(src).convert("RGB")
            buf = io.BytesIO()
            im.save(buf, "PPM")
            ref = buf.getvalue()
        except OSError:
            ref = b""  # PIL fails: we must have written an empty file (decode error)
        if ours == ref:
            same += 1
        else:
            differ += 1
            if differ <= 10:
                print(f"DIFFERS: {src}", file=sys.stderr)
    print(f"decoded PPM vs PIL: {same} identical, {differ} different")
    return 1 if differ else 0


class Case:
    def __init__(self, name, items, work):
        self.name, self.items, self.work = name, items, work  # work(item)
        self.next = 0
        self.ms = []
        self.done = self.errors = 0

    def run(self, seconds, count=0):
        t0 = t = time.thread_time()
        n = 0
        while (n < count) if count else (t - t0 < seconds):
            try:
                self.work(self.items[self.next])
            except OSError:
                self.errors += 1
            self.next = (self.next + 1) % len(self.items)
            n += 1
            t = time.thread_time()
        return n, t - t0


def make_cases(files, boxes_file):
    from PIL import Image

    def decode(b):
        return Image.open(io.BytesIO(b)).convert("RGB")  # convert() loads the pixels

    def decode_ppm(b):
        decode(b).save(io.BytesIO(), "PPM")

    decoded = None
    tf = None

    def need_decoded():
        nonlocal decoded
        if decoded is None:
            decoded = {}
            for p, b in files:
                try:
                    decoded[p] = decode(b)
                except OSError:
                    pass
        return decoded

    def need_tf():
        nonlocal tf
        if tf is None:
            import torch
            import torchvision.transforms as T
            torch.set_num_threads(1)
            tf = T.Compose([T.RandomResizedCrop(224), T.RandomHorizontalFlip()])
        return tf

    blobs = [b for _, b in files]
    cases = {
        "decode": lambda: Case("decode", blobs, decode),
        "decode+ppm": lambda: Case("decode+ppm", blobs, decode_ppm),
        # need_tf() before timing: importing torch takes seconds.
        "augment (PIL+tv)": lambda: Case("augment (PIL+tv)", blobs, lambda b, t=need_tf(): t(decode(b))),
        "decoded->variant (PIL+tv)": lambda: Case("decoded->variant (PIL+tv)", list(need_decoded().values()),
                                                  lambda im, t=need_tf(): t(im)),
    }
    if boxes_file:
        items = []
        with open(boxes_file) as f:
            for line in f:
                path, left, top, w, h = line.rsplit(" ", 4)
                items.append((need_decoded()[path], (int(left), int(top), int(left) + int(w), int(top) + int(h))))
        cases["resize (PIL)"] = lambda: Case("resize (PIL)", items,
                                             lambda it: it[0].crop(it[1]).resize((224, 224), Image.BILINEAR))
    return cases


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=3)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--only")
    ap.add_argument("--boxes")
    ap.add_argument("--items", type=int, default=0)
    ap.add_argument("--verify")
    ap.add_argument("paths", nargs="*")
    a = ap.parse_args()
    # Before any file is read: PIL for every case, torch and torchvision for the (PIL+tv) ones.
    tv = not a.verify and (not a.only or "(PIL+tv)" in a.only)
    ensure_modules(["PIL"] + (["torch", "torchvision"] if tv else []), install="test",
                   why="the PIL baseline" + (" and its torchvision cases" if tv else ""))
    if a.verify:
        return verify(a.verify)
    from PIL import Image
    files = load(a.paths)
    if not files:
        print("no JPEG files found", file=sys.stderr)
        return 1
    makers = make_cases(files, a.boxes)
    names = a.only.split(",") if a.only else list(makers)
    unknown = [n for n in names if n not in makers]
    if unknown:
        print(f"unknown case(s) {unknown}; known: {list(makers)}", file=sys.stderr)
        return 2
    cases = [makers[n]() for n in names]
    if a.items:
        for c in cases:
            c.run(0, a.items)
            print(f"{c.name}: {a.items} items, {c.errors} errors")
        return 0
    total = sum(len(b) for _, b in files)
    print(f"files: {len(files)} JPEGs, {total / 1e6:.1f} MB; PIL {Image.__version__}; "
          f"{a.rounds} rounds of {a.seconds / a.rounds:.2f} CPU-s per case, 1 thread")
    for _ in range(a.rounds):
        for c in cases:
            n, t = c.run(a.seconds / a.rounds)
            c.done += n
            c.ms.append(t * 1e3 / n)
    print(f"{'case':<26} {'ms/item per round':<26} {'median':>9} {'items/s/core':>12} {'items':>8} {'errors':>7}")
    for c in cases:
        med = sorted(c.ms)[len(c.ms) // 2]
        rounds = " ".join(f"{ms:.3f}" for ms in c.ms)
        print(f"{c.name:<26} {rounds:<26} {med:9.3f} {1e3 / med:12.1f} {c.done:8d} {c.errors:7d}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
