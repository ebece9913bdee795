"""Shared pieces of the sampling benches: mounts, the readers' memory cgroup, datasets, CPU accounting.

Everything runs as root with /dev/fuse. Binaries come from a build directory (default: build) and are
copied to the work directory first, so a rebuild during a run does not mix builds.
"""
import datetime
import json
import os
import platform
import random
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH = os.path.dirname(HERE)
REPO = os.path.dirname(BENCH)
sys.path.insert(0, BENCH)
import mounts  # noqa: E402  (bench/mounts.py: the daemons and mounts every Python driver shares)
from proc_cpu import cpu_seconds  # noqa: E402
PYTHON = "/usr/bin/python3"  # Debian's: the one python3-torch and the installed prepfs package belong to
PREPCTL = os.path.join(REPO, "tools", "prepctl")
TICKS = os.sysconf("SC_CLK_TCK")


def log(msg):
    print(f"[sampling {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------------------------
# Tools, machine, results
# --------------------------------------------------------------------------------------------

class Tools:
    """prepfs, prepfs-slowfs and prepfs-readbench, copied out of BUILD into WORK/bin."""

    def __init__(self, build, work):
        os.makedirs(os.path.join(work, "bin"), exist_ok=True)
        self.commit = git_commit()
        for name, rel in (("prepfs", "tools/prepfs"), ("slowfs", "bench/prepfs-slowfs"),
                          ("readbench", "bench/prepfs-readbench")):
            src = os.path.join(build, rel)
            if not os.path.exists(src):
                sys.exit(f"{src} is missing: build first (meson setup build && ninja -C build)")
            dst = os.path.join(work, "bin", os.path.basename(rel))
            shutil.copy2(src, dst + ".new")
            os.replace(dst + ".new", dst)
            setattr(self, name, dst)


def git_commit():
    r = subprocess.run(["git", "-C", REPO, "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    dirty = subprocess.run(["git", "-C", REPO, "status", "--porcelain", "--untracked-files=no"],
                           capture_output=True, text=True).stdout.strip()
    return r.stdout.strip() + ("+dirty" if dirty else "")


def machine():
    with open("/proc/meminfo") as f:
        mem = int(f.readline().split()[1]) / 2 ** 20
    cpu = "?"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    return f"{os.cpu_count()} CPUs ({cpu}), {mem:.0f} GiB RAM, kernel {platform.release()}"


def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def header(argv):
    """What every result file records about how and where it was made."""
    return {"command": " ".join(["/usr/bin/python3"] + [os.path.relpath(argv[0], REPO)] + argv[1:]),
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "machine": machine(), "commit": git_commit(), "load_start": loadavg()}


def save(path, data):
    data["load_end"] = loadavg()
    with open(path + ".tmp", "w") as f:
        json.dump(data, f, indent=1)
    os.replace(path + ".tmp", path)
    log(f"wrote {os.path.relpath(path, REPO)}")


def proc_cpu(pid):
    """User + system CPU seconds of a live process and its reaped children."""
    return cpu_seconds(pid, children=True, default=0.0)


def children_cpu():
    ru = __import__("resource").getrusage(__import__("resource").RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


# --------------------------------------------------------------------------------------------
# Mounts
# --------------------------------------------------------------------------------------------

class Prepfs(mounts.Daemon):
    """A prepfs daemon in the foreground; `with Prepfs(...) as fs:` mounts, stats, stops."""

    def __init__(self, tools, source, mnt, options, work):
        os.makedirs(mnt, exist_ok=True)
        ssd_dir = mnt + "-cache"
        shutil.rmtree(ssd_dir, ignore_errors=True)
        os.makedirs(ssd_dir, mode=0o700)
        self.options = f"ssd_dir={ssd_dir},log_level=warn," + options
        self.logpath = mnt + ".log"
        self.log = open(self.logpath, "ab")
        try:
            super().__init__([tools.prepfs, source, mnt, "-f", "-o", self.options], mnt,
                             lambda: os.path.exists(self.ctl("stats")), "prepfs", self.log, timeout=60)
        except RuntimeError as e:
            raise RuntimeError(f"{e}; see {self.logpath}") from None

    def ctl(self, name):
        return os.path.join(self.mnt, ".prepfs", name)

    def stats(self):
        with open(self.ctl("stats")) as f:
            return json.load(f)

    def cpu(self):
        return proc_cpu(self.proc.pid)

    def publish(self, job, paths, reset=True, opportunistic=False, end=False):
        """Write mount-relative paths to .prepfs/order as job `job` (what PrepfsSampler's client does)."""
        head = f"job {job}" + (" opportunistic" if opportunistic else "") + "\n" + ("reset\n" if reset else "")
        lines = [head] + [p + "\n" for p in paths] + (["end\n"] if end else [])
        fd = os.open(self.ctl("order"), os.O_WRONLY | os.O_APPEND)
        try:
            chunk = []
            size = 0
            for line in lines:  # whole lines, at most 64 KiB per write() (docs/SAMPLER.md)
                b = line.encode()
                if size + len(b) > 65536:
                    os.write(fd, b"".join(chunk))
                    chunk, size = [], 0
                chunk.append(b)
                size += len(b)
            if chunk:
                os.write(fd, b"".join(chunk))
        finally:
            os.close(fd)

    def samples(self):
        """The daemon's sample table: [(raw path, image path)] by sample index."""
        with open(self.ctl("samples")) as f:
            return [tuple(l.split("\t")) for l in f.read().splitlines()]

    def stop(self):
        super().stop(timeout=30)
        self.log.close()
        shutil.rmtree(self.mnt + "-cache", ignore_errors=True)


class SlowFs(mounts.SlowFs):
    """bench/slowfs.cc over a directory: a remote-like source whose counters say what it served."""

    def __init__(self, tools, source, mnt, args):
        os.makedirs(mnt, exist_ok=True)
        super().__init__(tools.slowfs, source, mnt, args)

    def cpu(self):
        return proc_cpu(self.proc.pid)


# --------------------------------------------------------------------------------------------
# The readers' memory cgroup: the kernel's page cache is a cache too
# --------------------------------------------------------------------------------------------

class ReaderCgroup:
    """A memory cgroup for the readers, nested in this process's own, with a hard limit.

    Page-cache pages are charged to the cgroup of the process that reads them in, so the limit
    bounds what the kernel keeps of the mount for these readers (their own anonymous memory counts
    against it too). drop() empties the cgroup's page cache (between epochs) without touching the
    rest of the machine, which a global drop_caches would. cgroup v2 (memory.max, memory.reclaim)
    when the memory controller is there, else v1 (memory.limit_in_bytes, memory.force_empty).
    """

    def __init__(self, name, limit_bytes):
        self.v2 = self._v2_base()
        base = self.v2 or self._v1_base()
        self.path = os.path.join(base, f"{name}-{os.getpid()}")
        if os.path.isdir(self.path):
            self._remove()
        os.mkdir(self.path)
        self.limit = int(limit_bytes)
        self._write("memory.max" if self.v2 else "memory.limit_in_bytes", str(self.limit))
        self.peak_cache = 0

    @staticmethod
    def _own(controller_line):
        with open("/proc/self/cgroup") as f:
            for line in f:
                hid, ctrls, path = line.rstrip("\n").split(":", 2)
                if controller_line(hid, ctrls):
                    return path
        return None

    def _v2_base(self):
        rel = self._own(lambda hid, ctrls: hid == "0")
        for root in ("/sys/fs/cgroup", "/sys/fs/cgroup/unified"):
            ctrl = os.path.join(root, "cgroup.controllers")
            if rel is not None and os.path.exists(ctrl) and "memory" in open(ctrl).read().split():
                own = os.path.join(root, rel.lstrip("/"))
                # A v2 cgroup with processes cannot enable controllers for children; use its parent then.
                with open(os.path.join(own, "cgroup.procs")) as f:
                    busy = bool(f.read().strip())
                base = os.path.dirname(own) if busy else own
                with open(os.path.join(base, "cgroup.subtree_control"), "w") as f:
                    f.write("+memory")
                return base
        return None

    def _v1_base(self):
        rel = self._own(lambda hid, ctrls: "memory" in ctrls.split(","))
        if rel is None:
            raise RuntimeError("no memory cgroup controller (v1 or v2) on this machine")
        return os.path.join("/sys/fs/cgroup/memory", rel.lstrip("/"))

    def _write(self, name, value):
        with open(os.path.join(self.path, name), "w") as f:
            f.write(value)

    def enter(self):
        """Move the calling process into the cgroup (a preexec_fn for the readers)."""
        self._write("cgroup.procs", str(os.getpid()))

    def stat(self):
        """Bytes of page cache (file pages on the cgroup's LRU lists; not shmem) and anonymous memory."""
        with open(os.path.join(self.path, "memory.stat")) as f:
            d = {k: int(v) for k, v in (line.split() for line in f)}
        return {"page_cache": d["active_file"] + d["inactive_file"], "anon": d.get("anon", d.get("rss", 0))}

    def sample(self):
        """Records the largest page cache seen; call it now and then while the readers run."""
        c = self.stat()["page_cache"]
        self.peak_cache = max(self.peak_cache, c)
        return c

    def drop(self):
        """Empty the cgroup's page cache (no process may be inside for v1's force_empty)."""
        try:
            if self.v2:
                self._write("memory.reclaim", str(1 << 40))
            else:
                self._write("memory.force_empty", "0")
        except OSError:
            pass  # v2 reports EAGAIN when it reclaimed less than asked, i.e. everything

    def oom_kills(self):
        if self.v2:
            with open(os.path.join(self.path, "memory.events")) as f:
                return int(dict(l.split() for l in f).get("oom_kill", 0))
        with open(os.path.join(self.path, "memory.oom_control")) as f:
            return int(dict(l.split() for l in f).get("oom_kill", 0))

    def _remove(self):
        try:
            self.drop()
        except Exception:
            pass
        for _ in range(50):
            try:
                os.rmdir(self.path)
                return
            except OSError:
                time.sleep(0.1)

    def close(self):
        self._remove()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def describe(self):
        kind = "cgroup v2 memory.max" if self.v2 else "cgroup v1 memory.limit_in_bytes"
        return f"{kind} = {self.limit / 2 ** 20:.0f} MiB"


# --------------------------------------------------------------------------------------------
# Datasets
# --------------------------------------------------------------------------------------------

def ensure_jpegs(work, classes, per_class, seed=0):
    """ImageNet-like JPEGs (bench/gen_dataset.py --synthetic), generated once and kept in WORK."""
    root = os.path.join(work, f"jpeg-{classes}x{per_class}-s{seed}")
    if not os.path.exists(root + ".done"):
        shutil.rmtree(root, ignore_errors=True)
        log(f"generating {classes}x{per_class} JPEGs in {root}")
        subprocess.run([PYTHON, os.path.join(BENCH, "gen_dataset.py"), root, "--classes", str(classes),
                        "--per-class", str(per_class), "--seed", str(seed), "--synthetic",
                        "--jobs", str(os.cpu_count())], check=True, stdout=subprocess.DEVNULL)
        open(root + ".done", "w").close()
    return root


def ensure_blobs(work, like):
    """Files of the same names' sizes as `like`, of random bytes, named .bin: not images, so no
    placement fixes their membership and every eviction policy chooses its own members."""
    root = like.rstrip("/") + "-blobs"
    if not os.path.exists(root + ".done"):
        shutil.rmtree(root, ignore_errors=True)
        rng = random.Random(5)
        for rel in files_of(like):
            dst = os.path.join(root, os.path.splitext(rel)[0] + ".bin")
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            with open(dst, "wb") as f:
                f.write(rng.randbytes(os.path.getsize(os.path.join(like, rel))))
        open(root + ".done", "w").close()
    return root


def files_of(root):
    """Regular files under root/train, relative to root, sorted (the dataset's file list)."""
    out = []
    for dirpath, _, names in os.walk(os.path.join(root, "train")):
        out += [os.path.relpath(os.path.join(dirpath, n), root) for n in names]
    return sorted(out)


def shuffled_epochs(files, epochs, seed):
    rng = random.Random(seed)
    out = []
    for _ in range(epochs):
        perm = files[:]
        rng.shuffle(perm)
        out.append(perm)
    return out


def median(xs):
    xs = sorted(xs)
    n = len(xs)
    return (xs[n // 2] if n % 2 else (xs[n // 2 - 1] + xs[n // 2]) / 2) if n else float("nan")
