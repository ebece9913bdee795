"""The cache side of a real mount: what is fetched from the source, what survives a restart, and
which cache directories the daemon refuses to trust."""
import hashlib
import os

import pytest

from prepfs_harness import Prepfs, SlowFs, drop_page_cache, sha256_file


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
