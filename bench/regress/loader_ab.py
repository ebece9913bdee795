#!/usr/bin/python3
"""A DataLoader over raw/ and decoded/ through two prepfs binaries, side by side in one run (A/B).

    /usr/bin/python3 bench/regress/loader_ab.py OLD_PREPFS NEW_PREPFS [ROUNDS]   (as root)

Each round mounts A then B in odd rounds, B then A in even ones (alternating, so other load on
the machine and any drift within a round hit both alike) over one generated ImageNet-like dataset; on each mount it warms both views once, then times one epoch of
torchvision's ImageFolder + RandomResizedCrop/flip/ToTensor with 2 workers over raw/ and over
decoded/. Prints img/s per round and the medians.
"""
import json, os, statistics, subprocess, sys, time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
from bench_deps import ensure_modules  # noqa: E402

ensure_modules(["torch", "torchvision", "PIL"], install="test", why="the DataLoader")
import torch  # noqa: E402
from torchvision import datasets, transforms  # noqa: E402

WORK = os.environ.get("WORK", "/tmp/prepfs-loader-ab")


def epoch(root):
    tf = transforms.Compose([transforms.RandomResizedCrop(224), transforms.RandomHorizontalFlip(), transforms.ToTensor()])
    ds = datasets.ImageFolder(root, transform=tf)
    loader = torch.utils.data.DataLoader(ds, batch_size=64, shuffle=True, num_workers=2)
    t0 = time.time()
    n = sum(x.shape[0] for x, _ in loader)
    return n / (time.time() - t0)


def run(binary, name):
    mnt, ssd = f"{WORK}/mnt-{name}", f"{WORK}/ssd-{name}"
    os.makedirs(mnt, exist_ok=True)
    subprocess.run(["rm", "-rf", ssd])
    p = subprocess.Popen([binary, f"{WORK}/src", mnt, "-f", "-o", f"ram=4G,ssd=0,ssd_dir={ssd},log_level=warn,cpu=2"])
    for _ in range(200):
        if os.path.exists(f"{mnt}/.prepfs/stats"):
            break
        time.sleep(0.1)
    try:
        out = {}
        for view in ("raw", "decoded"):
            epoch(f"{mnt}/{view}/train")  # warm: the cache holds the view's bytes
            out[view] = epoch(f"{mnt}/{view}/train")
        return out
    finally:
        p.terminate()
        p.wait()
        subprocess.run(["umount", "-R", mnt], stderr=subprocess.DEVNULL)


def main():
    a, b = sys.argv[1], sys.argv[2]
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 3
    if not os.path.isdir(f"{WORK}/src"):
        subprocess.run(["/usr/bin/python3", f"{HERE}/../gen_dataset.py", f"{WORK}/src", "--classes", "4",
                        "--per-class", "100", "--synthetic"], check=True, stdout=subprocess.DEVNULL)
    rows = []
    for r in range(rounds):
        pair = (("A", a), ("B", b))
        for name, binary in (pair if r % 2 == 0 else pair[::-1]):
            res = run(binary, name)
            rows.append((name, res))
            print(json.dumps({"round": r, "binary": name, **{k: round(v, 1) for k, v in res.items()}}), flush=True)
    for name in ("A", "B"):
        for view in ("raw", "decoded"):
            vals = [res[view] for n, res in rows if n == name]
            print(f"{name} {view}: median {statistics.median(vals):.0f} img/s (runs {', '.join(f'{v:.0f}' for v in vals)})")


if __name__ == "__main__":
    main()
