"""Demo driver (scripts/demo.sh runs it): mounts a generated dataset and shows the cache at work."""
import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time


def mounted(path):
    with open("/proc/self/mountinfo") as f:
        return any(line.split()[4] == path for line in f)


def read_tree(root):
    files = nbytes = 0
    for dirpath, _, names in os.walk(root):
        for n in names:
            with open(os.path.join(dirpath, n), "rb") as f:
                nbytes += len(f.read())
            files += 1
    return files, nbytes


def drop_caches():
    os.sync()
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")


class Daemon:
    def __init__(self, prepfs, src, mnt, ssd_dir, opts, log):
        self.mnt = mnt
        self.proc = subprocess.Popen([prepfs, src, mnt, "-f", "-o", f"ssd_dir={ssd_dir},{opts}"],
                                     stdout=log, stderr=subprocess.STDOUT)
        deadline = time.time() + 30
        while not os.path.exists(os.path.join(mnt, ".prepfs", "stats")):
            if self.proc.poll() is not None or time.time() > deadline:
                sys.exit(f"prepfs did not mount (exit {self.proc.poll()}); see {log.name}")
            time.sleep(0.05)

    def stats(self):
        with open(os.path.join(self.mnt, ".prepfs", "stats")) as f:
            return json.load(f)

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=30)


def pass_line(label, files, nbytes, secs, before, after):
    d = lambda *k: after[k[0]][k[1]] - before[k[0]][k[1]]
    print(f"  {label:<34} {files:5d} files {nbytes / 1e6:7.1f} MB {secs:6.2f} s "
          f"{files / secs:8.0f} files/s | source {d('source', 'bytes') / 1e6:6.1f} MB, "
          f"RAM hits {d('ram', 'hits'):5d}, SSD hits {d('ssd', 'hits'):5d}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--classes", type=int, default=8)
    ap.add_argument("--per-class", type=int, default=25)
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    args = ap.parse_args()
    prepfs = os.path.abspath(os.path.join(args.build, "tools", "prepfs"))

    work = tempfile.mkdtemp(prefix="prepfs-demo-")
    src, mnt, ssd = (os.path.join(work, d) for d in ("dataset", "mnt", "cache"))
    os.makedirs(mnt)
    log = open(os.path.join(work, "prepfs.log"), "ab")
    try:
        print(f"== generating {args.classes}x{args.per_class} ImageNet-like JPEGs in {src}")
        subprocess.run([sys.executable, "bench/gen_dataset.py", src, "--classes", str(args.classes),
                        "--per-class", str(args.per_class)], check=True)

        # The raw passes pin the partition to raw in both tiers, with a RAM tier for about half the
        # files: each sample is kept in one tier, so both tiers show up. The image views below let
        # partition=auto choose.
        raw_opts = "ram=12M,ssd=1G,partition=fixed:100/0/0"
        print(f"== mounting {src} at {mnt} ({raw_opts}, ssd_dir {ssd}: raw only, about half the files per tier)")
        d = Daemon(prepfs, src, mnt, ssd, raw_opts, log)
        print("   top level:", sorted(os.listdir(mnt)))
        for label, drop in (("raw/ pass 1 (cold: from the source)", False),
                            ("raw/ pass 2 (warm: RAM + SSD tiers)", True)):
            if drop:
                drop_caches()  # so the reads reach prepfs instead of the kernel's page cache
            before, t0 = d.stats(), time.time()
            files, nbytes = read_tree(os.path.join(mnt, "raw"))
            pass_line(label, files, nbytes, time.time() - t0, before, d.stats())
        d.stop()
        print(f"== restarting with the same cache directory (the RAM tier starts empty)")
        drop_caches()
        d = Daemon(prepfs, src, mnt, ssd, raw_opts, log)
        before, t0 = d.stats(), time.time()
        files, nbytes = read_tree(os.path.join(mnt, "raw"))
        pass_line("raw/ pass 3 (SSD half kept)", files, nbytes, time.time() - t0, before, d.stats())
        s = d.stats()
        print(f"== cache: RAM {s['ram']['entries']} entries {s['ram']['bytes'] / 1e6:.1f} MB, "
              f"SSD {s['ssd']['entries']} entries {s['ssd']['bytes'] / 1e6:.1f} MB, "
              f"index {s['index']['entries']} entries in {s['index']['memory_bytes']} bytes")
        d.stop()
        print("== remounting with ram=64M, partition=auto (the default) for the image views")
        d = Daemon(prepfs, src, mnt, ssd, "ram=64M,ssd=1G", log)
        for view, label in (("decoded", "decoded/ (PIL-exact PPM)"), ("augmented", "augmented/ (rrc 224 + flip)")):
            before, t0 = d.stats(), time.time()
            files, nbytes = read_tree(os.path.join(mnt, view))
            secs = time.time() - t0
            t = d.stats()["transform"]
            print(f"  {label:<34} {files:5d} files {nbytes / 1e6:7.1f} MB {secs:6.2f} s "
                  f"{files / secs:8.0f} files/s | rendered {t['decoded'] - before['transform']['decoded']} decoded, "
                  f"{t['augmented'] - before['transform']['augmented']} augmented "
                  f"({t['augmented_from_decoded'] - before['transform']['augmented_from_decoded']} from cached pixels)")
        one = next(os.path.join(dp, n) for dp, _, ns in os.walk(os.path.join(mnt, "augmented")) for n in ns)
        variants = {open(one, "rb").read() for _ in range(3)}
        print(f"   three opens of {os.path.relpath(one, mnt)} gave {len(variants)} different variants")
        time.sleep(2.5)  # two profiler ticks, so the plan below stands on measurements
        with open(os.path.join(mnt, ".prepfs", "plan.json")) as f:
            plan = json.load(f)
        placed = ", ".join(f"{form} {n['ram']:.0f} RAM/{n['ssd']:.0f} SSD" for form, n in plan["placement"].items())
        rate = lambda v: "unlimited" if v is None else f"{v:.0f}"  # JSON null: nothing constrains it
        print(f"== partition=auto: {plan['plans']} plan(s), view {plan['inputs']['view']}/: {placed}; "
              f"predicted {rate(plan['predicted'])} samples/s, bound by {plan['binding']} "
              f"(no cache {rate(plan['alternatives']['no cache'])}/s); 'prepctl {mnt} plan' explains it")
        d.stop()
        print(f"== unmounted cleanly: {not mounted(mnt)}")
        print(f"   full stats JSON is at {mnt}/.prepfs/stats while mounted; the log is {log.name}")
    finally:
        for p in (os.path.join(mnt, ".prepfs"), mnt):
            if mounted(p):
                subprocess.run(["umount", "-l", p])
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
