#!/usr/bin/python3
"""S3 read benchmark: prepfs vs s3fs vs rclone mount, side by side against one s3rver on loopback.

    bench/s3/run_s3_bench.py [--build BUILD_DIR] [--files N] [--readers 8,32] [--warm-passes 2] [--rounds 3]

In each of ROUNDS rounds, for each reader count, every system is measured in turn, the order of the
systems rotated by one each round (prepfs s3fs rclone; s3fs rclone prepfs; rclone prepfs s3fs), so
that load from other work falls on all alike. A measurement is a fresh mount with an empty cache
that reads every file once (cold epoch), then WARM_PASSES more epochs (warm); the kernel page cache
is dropped before every epoch, so warm numbers measure each daemon's own cache. Whole-file reads by
prepfs-readbench (open, read to EOF, close; shuffled order). s3fs (-o use_cache, run with -f so that
its pid is known) and rclone (--vfs-cache-mode full) are given their local caches so their warm
epochs are warm too. Over every epoch the CPU seconds of the FUSE daemon, of s3rver (node) and of
prepfs-readbench are recorded (/proc/PID/stat), reported per file. Ratios prepfs / peer are taken
within a round (the two ran minutes apart at most) and given as the median over the rounds.

s3fs and rclone are checked before anything starts: when one is missing, scripts/install-deps.sh
bench installs it if run as root; otherwise the bench stops with a message. A peer that still fails
to mount is reported as such. Results: bench/s3/results.md (table + the command + raw JSON). Needs
root, /dev/fuse, node/npm (s3rver is installed with npm by tests/integration/s3rver_harness.py).
"""
import argparse
import json
import os
import platform
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "tests", "integration"))
sys.path.insert(0, os.path.dirname(HERE))
from proc_cpu import cpu_seconds  # noqa: E402

PEER_COMMANDS = {"s3fs": "s3fs", "rclone": "rclone"}


def ensure_tools(systems, build):
    """Before anything starts: the peers' commands, node and npm (s3rver), prepfs-readbench and
    prepfs. Installs missing packages with scripts/install-deps.sh bench when root, else stops."""
    def missing():
        cmds = [PEER_COMMANDS[s] for s in systems if s in PEER_COMMANDS] + ["node", "npm"]
        return [c for c in cmds if not shutil.which(c)]
    script = os.path.join(REPO, "scripts", "install-deps.sh")
    if missing():
        if os.geteuid() != 0:
            sys.exit(f"run_s3_bench.py: cannot start: {', '.join(missing())} not installed; run "
                     f"`{script} bench` as root (or this bench as root), or leave them out with --systems")
        print(f"run_s3_bench.py: installing what provides {', '.join(missing())} ({script} bench)", flush=True)
        subprocess.run([script, "bench"], check=True, stdin=subprocess.DEVNULL)
        if missing():
            sys.exit(f"run_s3_bench.py: cannot start: {', '.join(missing())} still missing after {script} bench")
    for path, how in ((os.path.join(build, "bench", "prepfs-readbench"), "ninja -C BUILD bench/prepfs-readbench"),
                      (os.path.join(build, "tools", "prepfs"), "ninja -C BUILD tools/prepfs")):
        if "prepfs" not in systems and path.endswith("tools/prepfs"):
            continue
        if not os.access(path, os.X_OK):
            sys.exit(f"run_s3_bench.py: cannot start: {path} not found ({how})")


def rotated(items, k):
    k %= len(items)
    return items[k:] + items[:k]


def median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(REPO, "build"))
    ap.add_argument("--files", type=int, default=2000)
    ap.add_argument("--readers", default="8,32")
    ap.add_argument("--warm-passes", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3, help="rounds of every system, order rotated (at least 3)")
    ap.add_argument("--systems", default="prepfs,s3fs,rclone")
    ap.add_argument("--out", default=os.path.join(HERE, "results.md"))
    args = ap.parse_args()
    if args.rounds < 1 or args.warm_passes < 1:
        sys.exit("run_s3_bench.py: --rounds and --warm-passes must be at least 1")
    systems = args.systems.split(",")
    build = os.path.abspath(args.build)
    ensure_tools(systems, build)
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
    load_start = open("/proc/loadavg").read().split()[:3]

    def children_cpu():
        ru = resource.getrusage(resource.RUSAGE_CHILDREN)
        return ru.ru_utime + ru.ru_stime

    def bench(path, threads, daemon_pid):
        """One epoch: readbench's total, plus the CPU seconds over it of the daemon, s3rver and
        readbench (this process's reaped children: nothing else is reaped meanwhile)."""
        d0, s0, r0 = cpu_seconds(daemon_pid, default=None), cpu_seconds(srv.proc.pid, default=None), children_cpu()
        out = subprocess.run([readbench, path, "--threads", str(threads), "--passes", "1", "--json"],
                             capture_output=True, text=True, timeout=1800)
        r1, s1, d1 = children_cpu(), cpu_seconds(srv.proc.pid, default=None), cpu_seconds(daemon_pid, default=None)
        if out.returncode != 0:
            raise RuntimeError(out.stderr.strip()[-300:])
        total = json.loads(out.stdout)["total"]
        total["cpu_s"] = {"daemon": d1 - d0 if d0 is not None and d1 is not None else None,
                          "s3rver": s1 - s0 if s0 is not None and s1 is not None else None,
                          "reader": r1 - r0}
        return total

    def epochs(path, threads, daemon_pid):
        drop_page_cache()
        cold = bench(path, threads, daemon_pid)
        warm = []
        for _ in range(args.warm_passes):
            drop_page_cache()
            warm.append(bench(path, threads, daemon_pid))
        return cold, warm

    def mount_prepfs(mnt, cache):
        m = Prepfs("s3://bench/ds", mnt, cache, f"s3_endpoint={srv.endpoint},s3_path_style=1,ram=4G,log_level=warn")
        return m.raw(), m.stop, m.proc.pid

    def mount_s3fs(mnt, cache):
        pw = os.path.join(work, "s3fs.passwd")
        with open(pw, "w") as f:
            f.write(f"{ACCESS_KEY}:{SECRET_KEY}\n")
        os.chmod(pw, 0o600)
        os.makedirs(cache, exist_ok=True)
        log = open(os.path.join(work, "s3fs.log"), "ab")
        # -f: in the foreground, as a child whose pid (and so CPU) is known
        p = subprocess.Popen(["s3fs", "bench:/ds", mnt, "-f", "-o", f"url={srv.endpoint},use_path_request_style,"
                              f"passwd_file={pw},use_cache={cache},allow_other,parallel_count=32,max_stat_cache_size=100000"],
                             stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        try:
            wait_for(lambda: p.poll() is not None or is_mounted(mnt), timeout=60, what="s3fs mount")
        except TimeoutError:
            p.kill()
            p.wait()
            raise
        if p.poll() is not None:
            raise RuntimeError(f"s3fs exited with {p.returncode}; see {log.name}")

        def stop():
            force_unmount(mnt)
            p.terminate()
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        return mnt, stop, p.pid

    def mount_rclone(mnt, cache):
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
            p.wait()
            raise
        if p.poll() is not None:
            raise RuntimeError(f"rclone mount exited with {p.returncode}; see {log.name}")

        def stop():
            force_unmount(mnt)
            p.terminate()
            p.wait(timeout=30)
        return mnt, stop, p.pid

    mounters = {"prepfs": mount_prepfs, "s3fs": mount_s3fs, "rclone": mount_rclone}
    rows = []
    try:
        for rnd in range(1, args.rounds + 1):
            for threads in map(int, args.readers.split(",")):
                for system in rotated(systems, rnd - 1):
                    d = tempfile.mkdtemp(prefix=f"{system}-{threads}-r{rnd}-", dir=work)
                    mnt, cache = os.path.join(d, "mnt"), os.path.join(d, "cache")
                    os.makedirs(mnt)
                    row = {"round": rnd, "system": system, "readers": threads}
                    try:
                        path, stop, pid = mounters[system](mnt, cache)
                    except Exception as e:  # noqa: BLE001 - a peer that does not mount is a row, not a crash
                        rows.append(dict(row, note=str(e)))
                        print(f"round {rnd} {system} {threads}: {e}", flush=True)
                        shutil.rmtree(d, ignore_errors=True)
                        continue
                    try:
                        cold, warm = epochs(path, threads, pid)
                        rows.append(dict(row, cold=cold, warm=warm))
                        w = summarize(warm)
                        print(f"round {rnd} {system} {threads}: cold {cold['files_per_s']:.0f} files/s "
                              f"{cold['mb_per_s']:.0f} MB/s, warm {w['files_per_s']:.0f} files/s "
                              f"{w['mb_per_s']:.0f} MB/s", flush=True)
                    except Exception as e:  # noqa: BLE001
                        rows.append(dict(row, note=f"failed: {e}"))
                        print(f"round {rnd} {system} {threads}: failed: {e}", flush=True)
                    finally:
                        stop()
                        shutil.rmtree(d, ignore_errors=True)  # the caches: a few hundred MB each
    finally:
        srv.close()
        shutil.rmtree(work, ignore_errors=True)

    cmd = "bench/s3/run_s3_bench.py " + " ".join(sys.argv[1:])
    load = f"{' '.join(load_start)} at the start, {' '.join(open('/proc/loadavg').read().split()[:3])} at the end"
    with open(args.out, "w") as f:
        f.write(report(rows, cmd, len(objs), total_mb, args, systems, load))
    print("wrote", args.out)


def summarize(epochs):
    """files/s and MB/s over epochs (total files / total seconds), errors, and CPU microseconds per
    file of the daemon, s3rver and the reader (None where not recorded)."""
    files = sum(e["files"] for e in epochs)
    secs = sum(e["seconds"] for e in epochs)
    out = {"files_per_s": files / secs if secs else 0.0, "mb_per_s": sum(e["bytes"] for e in epochs) / 1e6 / secs if secs else 0.0,
           "errors": sum(e["errors"] for e in epochs)}
    for k in ("daemon", "s3rver", "reader"):
        vals = [(e.get("cpu_s") or {}).get(k) for e in epochs]
        out[f"{k}_cpu_us_per_file"] = None if None in vals or not files else sum(vals) * 1e6 / files
    return out


def report(rows, cmd, n_objs, total_mb, args, systems, load):
    def spread(xs, fmt="{:.0f}"):
        xs = [x for x in xs if x is not None]
        if not xs:
            return "-"
        m = fmt.format(median(xs))
        return m if len(xs) == 1 else f"{m} ({', '.join(fmt.format(x) for x in xs)})"

    lines = ["# S3 read benchmark", "", f"Command: `{cmd}`  ", f"Date: {time.strftime('%Y-%m-%d %H:%M')}, "
             f"{platform.node()}, {os.cpu_count()} cores, kernel {platform.release()}; load average {load}  ",
             f"Dataset: {n_objs} objects, {total_mb:.0f} MB (80-140 KB each), s3rver on 127.0.0.1. "
             f"{args.rounds} rounds; in each, every system in turn, the order rotated by one each round; a fresh "
             "mount with an empty cache per measurement. Page cache dropped before every epoch; warm = "
             f"the {args.warm_passes} epochs after the cold one together. Values: median over the rounds, each "
             "round's in brackets. CPU us/file: the CPU time over the epochs (/proc/PID/stat, all threads) of "
             "the FUSE daemon, of s3rver (node) and of prepfs-readbench, over the files read.", "",
             "| system | readers | cold files/s | cold MB/s | warm files/s | warm MB/s | daemon CPU us/file cold / warm | "
             "s3rver CPU us/file cold / warm | reader CPU us/file cold / warm | note |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    readers = list(map(int, args.readers.split(",")))
    for system in systems:
        for threads in readers:
            rs = [r for r in rows if r["system"] == system and r["readers"] == threads]
            ok = [r for r in rs if "cold" in r]
            notes = sorted({r["note"] for r in rs if "note" in r})
            errs = sum(r["cold"]["errors"] + summarize(r["warm"])["errors"] for r in ok)
            if errs:
                notes.append(f"{errs} errors")
            cold = [summarize([r["cold"]]) for r in ok]
            warm = [summarize(r["warm"]) for r in ok]
            cells = [system, str(threads), spread([c["files_per_s"] for c in cold]),
                     spread([c["mb_per_s"] for c in cold], "{:.1f}"), spread([w["files_per_s"] for w in warm]),
                     spread([w["mb_per_s"] for w in warm], "{:.1f}")]
            for k in ("daemon", "s3rver", "reader"):
                cells.append(f"{spread([c[f'{k}_cpu_us_per_file'] for c in cold])} / "
                             f"{spread([w[f'{k}_cpu_us_per_file'] for w in warm])}")
            cells.append("; ".join(notes))
            lines.append("| " + " | ".join(cells) + " |")
    ratios = []
    for threads in readers:
        for peer in ("s3fs", "rclone"):
            cold_r, warm_r = [], []
            for rnd in range(1, args.rounds + 1):
                p = next((r for r in rows if (r["system"], r["readers"], r["round"]) == ("prepfs", threads, rnd) and "cold" in r), None)
                q = next((r for r in rows if (r["system"], r["readers"], r["round"]) == (peer, threads, rnd) and "cold" in r), None)
                if p and q:
                    cold_r.append(p["cold"]["files_per_s"] / q["cold"]["files_per_s"])
                    warm_r.append(summarize(p["warm"])["files_per_s"] / summarize(q["warm"])["files_per_s"])
            if cold_r:
                ratios.append(f"- {threads} readers, prepfs / {peer}, {len(cold_r)} round(s): cold "
                              f"{spread(cold_r, '{:.1f}')}x, warm {spread(warm_r, '{:.1f}')}x")
    if ratios:
        lines += ["", "Ratios (files/s, each round's prepfs over the same round's peer; median, rounds in brackets):", ""] + ratios
    lines += ["", "<details><summary>raw</summary>", "", "```json", json.dumps(rows, indent=1), "```", "</details>", ""]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
