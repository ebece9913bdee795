"""The raw/ view on a real mount: a byte-identical, read-only mirror served from the tiers."""
import errno
import os
import random
import stat
import threading

import pytest

from prepfs_harness import (Prepfs, SlowFs, age_directories, drop_page_cache, make_dataset, read_all,
                            sha256_file, wait_for)


@pytest.fixture
def env(tmp_path):
    src = tmp_path / "src"
    digests = make_dataset(str(src))
    for d in ("mnt", "slow"):
        (tmp_path / d).mkdir()
    return tmp_path, src, digests


def test_every_entry_mirrors_the_source(env):
    tmp, src, digests = env
    with Prepfs(src, tmp / "mnt", tmp / "ssd") as fs:
        src_entries, mnt_entries = {}, {}
        for base, out in ((str(src), src_entries), (fs.raw(), mnt_entries)):
            for dirpath, dirnames, filenames in os.walk(base):
                for name in dirnames + filenames:
                    full = os.path.join(dirpath, name)
                    out[os.path.relpath(full, base)] = os.lstat(full)
        assert sorted(src_entries) == sorted(mnt_entries)
        for rel, s in src_entries.items():
            m = mnt_entries[rel]
            assert stat.S_IFMT(m.st_mode) == stat.S_IFMT(s.st_mode), rel
            assert stat.S_IMODE(m.st_mode) == stat.S_IMODE(s.st_mode), rel
            assert m.st_mtime_ns == s.st_mtime_ns, rel
            if not stat.S_ISDIR(s.st_mode):
                assert m.st_size == s.st_size, rel
            if stat.S_ISLNK(s.st_mode):
                assert os.readlink(fs.raw(rel)) == os.readlink(os.path.join(src, rel))
        assert read_all(fs.raw(), digests) == digests
        assert os.listdir(fs.raw("empty_dir")) == []
        assert set(os.listdir(fs.mnt)) == {"raw", "decoded", "augmented", ".prepfs"}


def test_a_file_from_before_1970_keeps_its_mtime(tmp_path):
    """A negative time used to reach the kernel with a negative nanosecond part."""
    src = tmp_path / "src"
    src.mkdir()
    (tmp_path / "mnt").mkdir()
    (src / "old.txt").write_bytes(b"old")
    t = -10 * 365 * 86400 * 10**9 + 250_000_000  # 1960, and a quarter of a second
    os.utime(src / "old.txt", ns=(t, t))
    assert os.stat(src / "old.txt").st_mtime_ns == t
    with Prepfs(src, tmp_path / "mnt", tmp_path / "ssd") as fs:
        assert os.stat(fs.raw("old.txt")).st_mtime_ns == t
        with open(fs.raw("old.txt"), "rb") as f:
            assert f.read() == b"old"


def test_multi_gib_sparse_file(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    (tmp_path / "mnt").mkdir()
    size = 5 * 1024**3 + 12345
    marks = {0: b"start", 2**31 - 3: b"across-2GiB", 2**32 - 2: b"across-4GiB", size - 4: b"tail"}
    with open(src / "huge.bin", "wb") as f:
        f.truncate(size)
        for off, data in marks.items():
            f.seek(off)
            f.write(data)
    with Prepfs(src, tmp_path / "mnt", tmp_path / "ssd", "ram=16M,ssd=32M") as fs:
        assert os.stat(fs.raw("huge.bin")).st_size == size
        with open(fs.raw("huge.bin"), "rb") as f:
            for off, data in marks.items():
                f.seek(off)
                assert f.read(len(data)) == data
            f.seek(2**32 + 100)
            assert f.read(4096) == bytes(4096)
            f.seek(size - 10)
            assert f.read(100) == bytes(6) + b"tail"
        s = fs.stats()
        assert s["ram"]["bytes"] <= 16 * 2**20 and s["ssd"]["bytes"] <= 32 * 2**20


def test_every_mutation_fails_with_erofs(env):
    tmp, src, digests = env
    with Prepfs(src, tmp / "mnt", tmp / "ssd") as fs:
        rel = "f002.jpg"  # 4095 bytes: a write or truncate that got through would change its digest
        assert rel in digests
        f = fs.raw(rel)
        attempts = {
            "create": lambda: open(fs.raw("new.txt"), "w"),
            "write": lambda: open(f, "r+b"),
            "unlink": lambda: os.unlink(f),
            "rename": lambda: os.rename(f, fs.raw("renamed")),
            "mkdir": lambda: os.mkdir(fs.raw("newdir")),
            "rmdir": lambda: os.rmdir(fs.raw("empty_dir")),
            "chmod": lambda: os.chmod(f, 0o777),
            "truncate": lambda: os.truncate(f, 0),
            "symlink": lambda: os.symlink("x", fs.raw("newlink")),
            "utime": lambda: os.utime(f, (0, 0)),
        }
        for name, attempt in attempts.items():
            with pytest.raises(OSError) as e:
                attempt()
            assert e.value.errno == errno.EROFS, name
        assert sha256_file(f) == digests[os.path.relpath(f, fs.raw())]


def test_second_pass_is_served_from_the_cache(env):
    tmp, src, digests = env
    with SlowFs(src, tmp / "slow") as slow, Prepfs(tmp / "slow", tmp / "mnt", tmp / "ssd") as fs:
        slow.reset()
        assert read_all(fs.raw(), digests) == digests
        first = slow.counters()
        assert first["reads"] > 0
        drop_page_cache()  # so the second pass reaches prepfs, not just the kernel's page cache
        before = fs.stats()
        assert read_all(fs.raw(), digests) == digests
        assert slow.counters()["reads"] == first["reads"], "second pass touched the source"
        after = fs.stats()
        assert after["ram"]["hits"] > before["ram"]["hits"]
        assert after["source"]["bytes"] == before["source"]["bytes"]


def test_restart_with_same_ssd_dir_serves_without_the_source(env):
    tmp, src, digests = env
    age_directories(src)  # made just now: the first mount's index would not trust its directories
    with SlowFs(src, tmp / "slow") as slow:
        with Prepfs(tmp / "slow", tmp / "mnt", tmp / "ssd") as fs:
            assert read_all(fs.raw(), digests) == digests
        slow.reset()
        with Prepfs(tmp / "slow", tmp / "mnt", tmp / "ssd") as fs:
            # The summary line comes right after the mount answers: wait for it, do not race it.
            wait_for(lambda: "index reused" in fs.log_text(), timeout=5, what="the summary line")
            assert read_all(fs.raw(), digests) == digests
            c = slow.counters()
            assert c["reads"] == 0 and c["opens"] == 0 and c["readdirs"] == 0, c
            s = fs.stats()
            assert s["ssd"]["hits"] > 0 and s["source"]["bytes"] == 0


def test_corrupt_ssd_entry_is_refetched_not_served(env):
    tmp, src, digests = env
    victim = "a/b/f003.jpg"  # 4096 bytes: the flipped byte at payload offset 10 is inside it
    assert victim in digests
    with SlowFs(src, tmp / "slow") as slow:
        with Prepfs(tmp / "slow", tmp / "mnt", tmp / "ssd") as fs:
            assert read_all(fs.raw(), digests) == digests
        # Find the victim's entry by its payload: the first bytes after the 64-byte header.
        with open(src / victim, "rb") as f:
            head = f.read(64)
        entry = None
        for dirpath, _, names in os.walk(tmp / "ssd"):
            for n in names:
                p = os.path.join(dirpath, n)
                with open(p, "rb") as f:
                    if f.read(128)[64:64 + len(head)] == head and os.path.getsize(p) == 64 + os.path.getsize(src / victim):
                        entry = p
        assert entry, "no SSD entry holds the victim"
        with open(entry, "r+b") as f:
            f.seek(64 + 10)
            b = f.read(1)
            f.seek(64 + 10)
            f.write(bytes([b[0] ^ 0xFF]))
        slow.reset()
        with Prepfs(tmp / "slow", tmp / "mnt", tmp / "ssd") as fs:
            assert read_all(fs.raw(), digests) == digests
            assert fs.stats()["ssd"]["corrupt"] == 1
            assert slow.counters()["reads"] >= 1
            assert fs.stats()["source"]["bytes"] == os.path.getsize(src / victim)
            assert "corrupt" in fs.log_text()


def test_changed_source_file_is_served_fresh_after_revalidation(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    (tmp_path / "mnt").mkdir()
    (src / "f.txt").write_bytes(b"version one")
    with Prepfs(src, tmp_path / "mnt", tmp_path / "ssd", "metadata_ttl=1") as fs:
        with open(fs.raw("f.txt"), "rb") as f:
            assert f.read() == b"version one"
        (src / "f.txt").write_bytes(b"the second, longer version")
        os.utime(src / "f.txt", ns=(0, 2_000_000_000_000_000_000))
        import time
        time.sleep(1.5)
        with open(fs.raw("f.txt"), "rb") as f:
            assert f.read() == b"the second, longer version"
        assert os.stat(fs.raw("f.txt")).st_size == len(b"the second, longer version")


def test_32_threads_read_correctly_under_eviction(env):
    tmp, src, digests = env
    # Small budgets force evictions while 32 readers hammer the same files.
    with Prepfs(src, tmp / "mnt", tmp / "ssd", "ram=2M,ssd=4M") as fs:
        rels = sorted(digests)
        errors = []

        def reader(seed):
            rng = random.Random(seed)
            for _ in range(40):
                rel = rng.choice(rels)
                try:
                    if sha256_file(fs.raw(rel)) != digests[rel]:
                        errors.append(rel)
                except OSError as e:  # a failed read must fail the test, not just end the thread
                    errors.append(f"{rel}: {e!r}")
                if rng.random() < 0.1:
                    drop_page_cache()

        threads = [threading.Thread(target=reader, args=(i,)) for i in range(32)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
        s = fs.stats()
        assert s["ram"]["evictions"] > 0
        assert s["ram"]["bytes"] <= 2 * 2**20 and s["ssd"]["bytes"] <= 4 * 2**20


def test_budgets_hold(env):
    tmp, src, digests = env
    ram, ssd = 1 * 2**20, 3 * 2**20
    with Prepfs(src, tmp / "mnt", tmp / "ssd", f"ram={ram},ssd={ssd}") as fs:
        for _ in range(2):
            assert read_all(fs.raw(), digests) == digests
            drop_page_cache()
        s = fs.stats()
        assert 0 < s["ram"]["bytes"] <= ram
        assert 0 < s["ssd"]["bytes"] <= ssd
        assert s["ram"]["budget"] == ram and s["ssd"]["budget"] == ssd
    on_disk = sum(os.path.getsize(os.path.join(d, n))
                  for d, _, names in os.walk(tmp / "ssd") for n in names if "/ssd/" in os.path.join(d, n)[len(str(tmp)):])
    assert on_disk <= ssd


def test_no_eviction_policy_keeps_first_entries(env):
    tmp, src, digests = env
    with Prepfs(src, tmp / "mnt", tmp / "ssd", "ram=1M,ssd=0,eviction=none") as fs:
        assert read_all(fs.raw(), digests) == digests
        s = fs.stats()
        assert s["ram"]["evictions"] == 0 and s["ram"]["rejected"] > 0


def read_ahead_kb(path):
    dev = os.stat(path).st_dev
    with open(f"/sys/class/bdi/{os.major(dev)}:{os.minor(dev)}/read_ahead_kb") as f:
        return int(f.read())


@pytest.mark.parametrize("option,kb", [("", 1024), ("read_ahead=512K", 512)])
def test_the_data_views_read_ahead_as_set(env, option, kb):
    """The kernel reads a FUSE mount ahead 128K at a time, the size INIT agreed: a 560 KB
    decoded/ file took 6 READs. The daemon raises its mounts' read-ahead (1M by default) once
    they have answered INIT, for raw/ and decoded/ and for augmented/."""
    tmp, src, _ = env
    with Prepfs(src, tmp / "mnt", tmp / "ssd", option) as fs:
        # Set once the mount answers, which the harness does not wait for.
        for mnt in (fs.mnt, os.path.join(fs.mnt, "augmented")):
            wait_for(lambda: read_ahead_kb(mnt) == kb, 10, f"read_ahead_kb {kb} on {mnt}")
