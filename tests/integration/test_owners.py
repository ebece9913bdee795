"""Owners on a real allow_other mount: the source's uid/gid are mirrored, so the kernel's
default_permissions check lets a user read their own 0600 file and keeps others out of it.
The users are plain numeric ids (no /etc/passwd entry needed): readers are subprocesses that
drop to them with setgid/setuid before running."""
import errno
import io
import os
import subprocess
import sys

import pytest
from PIL import Image

from prepfs_harness import Prepfs, world_reachable_mountpoint

ALICE, BOB = 23456, 23457


def as_user(uid, code):
    """Runs python code as uid:uid (no supplementary groups); returns its stdout or 'errno N'."""
    def drop():
        os.setgroups([])
        os.setgid(uid)
        os.setuid(uid)
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, preexec_fn=drop, timeout=30)
    assert res.returncode == 0, res.stderr
    return res.stdout.strip()


READ = """
import sys
try:
    with open(sys.argv[1] if len(sys.argv) > 1 else {path!r}, "rb") as f:
        print(len(f.read()))
except OSError as e:
    print("errno", e.errno)
"""


def read_as(uid, path):
    return as_user(uid, READ.format(path=path))


@pytest.fixture
def world_reachable_mnt():
    """pytest's tmp_path is root-only (0700): other users could not even reach the mountpoint."""
    with world_reachable_mountpoint("prepfs-owners-") as mnt:
        yield mnt


def test_owners_are_mirrored_and_enforced(tmp_path, world_reachable_mnt):
    src = tmp_path / "src"
    (src / "alice").mkdir(parents=True)
    (src / "alice" / "private.bin").write_bytes(b"alice's own bytes")
    buf = io.BytesIO()
    Image.new("RGB", (32, 24), (1, 2, 3)).save(buf, format="JPEG")
    (src / "alice" / "photo.jpg").write_bytes(buf.getvalue())
    (src / "public.bin").write_bytes(b"for everyone")
    for p in (src / "alice", src / "alice" / "private.bin", src / "alice" / "photo.jpg"):
        os.chown(p, ALICE, ALICE)
    os.chmod(src / "alice", 0o755)
    os.chmod(src / "alice" / "private.bin", 0o600)
    os.chmod(src / "alice" / "photo.jpg", 0o600)
    os.chmod(src / "public.bin", 0o644)

    with Prepfs(src, world_reachable_mnt, tmp_path / "ssd", "allow_other") as fs:
        mnt = world_reachable_mnt
        private, photo = fs.raw("alice/private.bin"), os.path.join(mnt, "decoded", "alice", "photo.ppm")
        st = os.stat(private)
        assert (st.st_uid, st.st_gid, st.st_mode & 0o777) == (ALICE, ALICE, 0o600)
        assert (os.stat(photo).st_uid, os.stat(photo).st_gid) == (ALICE, ALICE)  # derived views keep the owner
        assert os.stat(fs.raw("alice")).st_uid == ALICE
        # The mount's own directories belong to the mounting user (root here).
        for d in ("", "raw", "decoded", ".prepfs"):
            assert os.stat(os.path.join(mnt, d)).st_uid == os.geteuid(), d

        assert read_as(ALICE, private) == str(len(b"alice's own bytes"))
        assert read_as(ALICE, photo) == str(len(b"P6\n32 24\n255\n") + 32 * 24 * 3)
        assert read_as(BOB, private) == f"errno {errno.EACCES}"
        assert read_as(BOB, photo) == f"errno {errno.EACCES}"
        assert read_as(BOB, fs.raw("public.bin")) == str(len(b"for everyone"))


WRITE_ORDER = """
import sys
with open({path!r}, "w") as f:
    f.write({text!r})
print("ok")
"""


def test_each_users_job_names_are_their_own(tmp_path, world_reachable_mnt):
    """Any user may write .prepfs/order (mode 0222): jobs of users of a root allow_other mount
    publish there. Two users' jobs of the same name were one job (both users' unnamed orders were
    "default"), and either user's reset or end dropped the other's."""
    src = tmp_path / "src"
    src.mkdir()
    for name in ("a.bin", "b.bin"):
        (src / name).write_bytes(b"x" * 100)
    with Prepfs(src, world_reachable_mnt, tmp_path / "ssd", "allow_other") as fs:
        order = os.path.join(world_reachable_mnt, ".prepfs", "order")
        assert as_user(ALICE, WRITE_ORDER.format(path=order, text="raw/a.bin\nraw/b.bin\njob t\nraw/a.bin\n")) == "ok"
        assert as_user(BOB, WRITE_ORDER.format(path=order, text="raw/b.bin\njob t\nreset\nend\n")) == "ok"
        with open(order, "w") as f:  # root: the daemon's own user keeps plain names
            f.write("raw/a.bin\n")
        jobs = {j["name"]: j["published"] for j in fs.stats()["jobs"]["list"]}
        assert jobs == {"default": 1, f"default@{ALICE}": 2, f"default@{BOB}": 1, f"t@{ALICE}": 1}, jobs
