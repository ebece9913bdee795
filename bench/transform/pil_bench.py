#!/usr/bin/python3
"""Per-core PIL (+ torchvision) baseline for prepfs-xfbench, on the same files.

    /usr/bin/python3 bench/transform/pil_bench.py [--seconds T] PATH...
    /usr/bin/python3 bench/transform/pil_bench.py --verify DUMPDIR

Modes (one thread: torch.set_num_threads(1); files read into memory first):
  decode         Image.open(f).convert('RGB')
  decode+ppm     the same, then PPM encoding (what the decoded/ view serves)
  augment        decode + RandomResizedCrop(224) + RandomHorizontalFlip() (torchvision, PIL path)
--verify compares the PPMs written by `prepfs-xfbench --dump-decoded DUMPDIR` with PIL's decode
of each listed source file, byte for byte.
"""
import argparse
import io
import os
import sys
import time


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


def measure(files, seconds, work):
    t0 = time.thread_time()
    n = errors = 0
    while time.thread_time() - t0 < seconds:
        for _, b in files:
            try:
                work(b)
            except OSError:
                errors += 1
            n += 1
    return n / (time.thread_time() - t0), n, errors


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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=5)
    ap.add_argument("--verify")
    ap.add_argument("paths", nargs="*")
    a = ap.parse_args()
    if a.verify:
        return verify(a.verify)
    import torch
    import torchvision.transforms as T
    from PIL import Image
    torch.set_num_threads(1)
    files = load(a.paths)
    if not files:
        print("no JPEG files found", file=sys.stderr)
        return 1
    total = sum(len(b) for _, b in files)
    print(f"files: {len(files)} JPEGs, {total / 1e6:.1f} MB; PIL {Image.__version__}, "
          f"torchvision {__import__('torchvision').__version__}; {a.seconds} s per mode, 1 thread")

    def decode(b):
        Image.open(io.BytesIO(b)).convert("RGB")  # convert() loads the pixels

    def decode_ppm(b):
        im = Image.open(io.BytesIO(b)).convert("RGB")
        out = io.BytesIO()
        im.save(out, "PPM")

    tf = T.Compose([T.RandomResizedCrop(224), T.RandomHorizontalFlip()])

    def augment(b):
        tf(Image.open(io.BytesIO(b)).convert("RGB")).tobytes()

    print(f"{'mode':<22} {'samples/s':>12} {'samples':>10} {'errors':>8}")
    for name, fn in (("decode", decode), ("decode+ppm", decode_ppm), ("augment (PIL+tv)", augment)):
        rate, n, err = measure(files, a.seconds, fn)
        print(f"{name:<22} {rate:12.1f} {n:10d} {err:8d}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
