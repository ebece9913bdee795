"""Integrity and containment on a real mount: nothing from outside the source is ever served, and
no read mixes two versions of a file."""
import errno
import io
import os

import pytest
from PIL import Image

from prepfs_harness import Prepfs

SECRET = b"SECRET bytes that live outside the source, never to be served"


def jpeg(width, height, shade, pad_to=0):
    img = Image.new("RGB", (width, height), (shade, 255 - shade, shade // 2))
    buf = io.BytesIO()
    img.save(buf, format="JPEG", quality=90)
    data = buf.getvalue()
    assert not pad_to or len(data) <= pad_to
    return data + b"\0" * (pad_to - len(data)) if pad_to else data  # bytes after EOI are ignored


def ppm_of(data):
    img = Image.open(io.BytesIO(data)).convert("RGB")
    return b"P6\n%d %d\n255\n" % img.size + img.tobytes()


def same_size_and_mtime(path, like):
    """What an attacker forges with truncate(1) and touch(1): size and mtime of the indexed file."""
    st = os.stat(like)
    with open(path, "r+b") as f:
        f.truncate(st.st_size)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


def read_or_errno(path):
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as e:
        return e.errno


@pytest.mark.parametrize("swapped", ["d/e", "d"])
@pytest.mark.parametrize("ttl", ["never", "0"])
def test_a_directory_swapped_for_a_symlink_serves_nothing_from_outside(tmp_path, swapped, ttl):
    src, outside = tmp_path / "src", tmp_path / "outside"
    (src / "d" / "e").mkdir(parents=True)
    (tmp_path / "mnt").mkdir()
    inside_img, secret_img = jpeg(40, 30, 10, pad_to=8192), jpeg(40, 30, 200, pad_to=8192)
    (src / "d" / "e" / "hostname").write_bytes(b"i" * len(SECRET))
    (src / "d" / "e" / "x.jpg").write_bytes(inside_img)
    # Outside the source: the same names, sizes and mtimes, other bytes.
    target = outside / os.path.relpath(src / "d" / "e", src / swapped)
    target.mkdir(parents=True)
    (target / "hostname").write_bytes(SECRET)
    (target / "x.jpg").write_bytes(secret_img)
    same_size_and_mtime(target / "hostname", src / "d" / "e" / "hostname")
    same_size_and_mtime(target / "x.jpg", src / "d" / "e" / "x.jpg")
    # Probed after d/e (one level deeper): they push d/e's descriptors out of the source's small
    # cache of open files, as any reader of other files would.
    deeper = src / "z" / "y" / "x"
    deeper.mkdir(parents=True)
    for i in range(100):
        (deeper / f"{i:03d}.bin").write_bytes(b"filler")

    with Prepfs(src, tmp_path / "mnt", tmp_path / "ssd", f"metadata_ttl={ttl}") as fs:
        assert os.path.getsize(fs.raw("d/e/hostname")) == len(SECRET)
        os.rename(src / swapped, src / (swapped + ".old"))
        os.symlink(outside if swapped == "d" else target, src / swapped)
        raw = read_or_errno(fs.raw("d/e/hostname"))
        decoded = read_or_errno(os.path.join(fs.mnt, "decoded", "d", "e", "x.ppm"))
        # A source descriptor the daemon opened before the swap (the header probe keeps a few)
        # still names the indexed file: its bytes may be served. Nothing from outside, ever.
        assert raw in (errno.EIO, errno.ENOENT, b"i" * len(SECRET)), raw
        assert decoded in (errno.EIO, errno.ENOENT, ppm_of(inside_img)), decoded
        assert SECRET not in fs.log_text().encode()


@pytest.mark.parametrize("how", ["in place", "renamed over"])
def test_a_file_rewritten_with_forged_size_and_mtime_is_not_served(tmp_path, how):
    src = tmp_path / "src"
    src.mkdir()
    (tmp_path / "mnt").mkdir()
    old, new = b"ooo", b"NNN"  # under 4 bytes: no header probe, so no descriptor kept open
    (src / "f.bin").write_bytes(old)
    with Prepfs(src, tmp_path / "mnt", tmp_path / "ssd") as fs:
        assert os.path.getsize(fs.raw("f.bin")) == len(old)
        if how == "in place":
            with open(src / "f.bin", "r+b") as f:
                f.write(new)
            os.utime(src / "f.bin", ns=(0, os.stat(fs.raw("f.bin")).st_mtime_ns))
        else:
            (src / "forged").write_bytes(new)
            same_size_and_mtime(src / "forged", src / "f.bin")
            os.rename(src / "forged", src / "f.bin")
        got = read_or_errno(fs.raw("f.bin"))
        # The index says version (size, mtime, device, inode, ctime); the new bytes are another.
        assert got == errno.EIO or (got == old and how == "renamed over"), got[:10] if isinstance(got, bytes) else got
