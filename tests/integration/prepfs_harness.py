"""Test harness: start and stop real prepfs mounts and slowfs sources.

Everything here drives real processes and real mounts; nothing is mocked. Paths to the binaries
come from the environment (set by meson): PREPFS_BIN, SLOWFS_BIN.
"""
import contextlib
import hashlib
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

BENCH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench")
sys.path.insert(0, BENCH)
import mounts  # noqa: E402  (bench/mounts.py: the daemons and mounts every Python driver shares)
from mounts import force_unmount, is_mounted, wait_for  # noqa: E402,F401  (re-exported: bench/s3 uses them)

PREPFS_BIN = os.environ.get("PREPFS_BIN", "build/tools/prepfs")
SLOWFS_BIN = os.environ.get("SLOWFS_BIN", "build/bench/prepfs-slowfs")
GEN_DATASET = os.path.join(BENCH, "gen_dataset.py")


def gen_images(dest, classes, per_class):
    """Real JPEGs in ImageFolder layout (dest/train/<class>/*.JPEG), from bench/gen_dataset.py."""
    subprocess.run([sys.executable, GEN_DATASET, str(dest), "--classes", str(classes), "--per-class", str(per_class),
                    "--synthetic"], check=True, stdout=subprocess.DEVNULL)


def help_option_keys():
    """The -o keys `prepfs --help` lists (what the binary accepts), for the documentation tests."""
    out = subprocess.run([PREPFS_BIN, "--help"], capture_output=True, text=True, check=True).stdout
    section = out.split("Options for -o", 1)[1].split("Examples:", 1)[0]
    keys = re.findall(r"^\s{2}([a-z_0-9]+)", section, re.M)
    assert len(keys) >= 8, section
    return keys


def assert_one_clear_line(res, *words):
    """A failed command said exactly one line on stderr, naming each of words, and no crash."""
    assert res.returncode != 0
    lines = [l for l in res.stderr.splitlines() if l.strip()]
    assert len(lines) == 1, res.stderr
    for w in words:
        assert w in lines[0], lines[0]
    assert "terminate called" not in res.stderr and "what():" not in res.stderr


class Prepfs(mounts.Daemon):
    """A prepfs daemon in the foreground, as a child process; its log is SSD_DIR.log."""

    def __init__(self, source, mountpoint, ssd_dir, options="", extra_args=(), wrapper=()):
        """wrapper: a command prefix, such as nsenter into a network namespace."""
        self.source, self.ssd_dir = str(source), str(ssd_dir)
        opts = f"ssd_dir={self.ssd_dir},log_level=info" + ("," + options if options else "")
        self.args = [*wrapper, PREPFS_BIN, self.source, str(mountpoint), "-f", "-o", opts, *extra_args]
        self.log = open(os.path.join(self.ssd_dir + ".log"), "ab")
        try:
            super().__init__(self.args, mountpoint, lambda: os.path.exists(self.stats_path), "prepfs", self.log,
                             timeout=20)
        except RuntimeError as e:  # it exited: its last words say why
            raise RuntimeError(f"{e}: {self.log_text_after_close()}") from None

    @property
    def stats_path(self):
        return os.path.join(self.mnt, ".prepfs", "stats")

    def raw(self, rel=""):
        return os.path.join(self.mnt, "raw", rel)

    def stats(self):
        with open(self.stats_path) as f:
            return json.load(f)

    def wait_ticks(self, n=2, timeout=30.0):
        """Waits for n more profiler ticks: each tick's window holds what was served before it. A
        fixed sleep of about n ticks came up short when a loaded machine delayed them."""
        t0 = self.stats()["profile"]["ticks"]
        wait_for(lambda: self.stats()["profile"]["ticks"] >= t0 + n, timeout=timeout, what=f"{n} profiler ticks")

    def log_text(self):
        self.log.flush()
        with open(self.ssd_dir + ".log", "rb") as f:
            return f.read().decode(errors="replace")

    def stop(self, sig=signal.SIGTERM):
        returncode = super().stop(sig)
        self.log.close()
        return returncode

    def __enter__(self):
        return self

    def __exit__(self, exc_type, *exc):
        died = self.proc.poll() is not None
        self.stop()
        if exc_type is not None:
            # A failing test shows why: the daemon's last words (a sanitizer report, a crash, the
            # log line behind an EIO). pytest prints captured stderr with the failure.
            tail = self.log_text_after_close().splitlines()[-80:]
            state = f"exited with {self.proc.returncode}" if died else "was running"
            print(f"--- prepfs {state}; last lines of {self.ssd_dir}.log:", *tail, sep="\n", file=sys.stderr)

    def log_text_after_close(self):
        with open(self.ssd_dir + ".log", "rb") as f:
            return f.read().decode(errors="replace")


class SlowFs(mounts.SlowFs):
    """The slow-source simulator mounted over a directory; its counters prove what was fetched."""

    def __init__(self, source, mountpoint, *args):
        super().__init__(SLOWFS_BIN, source, mountpoint, args)

    @staticmethod
    def access_log(path):
        """The complete lines of an --access-log, split into fields. A line slowfs is writing at
        that moment may be read half-written (a write that straddles a page boundary shows its
        first page first), so a last line without its newline is left for the next look."""
        with open(path) as f:
            text = f.read()
        return [line.split(" ") for line in text.split("\n")[:-1]]


@contextlib.contextmanager
def world_reachable_mountpoint(prefix="prepfs-"):
    """An empty directory every user can reach. pytest's tmp_path is root-only (0700), so on a
    mountpoint under it another user's access fails at the path walk, whatever the mount allows."""
    d = tempfile.mkdtemp(prefix=prefix, dir="/tmp")  # not $TMPDIR: it may be private (libpam-tmpdir)
    try:
        os.chmod(d, 0o755)
        os.mkdir(os.path.join(d, "mnt"))
        yield os.path.join(d, "mnt")
    finally:
        shutil.rmtree(d, ignore_errors=True)


def make_dataset(root, files=120, seed=1):
    """A tree with nested and empty directories, empty files, symlinks, odd names and files
    that straddle the 1 MiB chunk size. Returns {relpath: sha256} of the regular files."""
    rng = random.Random(seed)
    os.makedirs(root, exist_ok=True)
    digests = {}
    dirs = ["", "a", "a/b", "a/b/c", "class 01", "ünïcode", "a/empty_dir_parent"]
    for d in dirs:
        os.makedirs(os.path.join(root, d), exist_ok=True)
    os.makedirs(os.path.join(root, "empty_dir"), exist_ok=True)
    os.makedirs(os.path.join(root, "a/empty_dir_parent/empty_child"), exist_ok=True)
    sizes = [0, 1, 4095, 4096, 4097, 131072, 1048575, 1048576, 1048577, 2 * 1048576 + 5, 3_300_000]
    for i in range(files):
        d = rng.choice(dirs[:6])
        size = sizes[i] if i < len(sizes) else rng.choice([rng.randint(1, 300_000), rng.randint(1, 20_000)])
        data = rng.randbytes(size)
        rel = os.path.join(d, f"file {i:03d}.bin" if i % 7 == 0 else f"f{i:03d}.jpg")
        with open(os.path.join(root, rel), "wb") as f:
            f.write(data)
        os.chmod(os.path.join(root, rel), 0o640 if i % 5 == 0 else 0o644)
        digests[rel] = hashlib.sha256(data).hexdigest()
    # A relative link to a real file (file 2 is never empty), from one level down.
    target = next(r for r in digests if os.path.basename(r) == "f002.jpg")
    os.symlink(os.path.join("..", target), os.path.join(root, "class 01/link_rel"))
    os.symlink("/etc/hostname", os.path.join(root, "a/link_abs"))
    os.symlink("dangling_target", os.path.join(root, "a/b/dangling"))
    return digests


def age_directories(root, seconds=3600):
    """Sets the mtime of root and every directory under it `seconds` back (with a sub-second part).
    A directory changed just before a scan is never trusted by the persisted index (its listing
    may have missed a same-tick change): a case that expects the next mount to reuse the index
    ages a dataset it has just made."""
    t = time.time_ns() - seconds * 1_000_000_000 + 123
    for dirpath, _, _ in os.walk(root):
        os.utime(dirpath, ns=(t, t), follow_symlinks=False)


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def read_all(root, rels):
    return {rel: sha256_file(os.path.join(root, rel)) for rel in rels}


def read_past_page_cache(path):
    """Reads a FUSE file through to the daemon: its own pages are dropped first (the kernel keeps
    raw pages across opens), not the whole machine's as drop_page_cache does."""
    with open(path, "rb") as f:
        os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
        return f.read()


def drop_page_cache():
    """Makes the next read of a FUSE file reach the daemon (the kernel keeps raw pages)."""
    os.sync()
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")
