"""augmented/ through the kernel's page cache on a real mount (core/variant_pages.h): it serves a
variant's repeat opens (aug_reuse > 1), and no open ever reads another variant's pages, whatever
other handles hold or the kernel drops (issue 13)."""
import os
import threading
from collections import Counter

import pytest

from prepfs_harness import Prepfs, gen_images

SIZE = len(b"P6\n224 224\n255\n") + 224 * 224 * 3


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    root = tmp_path_factory.mktemp("pc")
    gen_images(root / "src", 2, 4)
    (root / "mnt").mkdir()
    return root


def first_image(src):
    for dirpath, _, names in sorted(os.walk(src)):
        for n in sorted(names):
            if n.lower().endswith((".jpeg", ".jpg")):
                return os.path.relpath(os.path.join(dirpath, n), src)
    raise AssertionError("no image generated")


def aug_path(mnt, rel):
    return os.path.join(mnt, "augmented", rel.rsplit(".", 1)[0] + ".ppm")


def read_all(path):
    with open(path, "rb") as f:
        return f.read()


def drop_kernel_caches():
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("1\n")


def reference_variants(dataset, rel, options, opens):
    """What each open gets in order from a mount that never lets the page cache serve augmented/."""
    with Prepfs(dataset / "src", dataset / "mnt", dataset / "ssd-ref", options + ",aug_page_cache=0") as fs:
        return [read_all(aug_path(fs.mnt, rel)) for _ in range(opens)]


def test_repeat_opens_of_a_variant_never_reach_the_daemon(dataset):
    rel = first_image(dataset / "src")
    options = "seed=11,aug_reuse=4,render_ahead=0"
    want = reference_variants(dataset, rel, options, 8)
    assert want[0] == want[3] and want[4] == want[7] and want[0] != want[4]
    with Prepfs(dataset / "src", dataset / "mnt", dataset / "ssd-pc", options) as fs:
        got = [read_all(aug_path(fs.mnt, rel)) for _ in range(8)]
        assert got == want
        s = fs.stats()["fs"]
        assert s["augmented_opens"] == 8, s
        assert s["augmented_page_cache_opens"] == 8, s
        assert s["augmented_page_invalidations"] == 2, s  # the first open of each variant
        # Only the first open of each variant read through the daemon; the page cache served the rest.
        assert s["augmented_read_bytes"] == 2 * SIZE, s


def test_a_held_handle_keeps_its_variant_while_later_opens_change_it(dataset):
    rel = first_image(dataset / "src")
    options = "seed=12,aug_reuse=2,render_ahead=0"
    want = reference_variants(dataset, rel, options, 6)  # variants 0,0,1,1,2,2
    with Prepfs(dataset / "src", dataset / "mnt", dataset / "ssd-held", options) as fs:
        p = aug_path(fs.mnt, rel)
        a = open(p, "rb")  # open 0: variant 0, through the page cache
        head = a.read(4096)
        b = read_all(p)  # open 1: variant 0, the same pages
        c = read_all(p)  # open 2: variant 1 while a still reads variant 0's pages: bypasses them
        d = read_all(p)  # open 3: variant 1
        drop_kernel_caches()  # a's next reads come from the daemon again, through a's handle
        rest = a.read()
        a.close()
        assert [head + rest, b, c, d] == want[:4]
        # No page-cache reader of variant 0 is left once a's release has arrived; until then a
        # later open bypasses the page cache. Either way it reads its own variant.
        assert read_all(p) == want[4] and read_all(p) == want[5]
        assert fs.stats()["fs"]["augmented_page_cache_opens"] >= 2


@pytest.mark.parametrize("reuse", [1, 3])
def test_concurrent_readers_each_read_one_whole_variant(dataset, reuse):
    rel = first_image(dataset / "src")
    threads, per_thread = 4, 12
    options = f"seed=13,aug_reuse={reuse},render_ahead=0"
    total = threads * per_thread
    want = reference_variants(dataset, rel, options, total)
    variants = [want[i] for i in range(0, total, reuse)]
    assert len(set(variants)) == total // reuse
    got, errors = [], []
    lock = threading.Lock()
    with Prepfs(dataset / "src", dataset / "mnt", dataset / "ssd-conc", options) as fs:
        p = aug_path(fs.mnt, rel)

        def reader():
            try:
                for _ in range(per_thread):
                    with open(p, "rb") as f:  # small reads, so that handles overlap
                        chunks = []
                        while chunk := f.read(16384):
                            chunks.append(chunk)
                    with lock:
                        got.append(b"".join(chunks))
            except Exception as e:  # noqa: BLE001 - reported below
                errors.append(e)

        def dropper(stop):
            while not stop.wait(0.005):
                drop_kernel_caches()

        stop = threading.Event()
        chaos = threading.Thread(target=dropper, args=(stop,))
        chaos.start()
        workers = [threading.Thread(target=reader) for _ in range(threads)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        stop.set()
        chaos.join()
        assert not errors, errors
        s = fs.stats()["fs"]
    # Which open got which variant depends on timing, but every read is one whole variant and
    # each variant was served exactly aug_reuse times: no mix, no stale pages.
    index = {v: i for i, v in enumerate(variants)}
    assert all(g in index for g in got), "a reader saw bytes that are no variant"
    assert Counter(index[g] for g in got) == {i: reuse for i in range(len(variants))}
    assert s["augmented_opens"] == total, s

