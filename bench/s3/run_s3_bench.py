#!/usr/bin/python3
"""S3 read benchmark: prepfs vs s3fs vs rclone mount, side by side against one s3rver on loopback.

    bench/s3/run_s3_bench.py [--build BUILD_DIR] [--files N] [--readers 8,32] [--warm-passes 2]

For each system and reader count: a fresh mount with an empty cache reads every file once (cold
epoch), then WARM_PASSES more epochs (warm); the kernel page cache is dropped before every epoch,
so warm numbers measure each daemon's own cache. Whole-file reads by prepfs-readbench (open, read
to EOF, close; shuffled order). s3fs (-o use_cache) and rclone (--vfs-cache-mode full) are given
their local caches so their warm epochs are warm too. A peer that is not installed
(scripts/install-deps.sh bench) or fails to mount is reported as such. Results:
bench/s3/results.md (table + the command + raw JSON). Needs root, /dev/fuse, node/npm.
"""
import argparse
import json
import os
import platform
import random
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "integration"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(HERE, "..", "..", "build"))
    ap.add_argument("--files", type=int, default=2000)
    ap.add_argument("--readers", default="8,32")
    ap.add_argument("--warm-passes", type=int, default=2)
    ap.add_argument("--systems", default="prepfs,s3fs,rclone")
    ap.add_argument("--out", default=os.path.join(HERE, "results.md"))
    args = ap.parse_args()
    build = os.path.abspath(args.build)
    os.environ["PREPFS_BIN"] = os.path.join(build, "tools", "prepfs")
    readbench = os.path.join(build, "bench", "prepfs-readbench")
    from prepfs_harness import Prepfs, drop_page_cache, force_unmount, is_mounted, wait_for  # noqa: E402
    from s3rver_harness import ACCESS_KEY, SECRET_KEY, S3rver  # noqa: E402

    work = tempfile.mkdtemp(prefix="prepfs-s3-bench-")
    srv = S3rver(os.path.join(work, "s3data"))
    srv.create_bucket("bench")
    rng = random.Random(1)
    t0 = time.time()
    objs = {f"ds/c{i % 20:02d}/img{i:06d}.jpg": rng.randbytes(rng.randint(80_000, 140_000)) for i in range(args.files)}
    srv.put_objects("bench", objs)
    total_mb = sum(map(len, objs.values())) / 1e6
    print(f"uploaded {len(objs)} objects, {total_mb:.0f} MB in {time.time() - t0:.1f}s", flush=True)
    env = dict(os.environ, AWS_ACCESS_KEY_ID=ACCESS_KEY, AWS_SECRET_ACCESS_KEY=SECRET_KEY)
    os.environ.update(AWS_ACCESS_KEY_ID=ACCESS_KEY, AWS_SECRET_ACCESS_KEY=SECRET_KEY)

    def bench(path, threads, passes):
        out = subprocess.run([readbench, path, "--threads", str(threads), "--passes", "1", "--json"],
                             capture_output=True, text=True, timeout=1800)
        if out.returncode != 0:
            raise RuntimeError(out.stderr.strip()[-300:])
        return json.loads(out.stdout)["total"]

    def epochs(path, threads):
        drop_page_cache()
        cold = bench(path, threads, 1)
        warm = []
        for _ in range(args.warm_passes):
            drop_page_cache()
            warm.append(bench(path, threads, 1))
        w = {k: sum(x[k] for x in warm) / len(warm) for k in ("files_per_s", "mb_per_s")}
        w["errors"] = sum(x["errors"] for x in warm)
        return cold, w

    def mount_prepfs(mnt, cache):
        m = Prepfs("s3://bench/ds", mnt, cache, f"s3_endpoint={srv.endpoint},s3_path_style=1,ram=4G,log_level=warn")
        return m.raw(), m.stop

    def mount_s3fs(mnt, cache):
        if not shutil.which("s3fs"):
            raise RuntimeError("s3fs not installed")
        pw = os.path.join(work, "s3fs.passwd")
        with open(pw, "w") as f:
            f.write(f"{ACCESS_KEY}:{SECRET_KEY}\n")
        os.chmod(pw, 0o600)
        os.makedirs(cache, exist_ok=True)
        res = subprocess.run(["s3fs", "bench:/ds", mnt, "-o", f"url={srv.endpoint},use_path_request_style,"
                              f"passwd_file={pw},use_cache={cache},allow_other,parallel_count=32,max_stat_cache_size=100000"],
                             capture_output=True, text=True, timeout=60)
        if res.returncode != 0:
            raise RuntimeError("s3fs failed: " + res.stderr.strip()[-300:])
        wait_for(lambda: is_mounted(mnt), what="s3fs mount")
        return mnt, lambda: force_unmount(mnt)

    def mount_rclone(mnt, cache):
        if not shutil.which("rclone"):
            raise RuntimeError("rclone not installed")
        renv = dict(env, RCLONE_CONFIG_S3R_TYPE="s3", RCLONE_CONFIG_S3R_PROVIDER="Other",
                    RCLONE_CONFIG_S3R_ENDPOINT=srv.endpoint, RCLONE_CONFIG_S3R_ACCESS_KEY_ID=ACCESS_KEY,
                    RCLONE_CONFIG_S3R_SECRET_ACCESS_KEY=SECRET_KEY, RCLONE_CONFIG_S3R_FORCE_PATH_STYLE="true")
        renv.pop("AWS_CA_BUNDLE", None)
        log = open(os.path.join(work, "rclone.log"), "ab")
        p = subprocess.Popen(["rclone", "mount", "s3r:bench/ds", mnt, "--vfs-cache-mode", "full", "--cache-dir", cache,
                              "--vfs-cache-max-size", "10G", "--dir-cache-time", "1h", "--allow-other"],
                             stdout=log, stderr=subprocess.STDOUT, env=renv)
        try:
            wait_for(lambda: p.poll() is not None or is_mounted(mnt), timeout=30, what="rclone mount")
        except TimeoutError:
            p.kill()
            raise
        if p.poll() is not None:
            raise RuntimeError(f"rclone mount exited with {p.returncode}; see {log.name}")

        def stop():
            force_unmount(mnt)
            p.terminate()
            p.wait(timeout=30)
        return mnt, stop

    mounters = {"prepfs": mount_prepfs, "s3fs": mount_s3fs, "rclone": mount_rclone}
    rows = []
    try:
        for system in args.systems.split(","):
            for threads in map(int, args.readers.split(",")):
                d = tempfile.mkdtemp(prefix=f"{system}-{threads}-", dir=work)
                mnt, cache = os.path.join(d, "mnt"), os.path.join(d, "cache")
                os.makedirs(mnt)
                try:
                    path, stop = mounters[system](mnt, cache)
                except Exception as e:  # noqa: BLE001 - a missing peer is a row, not a crash
                    rows.append({"system": system, "readers": threads, "note": str(e)})
                    print(f"{system} {threads}: {e}", flush=True)
                    continue
                try:
                    cold, warm = epochs(path, threads)
                    rows.append({"system": system, "readers": threads, "cold": cold, "warm": warm})
                    print(f"{system} {threads}: cold {cold['files_per_s']:.0f} files/s {cold['mb_per_s']:.0f} MB/s, "
                          f"warm {warm['files_per_s']:.0f} files/s {warm['mb_per_s']:.0f} MB/s", flush=True)
                except Exception as e:  # noqa: BLE001
                    rows.append({"system": system, "readers": threads, "note": f"failed: {e}"})
                    print(f"{system} {threads}: failed: {e}", flush=True)
                finally:
                    stop()
    finally:
        srv.close()
        shutil.rmtree(work, ignore_errors=True)

    cmd = "bench/s3/run_s3_bench.py " + " ".join(sys.argv[1:])
    lines = ["# S3 read benchmark", "", f"Command: `{cmd}`  ", f"Date: {time.strftime('%Y-%m-%d %H:%M')}, "
             f"{platform.node()}, {os.cpu_count()} cores, kernel {platform.release()}  ",
             f"Dataset: {len(objs)} objects, {total_mb:.0f} MB (80-140 KB each), s3rver 3.7.1 on 127.0.0.1. "
             "Page cache dropped before every epoch; warm = mean of "
             f"{args.warm_passes} epochs after the cold one.", "",
             "| system | readers | cold files/s | cold MB/s | warm files/s | warm MB/s | note |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        if "cold" in r:
            errs = r["cold"]["errors"] + r["warm"]["errors"]
            lines.append(f"| {r['system']} | {r['readers']} | {r['cold']['files_per_s']:.0f} | {r['cold']['mb_per_s']:.1f} | "
                         f"{r['warm']['files_per_s']:.0f} | {r['warm']['mb_per_s']:.1f} | {f'{errs} errors' if errs else ''} |")
        else:
            lines.append(f"| {r['system']} | {r['readers']} | | | | | {r['note']} |")
    ratios = []
    for threads in map(int, args.readers.split(",")):
        p = next((r for r in rows if r["system"] == "prepfs" and r["readers"] == threads and "cold" in r), None)
        for peer in ("s3fs", "rclone"):
            q = next((r for r in rows if r["system"] == peer and r["readers"] == threads and "cold" in r), None)
            if p and q:
                ratios.append(f"- {threads} readers, prepfs / {peer}: cold {p['cold']['files_per_s'] / q['cold']['files_per_s']:.1f}x, "
                              f"warm {p['warm']['files_per_s'] / q['warm']['files_per_s']:.1f}x")
    if ratios:
        lines += ["", "Ratios (files/s):", ""] + ratios
    lines += ["", "<details><summary>raw</summary>", "", "```json", json.dumps(rows, indent=1), "```", "</details>", ""]
    with open(args.out, "w") as f:
        f.write("\n".join(lines))
    print("wrote", args.out)


if __name__ == "__main__":
    main()
