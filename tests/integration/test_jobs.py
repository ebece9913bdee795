"""The training job's knowledge, through real mounts: a published order drives exact prefetch
(seen at the slow source) and Belady eviction; the importance file changes what stays cached;
PrepfsSampler's opportunistic mode lets two concurrent DataLoaders share one cache.

The kernel keeps raw/ and decoded/ pages across opens (that is what makes warm reads fast), so
a cache-policy experiment that re-reads those views drops the page cache between epochs;
augmented/ is served with direct_io and always reaches the daemon."""
import collections
import json
import os
import random
import subprocess
import sys
import threading
import time

import pytest

from prepfs_harness import Prepfs, SlowFs, drop_page_cache, gen_images, read_past_page_cache, sha256_file, wait_for

PREPCTL = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools", "prepctl")

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root for FUSE mounts")


def raw_files(root):
    out = []
    for dirpath, _, names in os.walk(os.path.join(root, "train")):
        for n in sorted(names):
            out.append(os.path.relpath(os.path.join(dirpath, n), root))
    return sorted(out)


def publish(mnt, job, paths, reset=True):
    with open(os.path.join(mnt, ".prepfs", "order"), "w") as f:
        f.write(f"job {job}\n" + ("reset\n" if reset else "") + "".join(p + "\n" for p in paths))


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    root = tmp_path_factory.mktemp("jobs") / "src"
    # 300 images (35 MB): several times the RAM tier's 8 MiB floor of recent fills, which would
    # otherwise hold a small dataset whatever the policy.
    gen_images(root, classes=3, per_class=100)
    return root


# Where a prefetched file waits for its read: in the staging (no RAM tier: the read takes it from
# there, a prefetch hit), or admitted to the RAM tier like any fill (the read is a RAM hit;
# prefetch "hits" counts only reads that take a staged entry, store/staging.cc, so it stays 0).
@pytest.mark.parametrize("held", ["staged", "in ram"])
def test_a_published_order_is_fetched_in_that_order_ahead_of_the_reader(dataset, tmp_path, held):
    files = raw_files(dataset)
    log = tmp_path / "access.log"
    (tmp_path / "slow").mkdir()
    (tmp_path / "mnt").mkdir()
    with SlowFs(dataset, tmp_path / "slow", "--open-latency-ms", "4", "--read-latency-ms", "2",
                "--access-log", str(log)):
        ram = "ram=0" if held == "staged" else "ram=256M"
        with Prepfs(tmp_path / "slow", tmp_path / "mnt", tmp_path / "ssd",
                    ram + ",ssd=0,prefetch_window=4M,prefetch_threads=4") as fs:
            log.write_text("")  # the mount's own header probes are not the job's
            drop_page_cache()  # nor are the pages those probes left in the kernel
            # The daemon's own count of source reads: slowfs's log misses a second fetch whose
            # source descriptor the daemon still held (served from slowfs's page cache).
            reads_before = fs.stats()["source"]["reads"]
            order = files[:]
            random.Random(3).shuffle(order)
            # Published as an operator would: prepctl MNT order FILE (absolute paths in the mount too).
            order_file = tmp_path / "order.txt"
            order_file.write_text("".join(("raw/" + p if i % 2 else fs.raw(p)) + "\n" for i, p in enumerate(order)))
            res = subprocess.run(["/usr/bin/python3", PREPCTL, fs.mnt, "order", str(order_file), "--job", "reader"],
                                 capture_output=True, text=True)
            assert res.returncode == 0 and f"published {len(order)} accesses" in res.stdout, res.stderr

            def first_reads():  # the source's reads at offset 0, one per fetch of a file, in order
                return [f[1] for f in SlowFs.access_log(log) if f[0] == "read" and f[2] == "0"]

            ahead = 0
            for p in order:
                time.sleep(0.01)  # a reader slower than the prefetcher
                if p in first_reads():
                    ahead += 1
                assert sha256_file(fs.raw(p)) == sha256_file(os.path.join(dataset, p))
            fetches = first_reads()
            stats = fs.stats()
    # Every file was fetched exactly once (a second read at offset 0 would be a file fetched
    # twice: a prefetch the reader did not use, or a reader that did not wait for it) ...
    times = collections.Counter(fetches)
    assert times == collections.Counter(order), {p: n for p, n in times.items() if n != 1} or set(order) - set(times)
    assert all(os.path.getsize(os.path.join(dataset, p)) <= 1 << 20 for p in order)  # one chunk each
    assert stats["source"]["reads"] - reads_before == len(order), "a file was read from the source twice"
    # ... in the published order (4 prefetches in flight may swap neighbours), and before the
    # reader asked for it.
    positions = [order.index(p) for p in fetches]
    assert all(abs(i - positions[i]) <= 4 for i in range(len(positions))), positions
    assert ahead >= 0.9 * len(order), f"only {ahead} of {len(order)} were fetched before the read"
    # The daemon agrees: the reads were served by what was prefetched, and nothing prefetched
    # was dropped unread.
    prefetch = stats["prefetch"]
    assert prefetch["prefetched"] >= 0.9 * len(order), prefetch
    assert prefetch["wasted"] == 0, prefetch
    if held == "staged":
        assert prefetch["hits"] >= 0.9 * len(order), prefetch
    else:
        # Each prefetch missed RAM once before its fill; a read that missed RAM too (it came
        # before its prefetch was admitted) is a miss beyond those.
        read_misses = stats["ram"]["misses"] - prefetch["prefetched"]
        assert read_misses <= 0.1 * len(order), (stats["ram"], prefetch)
    assert stats["jobs"]["list"][0]["pending"] == 0


def epochs_trace(files, epochs, seed):
    rng = random.Random(seed)
    trace = []
    for _ in range(epochs):
        perm = files[:]
        rng.shuffle(perm)
        trace.append(perm)
    return trace


def run_trace(dataset, tmp_path, name, options, trace, publish_order):
    (tmp_path / name).mkdir()
    with Prepfs(dataset, tmp_path / name, tmp_path / (name + "-ssd"), options) as fs:
        if publish_order:
            publish(fs.mnt, "trace", ["raw/" + p for epoch in trace for p in epoch])
        for epoch in trace:
            drop_page_cache()  # the kernel's page cache would answer the re-reads otherwise
            for p in epoch:
                with open(fs.raw(p), "rb") as f:
                    f.read()
        return fs.stats()


def test_belady_with_the_published_order_beats_lru_on_the_same_trace(tmp_path):
    # One-chunk files that are not images: both policies then choose every member themselves (no
    # placement), which is the textbook comparison.
    src = tmp_path / "src"
    (src / "train").mkdir(parents=True)
    rng = random.Random(2)
    for i in range(48):
        (src / "train" / f"f{i:03d}.bin").write_bytes(rng.randbytes((1 << 20) - 64))
    files = raw_files(src)
    total = sum(os.path.getsize(os.path.join(src, p)) for p in files)
    ram = int(total * 0.3)
    trace = epochs_trace(files, epochs=4, seed=11)
    common = f"ram={ram},ssd=0,prefetch_window=0"
    lru = run_trace(src, tmp_path, "lru", common + ",eviction=lru", trace, publish_order=False)
    belady = run_trace(src, tmp_path, "belady", common + ",eviction=belady", trace, publish_order=True)
    lru_bytes, belady_bytes = lru["source"]["bytes"], belady["source"]["bytes"]
    # Both fetch the first epoch whole; after that Belady keeps what is read soonest.
    assert lru_bytes >= total and belady_bytes >= total
    assert belady_bytes < lru_bytes - 0.1 * total, (belady_bytes, lru_bytes, total)
    assert belady["jobs"]["unexpected_reads"] == 0


def resident_bits(mnt):
    with open(os.path.join(mnt, ".prepfs", "resident"), "rb") as f:
        bits = f.read()
    with open(os.path.join(mnt, ".prepfs", "samples")) as f:
        names = [l.split("\t")[0] for l in f.read().splitlines()]
    return {n: bool(bits[i // 8] >> (i % 8) & 1) for i, n in enumerate(names)}


def importance_mount(dataset, tmp_path):
    """A mount whose RAM holds 30% of the raw bytes, evicting by importance, and the files."""
    files = raw_files(dataset)
    total = sum(os.path.getsize(os.path.join(dataset, p)) for p in files)
    (tmp_path / "mnt").mkdir()
    opts = f"ram={int(total * 0.3)},ssd=0,partition=fixed:100/0/0,eviction=importance,prefetch_window=0"
    return Prepfs(dataset, tmp_path / "mnt", tmp_path / "ssd", opts), files


def test_the_importance_file_changes_what_stays_cached(dataset, tmp_path):
    mount, files = importance_mount(dataset, tmp_path)
    with mount as fs:
        with open(os.path.join(fs.mnt, ".prepfs", "samples")) as f:
            index = {l.split("\t")[0]: i for i, l in enumerate(f.read().splitlines())}
        important = set(random.Random(5).sample(files, len(files) // 5))
        with open(os.path.join(fs.mnt, ".prepfs", "importance"), "w") as f:
            for p in files:
                f.write(f"{index[p]} {9.5 if p in important else 1e-3}\n")
        for p in files + files:
            read_past_page_cache(fs.raw(p))
        resident = resident_bits(fs.mnt)
    kept_important = sum(resident[p] for p in important)
    kept_other = sum(resident[p] for p in files if p not in important)
    assert kept_important == len(important), (kept_important, len(important))
    assert kept_other < len(files) - len(important)


SAMPLER_JOB = r"""
import json, os, sys
from torchvision import datasets
from prepfs import PrepfsSampler
mnt, important = sys.argv[1], set(sys.argv[2].split(","))
ds = datasets.ImageFolder(os.path.join(mnt, "raw", "train"), loader=lambda p: p)
sampler = PrepfsSampler(ds, mnt, seed=3, mode="opportunistic", job="t", window=len(ds), refresh_every=1)
order = list(sampler)
rel = [os.path.relpath(p, os.path.join(mnt, "raw")) for p, _ in ds.samples]
sampler.report_loss(range(len(ds)), [9.5 if rel[i] in important else 1e-3 for i in range(len(ds))])
sampler.flush()
print(json.dumps([rel[i] for i in order]))
"""


# The sampler's side of the protocol against the daemon itself (tests/python checks it against a
# stand-in): its order is published under its job, an opportunistic walk takes what the daemon
# has resident first, and its reported losses reach the importance policy.
def test_the_sampler_publishes_walks_residency_first_and_reports_losses_to_the_daemon(dataset, tmp_path):
    mount, files = importance_mount(dataset, tmp_path)
    with mount as fs:
        rng = random.Random(8)
        warm = set(rng.sample(files, 10))
        for p in warm:
            with open(fs.raw(p), "rb") as f:
                f.read()
        assert {p for p, r in resident_bits(fs.mnt).items() if r} == warm
        important = set(rng.sample(files, len(files) // 5))
        res = subprocess.run(["/usr/bin/python3", "-c", SAMPLER_JOB, fs.mnt, ",".join(important)],
                             capture_output=True, text=True, timeout=300)
        assert res.returncode == 0, res.stderr
        assert "PrepfsWarning" not in res.stderr, res.stderr
        walked = json.loads(res.stdout)
        assert sorted(walked) == files
        assert set(walked[:len(warm)]) == warm, "the resident samples were not taken first"
        jobs = {j["name"]: j for j in fs.stats()["jobs"]["list"]}
        assert jobs["t"]["published"] == len(files), jobs
        for p in files + files:
            read_past_page_cache(fs.raw(p))
        resident = resident_bits(fs.mnt)
    assert sum(resident[p] for p in important) == len(important)
    assert sum(resident[p] for p in files if p not in important) < len(files) - len(important)


LOADER = r"""
import os, sys, torch
from torchvision import datasets, transforms
from prepfs import PrepfsSampler
mnt, job, mode = sys.argv[1], sys.argv[2], sys.argv[3]
ds = datasets.ImageFolder(os.path.join(mnt, "augmented", "train"), transform=transforms.ToTensor())
sampler = PrepfsSampler(ds, mnt, seed=int(sys.argv[4]), mode=mode, job=job, window=64, refresh_every=1)
loader = torch.utils.data.DataLoader(ds, batch_size=8, sampler=sampler, num_workers=2, persistent_workers=True)
seen = 0
for epoch in range(2):
    sampler.set_epoch(epoch)
    for images, _ in loader:
        seen += images.shape[0]
sampler.close()
print(seen)
"""


def two_jobs_fetch(dataset, tmp_path, mode, total):
    """Source bytes fetched while two DataLoaders in `mode` each read two epochs of augmented/."""
    name = "mnt-" + mode
    (tmp_path / name).mkdir()
    # RAM for 40% of the raw bytes: two independent shuffles would fetch most samples twice.
    opts = f"ram={int(total * 0.4)},ssd=0,partition=fixed:100/0/0,cpu=2"
    with Prepfs(dataset, tmp_path / name, tmp_path / (name + "-ssd"), opts) as fs:
        before = fs.stats()["source"]["bytes"]
        procs = [subprocess.Popen(["/usr/bin/python3", "-c", LOADER, fs.mnt, f"job{i}", mode, str(i)],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for i in range(2)]
        # Well inside meson's 600 s for the file, so a hang still reaches the cleanup (the
        # daemon's stop and its log) instead of meson killing everything.
        deadline = time.monotonic() + 240  # one budget for both loaders (and the call is made twice)
        try:
            outs = [p.communicate(timeout=max(1, deadline - time.monotonic())) for p in procs]
        except subprocess.TimeoutExpired:
            for p in procs:
                p.kill()
                p.wait()
            raise
        for p, (out, err) in zip(procs, outs):
            assert p.returncode == 0, err
            assert int(out.split()[-1]) == 2 * total_files(dataset)
        return fs.stats()["source"]["bytes"] - before


def total_files(dataset):
    return len(raw_files(dataset))


def test_two_opportunistic_dataloaders_fetch_each_sample_about_once_per_epoch(dataset, tmp_path):
    files = raw_files(dataset)
    total = sum(os.path.getsize(os.path.join(dataset, p)) for p in files)
    opportunistic = two_jobs_fetch(dataset, tmp_path, "opportunistic", total)
    plain = two_jobs_fetch(dataset, tmp_path, "plain", total)
    # Two jobs, two epochs each: the ideal is one fetch per sample per epoch (2 x total); two
    # independent shuffles share only what the cache happens to hold.
    assert opportunistic <= 1.3 * 2 * total, (opportunistic, plain, total)
    # Two concurrent plain jobs share by chance (what one fetched may still be cached when the other
    # reads it, and Belady keeps what either published order needs next); opportunistic ones share
    # on purpose. How much plain jobs share depends on their pace: measured, opportunistic fetched
    # 0.80-0.83x of plain in the release build and 0.92-0.94x in the (slower) ASan build.
    assert opportunistic < plain, (opportunistic, plain, total)


def test_a_first_mount_serves_at_once_and_a_first_epoch_opens_each_image_once(dataset, tmp_path):
    files = raw_files(dataset)
    for d in ("slow", "mnt"):
        (tmp_path / d).mkdir()
    with SlowFs(dataset, tmp_path / "slow", "--open-latency-ms", "20", "--read-latency-ms", "2") as slow:
        # A fixed plan (raw in RAM). Under partition=auto this case failed in about 1 run of 6
        # (5-60 extra opens, before and after 76d41c5), and never with the plan pinned. The likely
        # cause, not yet confirmed: a re-plan's move erases a key from RAM and from the recent
        # fills, so a probed chunk still waiting there for its read is fetched again. This case
        # is about the probes, not the plan.
        with Prepfs(tmp_path / "slow", tmp_path / "mnt", tmp_path / "ssd",
                    "ram=256M,ssd=0,prefetch_window=0,partition=fixed:100/0/0") as fs:
            # Mounted after the listing alone: the headers are read while serving.
            assert fs.stats()["index"]["unprobed"] > 0
            slow.reset()
            # The first epoch, as ImageFolder over decoded/ reads it: list, stat, read each file.
            read = 0
            for dirpath, _, names in os.walk(os.path.join(fs.mnt, "decoded", "train")):
                for n in names:
                    with open(os.path.join(dirpath, n), "rb") as f:
                        assert f.read(2) == b"P6"
                        f.read()
                    read += 1
            assert read == len(files)
            opens = slow.counters()["opens"]
            wait_for(lambda: fs.stats()["index"]["unprobed"] == 0, what="every header read")
    assert opens <= len(files), f"{opens} source opens for {len(files)} images"


def test_jobs_waiting_for_the_sample_list_leave_the_control_files_answering(dataset, tmp_path):
    # .prepfs/samples needs every header, so on a lazy first mount its open waits until all are
    # read. The control session had 4 workers: four ranks building their samplers at once held
    # them all, and stats, plan and the other jobs' orders hung until the headers were read.
    for d in ("slow", "mnt"):
        (tmp_path / d).mkdir()
    with SlowFs(dataset, tmp_path / "slow", "--open-latency-ms", "100") as slow:
        with Prepfs(tmp_path / "slow", tmp_path / "mnt", tmp_path / "ssd", "ram=256M,ssd=0,prefetch_window=0") as fs:
            assert fs.stats()["index"]["unprobed"] > 0
            slow.reset()
            done = []

            def read_samples():
                with open(os.path.join(fs.mnt, ".prepfs", "samples"), "rb") as f:
                    f.read()
                done.append("samples")

            # The control session's requests in flight, as the kernel counts them (fusectl; the
            # daemon mounts it): the ranks' opens are proven waiting in the daemon, not assumed
            # to be after a sleep (a slow machine let stats pass on a free worker).
            conn = os.minor(os.stat(os.path.join(fs.mnt, ".prepfs")).st_dev)
            waiting = f"/sys/fs/fuse/connections/{conn}/waiting"
            if not os.path.exists(waiting):  # the daemon mounts fusectl where it can; try once more
                subprocess.run(["mount", "-t", "fusectl", "fusectl", "/sys/fs/fuse/connections"], capture_output=True)
            assert os.path.exists(waiting), f"{waiting} is missing: fusectl is not mounted"
            ranks = [threading.Thread(target=read_samples) for _ in range(6)]
            for t in ranks:
                t.start()
            wait_for(lambda: int(open(waiting).read()) >= 6, what="every rank's open waiting in the daemon")
            stats = fs.stats()
            done.append("stats")
            for t in ranks:
                t.join(timeout=120)
            assert done[0] == "stats", f"stats answered only after the sample list: {done}"
            assert stats["index"]["unprobed"] > 0, "stats answered only once every header was read"
            assert done.count("samples") == 6
