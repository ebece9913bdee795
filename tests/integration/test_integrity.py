"""Integrity and containment on a real mount: nothing from outside the source is ever served, and
no read mixes two versions of a file."""
import errno
import io
import os
import random
import time

import pytest
from PIL import Image

from prepfs_harness import Prepfs, age_directories, wait_for

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
    # Files outside the swapped path, to be read after the swap: more of them than the source
    # keeps descriptors open (PosixSource::kMaxOpenFiles, 64), so that none of d/e's is left.
    # The mount's header probe opens 64 files, d/e's among them; without this, the reads below
    # would go through those descriptors and never reach the containment of a fresh open.
    filler = src / "z" / "y" / "x"
    filler.mkdir(parents=True)
    for i in range(100):
        (filler / f"{i:03d}.bin").write_bytes(b"filler")

    with Prepfs(src, tmp_path / "mnt", tmp_path / "ssd", f"metadata_ttl={ttl}") as fs:
        assert os.path.getsize(fs.raw("d/e/hostname")) == len(SECRET)
        os.rename(src / swapped, src / (swapped + ".old"))
        os.symlink(outside if swapped == "d" else target, src / swapped)
        for i in range(100):
            with open(fs.raw(f"z/y/x/{i:03d}.bin"), "rb") as f:
                assert f.read() == b"filler"
        # Each checked read opens its source file afresh (no descriptor of it is left), and that
        # open, beneath the source root, refuses the symlink: nothing is served, neither the
        # outside bytes nor the inside ones, which only a descriptor from before could give.
        opens = fs.stats()["source"]["opens"]
        raw = read_or_errno(fs.raw("d/e/hostname"))
        assert fs.stats()["source"]["opens"] > opens
        opens = fs.stats()["source"]["opens"]
        decoded = read_or_errno(os.path.join(fs.mnt, "decoded", "d", "e", "x.ppm"))
        assert fs.stats()["source"]["opens"] > opens
        assert raw in (errno.EIO, errno.ENOENT), raw if isinstance(raw, int) else raw[:16]
        assert decoded in (errno.EIO, errno.ENOENT), decoded if isinstance(decoded, int) else decoded[:16]
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


MiB = 1 << 20


@pytest.mark.parametrize("ttl", ["never", "1"])
def test_a_file_rewritten_in_place_mid_read_gives_eio_never_mixed_bytes(tmp_path, ttl):
    src = tmp_path / "src"
    src.mkdir()
    (tmp_path / "mnt").mkdir()
    old = random.Random(3).randbytes(6 * MiB)
    (src / "big.bin").write_bytes(old)
    patch = b"N" * 4096
    new = patch + old[len(patch):5 * MiB] + patch + old[5 * MiB + len(patch):]
    with Prepfs(src, tmp_path / "mnt", tmp_path / "ssd", f"metadata_ttl={ttl}") as fs:
        reader = open(fs.raw("big.bin"), "rb", buffering=0)
        assert reader.read(MiB) == old[:MiB]  # chunk 0 is now cached
        with open(src / "big.bin", "r+b") as w:  # rewritten in place: same size, same inode
            w.write(patch)
            w.seek(5 * MiB)
            w.write(patch)

        def rest_of_old_handle():
            """What the open handle gives at 5 MiB: the old bytes or EIO, never the new ones."""
            reader.seek(5 * MiB)
            got = read_or_errno_from(reader, MiB)
            assert got == errno.EIO or got == old[5 * MiB:6 * MiB], got[:8] if isinstance(got, bytes) else got

        rest_of_old_handle()
        if ttl != "never":
            time.sleep(1.5)  # metadata_ttl: the next open sees the new version
            with open(fs.raw("big.bin"), "rb") as f:
                assert f.read() == new
            rest_of_old_handle()  # still one version per handle
        reader.close()


def read_or_errno_from(f, n):
    try:
        return f.read(n)
    except OSError as e:
        return e.errno


@pytest.mark.parametrize("view", ["raw", "decoded"])
def test_a_vanished_file_reads_as_eio(tmp_path, view):
    src = tmp_path / "src"
    src.mkdir()
    (tmp_path / "mnt").mkdir()
    (src / "x.jpg").write_bytes(jpeg(30, 20, 100))
    with Prepfs(src, tmp_path / "mnt", tmp_path / "ssd") as fs:
        path = fs.raw("x.jpg") if view == "raw" else os.path.join(fs.mnt, "decoded", "x.ppm")
        f = open(path, "rb")  # opened while it exists
        os.unlink(src / "x.jpg")
        with pytest.raises(OSError) as e:
            f.read()
        assert e.value.errno == errno.EIO
        f.close()


def test_a_resized_image_is_served_in_its_new_dimensions_after_revalidation(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    (tmp_path / "mnt").mkdir()
    small, large = jpeg(40, 30, 60), jpeg(64, 48, 120)
    (src / "x.jpg").write_bytes(small)
    with Prepfs(src, tmp_path / "mnt", tmp_path / "ssd", "metadata_ttl=1") as fs:
        decoded = os.path.join(fs.mnt, "decoded", "x.ppm")
        with open(decoded, "rb") as f:
            assert f.read() == ppm_of(small)
        (src / "x.jpg").write_bytes(large)
        time.sleep(1.5)
        assert os.path.getsize(decoded) == len(ppm_of(large))
        with open(decoded, "rb") as f:
            assert f.read() == ppm_of(large)


def test_a_file_changed_under_an_immutable_mount_is_served_again_after_a_remount(tmp_path):
    """A chmod moves the ctime (a new version: EIO), yet leaves its directory's fingerprint alone:
    the mount that saw the change marks the persisted index stale so the next one rescans."""
    src = tmp_path / "src"
    src.mkdir()
    (tmp_path / "mnt").mkdir()
    (src / "f.bin").write_bytes(b"abc")
    # Made just now: without this, the first mount's index would not trust src/ (changed within a
    # tick of the scan), and the second mount would rescan whether or not the marker worked.
    age_directories(src)
    with Prepfs(src, tmp_path / "mnt", tmp_path / "ssd") as fs:
        os.chmod(src / "f.bin", 0o600)
        assert read_or_errno(fs.raw("f.bin")) == errno.EIO
    with Prepfs(src, tmp_path / "mnt", tmp_path / "ssd") as fs:
        wait_for(lambda: "index reused" in fs.log_text() or "index scanned" in fs.log_text(), timeout=5,
                 what="the summary line")
        assert "not reused: files changed under the last mount" in fs.log_text()
        assert read_or_errno(fs.raw("f.bin")) == b"abc"
        assert os.stat(fs.raw("f.bin")).st_mode & 0o777 == 0o600
