"""FUSE daemons run as our children, and the mounts they leave behind.

One copy for every Python driver that mounts something: the integration tests
(tests/integration/prepfs_harness.py), the benches (bench/sampling, bench/partition, bench/s3 through
the harness) and the demo (scripts/demo.py). A daemon runs in the foreground; stop() always leaves
nothing mounted at or below its mountpoint, also when it died without unmounting (prepfs mounts
.prepfs/ and augmented/ below its mountpoint).
"""
import json
import os
import signal
import subprocess
import time

import proc_cpu


def mounts_under(path):
    """Mountpoints at or below path, deepest first (the order to unmount them in)."""
    path = os.path.realpath(path)
    out = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            mp = line.split()[4].replace("\\040", " ")  # mountinfo escapes spaces
            if mp == path or mp.startswith(path + "/"):
                out.append(mp)
    return sorted(out, key=len, reverse=True)


def is_mounted(path):
    return os.path.realpath(path) in mounts_under(path)


def force_unmount(path):
    """Lazily unmounts everything at or below path (a daemon that died leaves its mounts)."""
    for mp in mounts_under(path):
        subprocess.run(["umount", "-l", mp], stderr=subprocess.DEVNULL)


def wait_for(pred, timeout=20.0, what="condition"):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if pred():
            return
        time.sleep(0.02)
    raise TimeoutError(f"timed out after {timeout:g} s waiting for {what}")


class Daemon:
    """A FUSE daemon in the foreground. ready() says it serves; its output goes to log (a file
    object) or nowhere. Raises RuntimeError if it exits first, TimeoutError if it is not ready in
    time; either way nothing stays mounted."""

    def __init__(self, argv, mnt, ready, what, log=None, timeout=30.0):
        self.mnt, self.what = str(mnt), what
        self.proc = subprocess.Popen([str(a) for a in argv], stdin=subprocess.DEVNULL,
                                     stdout=log if log is not None else subprocess.DEVNULL,
                                     stderr=subprocess.STDOUT)
        try:
            wait_for(lambda: self.proc.poll() is not None or ready(), timeout, f"{what} to mount {self.mnt}")
        except BaseException:
            self.stop()
            raise
        if self.proc.poll() is not None:
            self.stop()
            raise RuntimeError(f"{what} exited with {self.proc.returncode} before it mounted {self.mnt}")

    def cpu_seconds(self):
        """The daemon's user + system CPU time so far."""
        return proc_cpu.cpu_seconds(self.proc.pid)

    def stop(self, sig=signal.SIGTERM, timeout=20.0):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        force_unmount(self.mnt)
        return self.proc.returncode

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


class SlowFs(Daemon):
    """bench/slowfs.cc (prepfs-slowfs) over a directory: a remote-like source whose counters say
    what it served. args: its options (latencies, bandwidth, threads, access log)."""

    def __init__(self, exe, source, mnt, args=(), log=None):
        super().__init__([exe, source, mnt, "-f", *args], mnt, self._answers, "prepfs-slowfs", log)

    def _answers(self):
        try:
            self.counters()
            return True
        except OSError:  # not mounted yet: the directory beneath has no such attribute
            return False

    def counters(self):
        return json.loads(os.getxattr(self.mnt, "user.slowfs.stats"))

    def reset(self):
        os.setxattr(self.mnt, "user.slowfs.reset", b"1")
