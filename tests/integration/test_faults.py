"""A fault campaign on real mounts: the daemon killed during SSD writes, torn and corrupted SSD
entries, a full SSD filesystem, 64 readers over the three views, the S3 server killed mid-epoch.
Each case ends with a byte-for-byte comparison, against the source, of everything it read: a
fault may cost a refetch or an error, never wrong bytes. Rounds are bounded (a few minutes in all).
"""
import collections
import hashlib
import os
import random
import re
import signal
import subprocess
import threading
import time

import pytest
from PIL import Image

from prepfs_harness import Prepfs, drop_page_cache, force_unmount, gen_images, is_mounted, wait_for

MIB = 1 << 20
ENTRY = re.compile(r"^[0-9a-f]{32}-[rda](\.spare)?$")


def sha(data):
    return hashlib.sha256(data).hexdigest()


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    """Binary files (not images: both tiers admit them, so every miss is an SSD write), sizes
    around and across the 1 MiB chunk, and a few JPEGs for the image views."""
    root = tmp_path_factory.mktemp("faults")
    src = root / "src"
    rng = random.Random(7)
    files = {}
    for i in range(48):
        size = rng.choice([0, 1, 4096, MIB - 1, MIB, MIB + 1, 2 * MIB + 17, rng.randint(1, 400_000),
                           rng.randint(1, 3 * MIB)])
        rel = f"bin/{i % 4}/f{i:02d}.bin"
        data = rng.randbytes(size)
        (src / os.path.dirname(rel)).mkdir(parents=True, exist_ok=True)
        (src / rel).write_bytes(data)
        files[rel] = sha(data)
    gen_images(src / "img", 2, 12)
    for dirpath, _, names in os.walk(src / "img"):
        for n in names:
            p = os.path.join(dirpath, n)
            files[os.path.relpath(p, src)] = sha(open(p, "rb").read())
    return root, files


def read_raw(fs, rel):
    """The file's bytes, leaving none of its pages in the kernel's cache: the next read of it
    reaches the daemon again."""
    with open(fs.raw(rel), "rb") as f:
        data = f.read()
        os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
    return data


def verify_everything(fs, files):
    for rel, digest in sorted(files.items()):
        assert sha(read_raw(fs, rel)) == digest, rel


def entry_files(ssd_dir):
    out = []
    for d, _, names in os.walk(ssd_dir):
        out += [os.path.join(d, n) for n in names if ENTRY.match(n)]
    return sorted(out)


def kill_9(fs):
    fs.proc.send_signal(signal.SIGKILL)
    fs.proc.wait()
    force_unmount(os.path.join(fs.mnt, ".prepfs"))
    force_unmount(fs.mnt)
    fs.log.close()


def test_kill_9_during_ssd_writes_never_serves_wrong_bytes(dataset, tmp_path):
    root, files = dataset
    (tmp_path / "mnt").mkdir()
    ssd = tmp_path / "ssd"
    rels = sorted(r for r in files if r.startswith("bin/"))
    opts = "ram=1M,ssd=64M"  # a tiny RAM tier: what is read again comes from the SSD tier
    rng = random.Random(11)
    wrong, reads, killed_while_writing = [], 0, 0
    rounds = 12
    for round_ in range(rounds):
        with Prepfs(root / "src", tmp_path / "mnt", ssd, opts) as fs:
            # Everything the previous daemon left on the SSD (torn temporaries, entries whose rename
            # did or did not happen) is read back first and must equal the source.
            for rel in rels:
                if sha(read_raw(fs, rel)) != files[rel]:
                    wrong.append(f"round {round_}: {rel} differs from the source after a kill")
            reads += len(rels)
            # Then the SSD tier starts over (.prepfs/evict), and readers refill it until the kill.
            with open(os.path.join(fs.mnt, ".prepfs", "evict"), "w") as f:
                f.write("1")
            stop = threading.Event()
            served = collections.Counter()

            def reader(seed):
                r = random.Random(seed)
                while not stop.is_set():
                    rel = r.choice(rels)
                    try:
                        data = read_raw(fs, rel)
                    except OSError:
                        if not stop.is_set():
                            wrong.append(f"round {round_}: {rel} failed before the kill")
                        return
                    if sha(data) != files[rel]:
                        wrong.append(f"round {round_}: {rel} differs from the source")
                    served[seed] += 1

            started = []
            try:
                for i in range(4):
                    started.append(threading.Thread(target=reader, args=(round_ * 100 + i,)))
                    started[-1].start()
                time.sleep(rng.uniform(0.0, 0.1))  # the refill takes about a tenth of a second
                before = fs.stats()["ssd"]["inserts"]
                time.sleep(0.01)
                killed_while_writing += fs.stats()["ssd"]["inserts"] > before  # entries landing right now
            finally:
                # Also when a stats() read above failed: the readers stop and the daemon dies, so
                # neither outlives the round (the with's stop() then finds it dead and unmounted).
                stop.set()
                kill_9(fs)
                for t in started:
                    t.join()
            reads += sum(served.values())
            assert not is_mounted(tmp_path / "mnt")
    with Prepfs(root / "src", tmp_path / "mnt", ssd, opts) as fs:
        verify_everything(fs, {r: files[r] for r in rels})
        stats = fs.stats()
    print(f"{rounds} kills, {killed_while_writing} while entries were landing; {reads} reads checked; last "
          f"mount: {stats['ssd']['hits']} SSD hits, {stats['ssd']['corrupt']} corrupt entries")
    assert wrong == []
    assert killed_while_writing >= rounds // 2
    assert stats["ssd"]["hits"] > 0


def test_torn_and_corrupted_ssd_entries_are_misses_never_wrong_bytes(dataset, tmp_path):
    root, files = dataset
    (tmp_path / "mnt").mkdir()
    ssd = tmp_path / "ssd"
    with Prepfs(root / "src", tmp_path / "mnt", ssd, "ram=1M,ssd=256M") as fs:
        verify_everything(fs, files)
    entries = entry_files(ssd)
    assert len(entries) >= 40
    rng = random.Random(3)
    rng.shuffle(entries)
    quarter = len(entries) // 4
    for p in entries[:quarter]:  # torn: cut anywhere, header included
        os.truncate(p, rng.randint(0, os.path.getsize(p) - 1))
    for p in entries[quarter:2 * quarter]:  # a flipped byte, in the header or the payload
        size = os.path.getsize(p)
        with open(p, "r+b") as f:
            at = rng.randrange(size)
            f.seek(at)
            b = f.read(1)
            f.seek(at)
            f.write(bytes([b[0] ^ (1 << rng.randrange(8))]))
    swapped = entries[2 * quarter:3 * quarter]
    for a, b in zip(swapped[::2], swapped[1::2]):  # two entries' files exchanged
        os.rename(a, a + ".x")
        os.rename(b, a)
        os.rename(a + ".x", b)
    with Prepfs(root / "src", tmp_path / "mnt", ssd, "ram=1M,ssd=256M") as fs:
        verify_everything(fs, files)
        first = fs.stats()
        drop_page_cache()
        verify_everything(fs, files)  # the refetched entries were written back, right
    print(f"{len(entries)} entries, {3 * quarter} damaged: {first['ssd']['corrupt']} found corrupt, "
          f"{first['ssd']['hits']} SSD hits")
    assert first["ssd"]["corrupt"] >= quarter
    assert first["source"]["bytes"] > 0


@pytest.fixture
def small_fs(tmp_path):
    """A 6 MiB tmpfs of its own, for an SSD tier that believes it has 64 MiB."""
    mnt = tmp_path / "ssdfs"
    mnt.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=6m,mode=0700", "prepfs-test-ssd", str(mnt)], check=True)
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def test_a_full_ssd_filesystem_lowers_the_budget_and_serves_right(dataset, tmp_path, small_fs):
    root, files = dataset
    (tmp_path / "mnt").mkdir()
    with Prepfs(root / "src", tmp_path / "mnt", small_fs / "cache", "ram=1M,ssd=64M") as fs:
        for _ in range(2):
            verify_everything(fs, files)
            drop_page_cache()
        stats = fs.stats()
        log = fs.log_text()
    print(f"ssd: {stats['ssd']['write_errors']} write errors, budget now {stats['ssd']['budget']}, "
          f"{stats['ssd']['inserts']} entries written")
    assert stats["ssd"]["write_errors"] > 0
    assert stats["ssd"]["budget"] < 6 * MIB
    assert stats["ssd"]["inserts"] > 0  # the tier lives on within what the disk holds
    assert "is full" in log


def pil_ppm_digest(path):
    img = Image.open(path).convert("RGB")
    return sha(b"P6\n%d %d\n255\n" % img.size + img.tobytes())


def test_64_readers_over_the_three_views(dataset, tmp_path):
    root, files = dataset
    src = root / "src"
    (tmp_path / "mnt").mkdir()
    images = sorted(r for r in files if r.startswith("img/"))
    stems = {r: r.rsplit(".", 1)[0] + ".ppm" for r in images}
    decoded = {r: pil_ppm_digest(src / r) for r in images}
    opts = "ram=4M,ssd=16M,seed=11"  # small tiers: evictions while 64 readers run
    augmented = collections.defaultdict(list)
    wrong = []
    with Prepfs(src, tmp_path / "mnt", tmp_path / "ssd", opts) as fs:
        lock = threading.Lock()

        def reader(seed):
            r = random.Random(seed)
            for _ in range(10):
                view = r.choice(("raw", "decoded", "augmented"))
                rel = r.choice(images if view != "raw" else sorted(files))
                try:
                    if view == "raw":
                        if sha(read_raw(fs, rel)) != files[rel]:
                            wrong.append(f"raw/{rel}")
                        continue
                    with open(os.path.join(fs.mnt, view, stems[rel]), "rb") as f:
                        data = f.read()
                except OSError as e:
                    wrong.append(f"{view}/{rel}: {e!r}")
                    continue
                if view == "decoded" and sha(data) != decoded[rel]:
                    wrong.append(f"decoded/{rel} differs from PIL")
                if view == "augmented":
                    if not data.startswith(b"P6\n224 224\n255\n") or len(data) != 15 + 224 * 224 * 3:
                        wrong.append(f"augmented/{rel}: bad header or size")
                    with lock:
                        augmented[rel].append(sha(data))

        threads = [threading.Thread(target=reader, args=(i,)) for i in range(64)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert wrong == []
    # Open k of a file is variant k, whatever the order the readers came in: a second daemon with
    # the same seed, opened as many times one by one, renders the same variants.
    with Prepfs(src, tmp_path / "mnt", tmp_path / "ssd-again", "seed=11") as fs:
        for rel, got in sorted(augmented.items()):
            again = []
            for _ in range(len(got)):
                with open(os.path.join(fs.mnt, "augmented", stems[rel]), "rb") as f:
                    again.append(sha(f.read()))
            assert sorted(got) == sorted(again), rel
    print(f"{sum(len(v) for v in augmented.values())} augmented variants checked against a second daemon")


def test_s3_server_killed_mid_epoch_and_restarted(tmp_path, monkeypatch):
    import s3rver_harness
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", s3rver_harness.ACCESS_KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", s3rver_harness.SECRET_KEY)
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
    rng = random.Random(9)
    objects = {f"ds/o{i:03d}.bin": rng.randbytes(rng.randint(1, MIB + MIB // 2)) for i in range(96)}
    try:
        srv = s3rver_harness.S3rver(tmp_path / "data")
    except BaseException as e:  # without s3rver the harness ends the session (exit 77): skip this case only
        if type(e).__name__ == "Exit":
            pytest.skip(str(e))
        raise
    try:
        srv.create_bucket("bucket")
        srv.put_objects("bucket", objects)
        (tmp_path / "mnt").mkdir()
        opts = f"s3_endpoint={srv.endpoint},s3_path_style=1,s3_region=us-east-1,ram=4M,ssd=0"
        with Prepfs("s3://bucket/ds", tmp_path / "mnt", tmp_path / "ssd", opts) as fs:
            rels = sorted(k[len("ds/"):] for k in objects)
            got, errors = {}, []

            def reader(part):
                for rel in part:
                    try:
                        got[rel] = sha(read_raw(fs, rel))
                    except OSError as e:
                        errors.append(f"{rel}: {e!r}")
                    time.sleep(0.02)  # an epoch long enough for the outage to fall in it

            order = rels[:]
            rng.shuffle(order)
            threads = [threading.Thread(target=reader, args=(order[i::8],)) for i in range(8)]
            for t in threads:
                t.start()
            wait_for(lambda: len(got) >= len(rels) // 4, what="a quarter of the epoch")
            srv.stop()  # SIGKILL: an outage mid-epoch
            read_before_outage = len(got)
            time.sleep(2)
            srv.start()
            for t in threads:
                t.join()
            source = fs.stats()["source"]
    finally:
        srv.close()
    print(f"{read_before_outage} of {len(got)} objects read before the outage; source errors {source['errors']}")
    assert read_before_outage < len(objects) * 3 // 4
    assert errors == []
    assert got == {k[len("ds/"):]: sha(v) for k, v in objects.items()}
