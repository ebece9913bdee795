"""The cache side of a real mount: what is fetched from the source, what survives a restart, and
which cache directories the daemon refuses to trust."""
import hashlib
import json
import os
import stat
import subprocess

import pytest

from prepfs_harness import (PREPFS_BIN, Prepfs, SlowFs, assert_one_clear_line, drop_page_cache, force_unmount,
                            gen_images, is_mounted, read_all, sha256_file)


@pytest.fixture
def env(tmp_path):
    for d in ("src", "mnt", "slow"):
        (tmp_path / d).mkdir()
    return tmp_path


def test_a_chunk_the_ram_tier_refuses_is_fetched_once_per_pass(env):
    # 1 MiB chunks cannot enter a 512 KiB RAM tier, and there is no SSD tier: the chunk must
    # still be at hand for the kernel's next read requests of the same file (a 1 MiB chunk is
    # asked for in several requests), or each of them fetches it again.
    size = 64 << 20
    data = os.urandom(size)
    (env / "src" / "big.bin").write_bytes(data)
    with SlowFs(env / "src", env / "slow") as slow, \
            Prepfs(env / "slow", env / "mnt", env / "ssd", "ram=512K,ssd=0") as fs:
        slow.reset()
        drop_page_cache()
        assert sha256_file(fs.raw("big.bin")) == hashlib.sha256(data).hexdigest()
        fetched = fs.stats()["source"]["bytes"]
        source_side = slow.counters()["read_bytes"]
    print(f"fetched {fetched / size:.3f}x of the file ({source_side / size:.3f}x at the source)")
    # One pass: every byte once (the page cache may re-ask for a page; allow 10%).
    assert size <= fetched <= size * 1.1, fetched / size
    assert source_side <= size * 1.1, source_side / size


def test_a_remount_over_the_same_ssd_dir_fetches_almost_nothing(env):
    # ssd=1G and the default partition=auto over a fast source: RAM holds the whole dataset, so
    # the plan leaves the SSD empty. A user who gives ssd= expects a warm restart all the same.
    gen_images(env / "src", 4, 250)
    rels = sorted(os.path.relpath(os.path.join(d, n), env / "src") for d, _, names in os.walk(env / "src")
                  for n in names)
    assert len(rels) == 1000
    total = sum(os.path.getsize(env / "src" / r) for r in rels)
    digests = {r: sha256_file(env / "src" / r) for r in rels}
    with SlowFs(env / "src", env / "slow") as slow:
        with Prepfs(env / "slow", env / "mnt", env / "ssd", "ssd=1G") as fs:
            assert read_all(fs.raw(), rels) == digests
            placed = [placed_samples(fs)]
        slow.reset()
        with Prepfs(env / "slow", env / "mnt", env / "ssd", "ssd=1G") as fs:
            drop_page_cache()
            assert read_all(fs.raw(), rels) == digests
            refetched = slow.counters()["read_bytes"]
            placed.append(placed_samples(fs))
            stats = fs.stats()
    # The plan may leave a few samples uncached on purpose (caching them would not be faster): a
    # running mount fetches those every epoch too. Everything else comes from the SSD.
    uncached = 1 - min(placed) / len(rels)
    print(f"a remount fetched {refetched / total:.1%} of the dataset; the plan leaves {uncached:.1%} of the "
          f"samples uncached; ssd hits {stats['ssd']['hits']}")
    assert uncached <= 0.05
    assert refetched <= total * (uncached + 0.01), f"a remount fetched {refetched / total:.1%} of the dataset again"


def placed_samples(fs):
    with open(os.path.join(fs.mnt, ".prepfs", "plan.json")) as f:
        placement = json.load(f)["placement"]
    return sum(tiers["ram"] + tiers["ssd"] for tiers in placement.values())


def run_cli(*args):
    """prepfs in the foreground, expected to fail at once (a mount it should have refused is
    unmounted, so a failing test leaves nothing behind)."""
    try:
        return subprocess.run([PREPFS_BIN, *map(str, args)], capture_output=True, text=True, timeout=20)
    except subprocess.TimeoutExpired:
        force_unmount(os.path.join(str(args[1]), ".prepfs"))
        force_unmount(str(args[1]))
        raise


def test_an_ssd_dir_others_can_write_or_own_is_refused(env):
    (env / "src" / "f").write_bytes(b"x")
    shared = env / "shared"
    shared.mkdir()
    os.chmod(shared, 0o777)
    res = run_cli(env / "src", env / "mnt", "-f", "-o", f"ssd_dir={shared}")
    assert_one_clear_line(res, "ssd_dir", str(shared), "writable by its group or by others")
    foreign = env / "foreign"
    foreign.mkdir()
    os.chown(foreign, 4242, 4242)
    res = run_cli(env / "src", env / "mnt", "-f", "-o", f"ssd_dir={foreign}")
    assert_one_clear_line(res, "ssd_dir", "owned by uid 4242")
    assert not is_mounted(env / "mnt")


def test_the_cache_directory_and_index_are_private(env):
    (env / "src" / "f").write_bytes(b"x" * 5000)
    # ssd_dir itself may be reached through a symlink (the user's choice); below it, nothing is.
    (env / "real-ssd").mkdir()
    os.symlink(env / "real-ssd", env / "ssd")
    with Prepfs(env / "src", env / "mnt", env / "ssd") as fs:
        assert open(fs.raw("f"), "rb").read() == b"x" * 5000
    cache_dirs = [d for d in (env / "real-ssd").iterdir() if d.is_dir()]
    assert len(cache_dirs) == 1
    cache = cache_dirs[0]
    assert stat.S_IMODE(os.stat(cache).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(cache / "index.bin").st_mode) == 0o600
    for d, dirs, files in os.walk(cache):
        for n in dirs:
            assert stat.S_IMODE(os.lstat(os.path.join(d, n)).st_mode) == 0o700, os.path.join(d, n)
        for n in files:
            assert stat.S_IMODE(os.lstat(os.path.join(d, n)).st_mode) & 0o077 == 0, os.path.join(d, n)
    # An index.bin left world-readable by an older version is made private at the next mount.
    os.chmod(cache / "index.bin", 0o644)
    with Prepfs(env / "src", env / "mnt", env / "ssd"):
        pass
    assert stat.S_IMODE(os.stat(cache / "index.bin").st_mode) == 0o600


def test_without_home_a_user_must_name_the_ssd_dir(env):
    # There used to be a /tmp fallback: a cache any local user could plant files in.
    res = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "env", "-i",
                          "PATH=/usr/bin:/bin", PREPFS_BIN, str(env / "src"), str(env / "mnt"), "-f"],
                         capture_output=True, text=True, timeout=60)
    assert_one_clear_line(res, "HOME", "ssd_dir")
