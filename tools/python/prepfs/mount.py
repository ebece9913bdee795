"""MountClient: reads and writes a prepfs mount's control files (MNT/.prepfs/), nothing more.

It raises (OSError, ProtocolError, ValueError) and never decides what a failure means for a
training run: that policy (warn once, fall back to plain sampling) lives in PrepfsSampler.

The files, as the daemon serves them:
  samples     read   one line per sample, "RAW_PATH<TAB>IMAGE_PATH"; line i is sample index i
                     (IMAGE_PATH "-": decoded/ and augmented/ do not show the file)
  resident    read   bitmap of ceil(N/8) bytes, LSB first: sample i is bit i % 8 of byte i // 8
  order       write  "job NAME", then "reset" / "end" / mount-relative paths, one per line
  importance  write  "INDEX VALUE" lines; later values replace earlier ones
"""
import os
import re
import sys
from typing import Iterable, List, Tuple

__all__ = ["MountClient", "ProtocolError", "Resident", "VIEWS", "JOB_NAME"]

# The views under the mount root; raw/ is keyed by a sample's source path, the others by its image path.
VIEWS = ("raw", "decoded", "augmented")
JOB_NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}")


class ProtocolError(ValueError):
    """A control file's content does not have the documented format."""


class Resident:
    """A snapshot of .prepfs/resident: `i in r` is whether sample index i was cached when it was read."""

    __slots__ = ("data",)

    def __init__(self, data: bytes):
        self.data = bytes(data)

    def __contains__(self, i: int) -> bool:
        byte = i >> 3
        return 0 <= i and byte < len(self.data) and bool((self.data[byte] >> (i & 7)) & 1)

    def count(self) -> int:
        return sum(bin(b).count("1") for b in self.data)


class MountClient:
    """The control files of the prepfs mount at `mount`. Holds no open file between calls, so it is
    safe to pickle and to fork (a DataLoader worker inherits no descriptor of it)."""

    # Writes are cut into whole-line chunks of at most this many bytes. The control files are
    # direct_io, and the kernel splits a write() into FUSE requests of at most max_pages pages
    # (32 unless negotiated higher), counting the partial first page of an unaligned buffer: 64 KiB
    # stays one request in every case, so the daemon never receives half a line.
    CHUNK = 64 * 1024

    def __init__(self, mount):
        self.mount = os.path.abspath(os.fspath(mount))
        self.ctl = os.path.join(self.mount, ".prepfs")

    def __repr__(self):
        return f"MountClient({self.mount!r})"

    def path(self, name: str) -> str:
        return os.path.join(self.ctl, name)

    def present(self) -> bool:
        """Whether a daemon serves this mount (its .prepfs/ directory exists)."""
        return os.path.isdir(self.ctl)

    # ------------------------------------------------------------------------------------- reads

    def _read(self, name: str) -> bytes:
        # Unbuffered and to EOF: a direct_io file may return fewer bytes per read() than asked.
        parts = []
        with open(self.path(name), "rb", buffering=0) as f:
            while True:
                b = f.read(1 << 20)
                if not b:
                    return b"".join(parts)
                parts.append(b)

    def samples(self) -> List[Tuple[str, str]]:
        """[(raw_path, image_path)] by sample index, both relative to their view's root."""
        text = self._read("samples").decode(sys.getfilesystemencoding(), "surrogateescape")
        lines = text.split("\n")
        if lines[-1] == "":
            lines.pop()  # the final newline ends the last line; it does not start an empty one
        out = []
        for i, line in enumerate(lines):
            raw, tab, image = line.partition("\t")
            if not tab or not raw or not image or "\t" in image:
                raise ProtocolError(f"{self.path('samples')} line {i + 1}: expected RAW_PATH<TAB>IMAGE_PATH, "
                                    f"got {line!r}")
            out.append((raw, image))
        return out

    def resident(self) -> Resident:
        return Resident(self._read("resident"))

    # ------------------------------------------------------------------------------------ writes

    def _write_lines(self, name: str, lines: Iterable[str]) -> None:
        # No O_CREAT: a missing control file means this daemon lacks the feature (or there is no
        # daemon), and creating a plain file in its place would hide that.
        fd = os.open(self.path(name), os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC)
        try:
            chunk, size = [], 0
            for line in lines:
                b = os.fsencode(line) + b"\n"
                if size + len(b) > self.CHUNK and chunk:
                    _write_all(fd, b"".join(chunk))
                    chunk, size = [], 0
                chunk.append(b)
                size += len(b)
            if chunk:
                _write_all(fd, b"".join(chunk))
        finally:
            os.close(fd)

    def publish(self, job: str, paths: Iterable[str], *, reset: bool = False, end: bool = False,
                opportunistic: bool = False) -> None:
        """Append `paths` (mount-relative, any view) to job `job`'s published future.

        reset=True first drops what the job published before; end=True then says the job is done.
        opportunistic=True says the job reorders within a window to take cached samples first: its
        order is a set of upcoming reads rather than an exact sequence (the daemon then keeps what
        such a job still needs by recency, not by position).
        """
        _check_job(job)
        head = [f"job {job}" + (" opportunistic" if opportunistic else "")] + (["reset"] if reset else [])
        self._write_lines("order", _chain(head, (_check_path(p) for p in paths), ["end"] if end else []))

    def end(self, job: str) -> None:
        """Tell the daemon job `job` is done (its remaining published future no longer counts)."""
        self.publish(job, [], end=True)

    def report_importance(self, pairs: Iterable[Tuple[int, float]]) -> None:
        """Write (sample index, importance) pairs to .prepfs/importance."""
        self._write_lines("importance", (_importance_line(i, v) for i, v in pairs))


def _chain(*parts):
    for p in parts:
        yield from p


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def _check_job(job: str) -> None:
    if not isinstance(job, str) or not JOB_NAME.fullmatch(job):
        raise ValueError(f"job name {job!r} must be 1 to 64 of [A-Za-z0-9_.-]")


def _check_path(p: str) -> str:
    if "\n" in p or not p or p.startswith("/"):
        raise ValueError(f"order path {p!r} must be relative to the mount and on one line")
    return p


def _importance_line(index, value) -> str:
    index, value = int(index), float(value)
    if index < 0:
        raise ValueError(f"sample index {index} is negative")
    if not value >= 0.0 or value == float("inf"):
        raise ValueError(f"importance {value} of sample {index} is not a finite non-negative number")
    return f"{index} {value:.9g}"
