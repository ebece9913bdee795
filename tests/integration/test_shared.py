"""The shared tier on real memcached servers: two or three prepfs daemons on different
mountpoints over one slow source (the simulator counts every open and read), the servers started
here on loopback, or on the far side of veth links in network namespaces."""
import hashlib
import os
import random
import shutil
import threading
import time

import pytest

from memcached_harness import Memcached, Network, shared_option
from prepfs_harness import Prepfs, SlowFs, drop_page_cache, gen_images, sha256_file, wait_for


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    root = tmp_path_factory.mktemp("shared")
    gen_images(root / "src", 3, 8)
    rng = random.Random(3)
    # Files that are not images, one larger than a chunk and than a memcached item: split values.
    (root / "src" / "train" / "big.bin").write_bytes(rng.randbytes(3_300_000))
    (root / "src" / "labels.txt").write_text("\n".join(str(i) for i in range(1000)))
    return root


def files_of(src):
    return sorted(os.path.relpath(os.path.join(d, n), src) for d, _, ns in os.walk(src) for n in ns)


def images_of(src):
    return [r for r in files_of(src) if r.lower().endswith((".jpeg", ".jpg"))]


def digests(root, rels):
    return {r: sha256_file(os.path.join(root, r)) for r in rels}


def decoded_name(rel):
    return rel.rsplit(".", 1)[0] + ".ppm"


class Cluster:
    """Daemons over one slowfs source, each with its own mountpoint and ssd_dir."""

    def __init__(self, dataset, tmp, servers, options="", slow_args=(), wrappers=None):
        self.tmp, self.servers, self.options = tmp, servers, options
        (tmp / "slow").mkdir()
        self.access_log = tmp / "access.log"
        self.slow = SlowFs(dataset / "src", tmp / "slow", "--access-log", str(self.access_log), *slow_args)
        self.daemons = []
        self.wrappers = wrappers or {}

    def start(self, extra=""):
        i = len(self.daemons)
        mnt, ssd = self.tmp / f"mnt{i}", self.tmp / f"ssd{i}"
        mnt.mkdir()
        ssd.mkdir(mode=0o700)
        opts = ",".join(o for o in (shared_option(self.servers), "ram=256M,ssd=0", self.options, extra) if o)
        d = Prepfs(self.tmp / "slow", mnt, ssd, opts, wrapper=self.wrappers.get(i, ()))
        self.daemons.append(d)
        return d

    def opened(self):
        """Source files opened since the log was last cleared."""
        return {" ".join(f[1:]) for f in SlowFs.access_log(self.access_log) if f[0] == "open"}

    def clear_log(self):
        open(self.access_log, "w").close()

    def stop(self):
        try:
            for d in self.daemons:
                d.stop()
        finally:
            self.slow.stop()  # also when a daemon's stop failed: the source's mount goes too


@pytest.fixture
def servers():
    started = [Memcached(), Memcached()]
    yield started
    for m in started:
        m.stop()


def published(d):
    """Waits until d has stored what it filled: it publishes after its readers have their bytes."""
    wait_for(lambda: d.stats()["shared"]["publish_queue"]["entries"] == 0, timeout=30,
             what="the daemon's publishing queue emptied")
    assert d.stats()["shared"]["publish_queue"]["dropped"] == 0


def test_second_daemon_reads_what_the_first_read_with_zero_source_opens(dataset, tmp_path, servers):
    src = dataset / "src"
    want = digests(src, files_of(src))
    c = Cluster(dataset, tmp_path, servers)
    try:
        a = c.start()
        assert digests(a.raw(), want) == want
        published(a)
        assert a.stats()["shared"]["by_form"]["raw"]["published"] > 0
        c.slow.reset()
        b = c.start()
        assert digests(b.raw(), want) == want
        counters = c.slow.counters()
        assert counters["opens"] == 0 and counters["reads"] == 0, counters
        st = b.stats()
        assert st["source"]["bytes"] == 0
        assert st["shared"]["by_form"]["raw"]["hits"] > 0
        assert "raw" in st["shared"]["forms"]
        # prepctl plan says what the cluster shares and what a lookup measured.
        plan = open(os.path.join(b.mnt, ".prepfs", "plan")).read()
        assert "forms shared: raw" in plan and "(auto;" in plan and "raw shared (always" in plan, plan
        assert "decoded shared:" in plan or "decoded not shared:" in plan, plan
        assert "lookups" in plan and "server 127.0.0.1:" in plan and ": up," in plan, plan
    finally:
        c.stop()


def test_decoded_on_the_second_daemon_renders_nothing_the_first_decoded(dataset, tmp_path, servers):
    src = dataset / "src"
    imgs = images_of(src)
    # Pixels shared whatever the measurements say (auto may decode here on a loaded machine).
    c = Cluster(dataset, tmp_path, servers, options="shared_forms=raw/decoded")
    try:
        a = c.start()
        first = digests(os.path.join(a.mnt, "decoded"), [decoded_name(r) for r in imgs])
        assert a.stats()["transform"]["decoded"] == len(imgs)
        published(a)
        c.clear_log()
        b = c.start()
        second = digests(os.path.join(b.mnt, "decoded"), [decoded_name(r) for r in imgs])
        assert second == first
        st = b.stats()
        assert st["transform"]["decoded"] == 0, st["transform"]
        assert st["shared"]["by_form"]["decoded"]["hits"] >= len(imgs)
        # No image was opened (the files that are no images were, to learn that they are not).
        assert not c.opened() & set(imgs), c.opened()
        # augmented/ on a third daemon starts from the shared pixels: no decode from JPEG at all.
        d = c.start()
        for r in imgs:
            with open(os.path.join(d.mnt, "augmented", decoded_name(r)), "rb") as f:
                assert f.read(2) == b"P6"
        st = d.stats()
        assert st["transform"]["decoded"] == 0
        # Every render came from pixels: the opens' own, and the next variants rendered ahead.
        assert st["transform"]["augmented_from_decoded"] >= len(imgs)
        assert st["transform"]["augmented_from_decoded"] == st["transform"]["augmented"], st["transform"]
        assert not c.opened() & set(imgs), c.opened()
    finally:
        c.stop()


def test_daemons_in_separate_network_namespaces_share_across_veth_links(dataset, tmp_path):
    tag = str(os.getpid() % 100000)
    net = Network(tag, nodes=2)
    hub_servers = []
    c = None
    try:
        hub_servers = [Memcached(host=net.hub_address, port=11311, netns=net.hub),
                       Memcached(host=net.hub_address, port=11312, netns=net.hub)]
        src = dataset / "src"
        want = digests(src, files_of(src))
        c = Cluster(dataset, tmp_path, hub_servers,
                    wrappers={0: net.nodes[0].prefix(), 1: net.nodes[1].prefix()})
        a = c.start()
        assert digests(a.raw(), want) == want
        published(a)  # b's header probes look the shared tier up without waiting on leases
        c.slow.reset()
        b = c.start()
        assert digests(b.raw(), want) == want
        assert c.slow.counters()["opens"] == 0
        assert b.stats()["shared"]["by_form"]["raw"]["hits"] > 0
        # Each daemon ran in its own namespace, whose only way out is its veth link.
        mine = os.readlink("/proc/self/ns/net")
        spaces = {os.readlink(f"/proc/{d.proc.pid}/ns/net") for d in (a, b)}
        assert len(spaces) == 2 and mine not in spaces
    finally:
        if c:
            c.stop()
        for m in hub_servers:
            m.stop()
        net.delete()


def test_killing_a_server_mid_epoch_loses_no_bytes_and_recovers_without_remount(dataset, tmp_path):
    src = dataset / "src"
    rels = files_of(src)
    want = digests(src, rels)

    def evict(d):
        """The daemon's own tiers and the kernel's pages of its files: the next read asks it."""
        with open(os.path.join(d.mnt, ".prepfs", "evict"), "w") as f:
            f.write("1")
        drop_page_cache()

    # Started inside the try: a server or the cluster that fails to start stops what did start.
    three, c = [], None
    try:
        for _ in range(3):
            three.append(Memcached())
        c = Cluster(dataset, tmp_path, three, options="shared_timeout=2")
        a = c.start()
        assert digests(a.raw(), want) == want
        published(a)  # b's header probes look the shared tier up without waiting on leases
        c.slow.reset()
        b = c.start()
        # Eight readers on b; one server dies a third of the way through the epoch.
        wrong, errors = [], []
        order = list(rels)
        random.Random(5).shuffle(order)
        done = [0]
        lock = threading.Lock()

        def reader(part):
            for r in part:
                try:
                    if sha256_file(os.path.join(b.raw(), r)) != want[r]:
                        wrong.append(r)
                except OSError as e:
                    errors.append(f"{r}: {e}")
                with lock:
                    done[0] += 1

        threads = [threading.Thread(target=reader, args=(order[i::8],)) for i in range(8)]
        for t in threads:
            t.start()
        wait_for(lambda: done[0] >= len(order) // 3, timeout=60, what="a third of the epoch")
        three[1].kill()
        for t in threads:
            t.join()
        assert wrong == [] and errors == []
        # The next epoch (b's own cache dropped): what the dead server held comes from the source,
        # the rest from the two live servers; readers see the right bytes and no error.
        evict(b)
        c.slow.reset()
        assert digests(b.raw(), want) == want
        fetched = c.slow.counters()["opens"]
        assert 0 < fetched < len(rels), fetched
        st = b.stats()["shared"]
        assert sum(f["errors"] for f in st["by_form"].values()) > 0
        # Back on its port, empty: after a retry period it is used again, without a remount.
        three[1].start()

        def answered_by_the_shared_tier_again():
            evict(b)
            assert digests(b.raw(), want) == want  # refills what the restarted server lost, and publishes it
            evict(b)
            c.slow.reset()
            assert digests(b.raw(), want) == want
            return c.slow.counters()["opens"] == 0  # every key answered by the shared tier again

        # Once its retry period is over, in prepfs and in libmemcached (whose clock counts whole
        # seconds): a fixed sleep of about one period came up short on a loaded machine. Right
        # bytes on every pass, whatever the servers' state.
        wait_for(answered_by_the_shared_tier_again, timeout=30,
                 what="every key answered by the shared tier again: " + str(b.stats()["shared"]["servers"]))
        # Every server shown up again. "Up" is "no failure within the retry period": a call that
        # timed out on a loaded machine (ASan) marks a live server down for that long, so this
        # waits a few periods rather than sampling one moment; a server that keeps failing stays
        # down and fails the wait.
        wait_for(lambda: all(s["up"] for s in b.stats()["shared"]["servers"]), timeout=10,
                 what="every shared-tier server shown up again: " + str(b.stats()["shared"]["servers"]))
    finally:
        if c:
            c.stop()
        for m in three:
            m.stop()


def corrupt_every_value(server):
    n = 0
    for key in server.keys():
        if key.endswith(":lease"):
            continue
        value = server.get(key)
        if value is None or len(value) < 100:
            continue
        v = bytearray(value)
        v[len(v) // 2 + 40] ^= 0x5A  # a payload byte (heads carry 80 bytes of header first)
        server.set(key, bytes(v))
        n += 1
    return n


def test_values_corrupted_inside_memcached_are_detected_and_refetched(dataset, tmp_path, servers):
    src = dataset / "src"
    want = digests(src, files_of(src))
    c = Cluster(dataset, tmp_path, servers, options="shared_forms=raw")
    try:
        a = c.start()
        assert digests(a.raw(), want) == want
        published(a)
        corrupted = sum(corrupt_every_value(m) for m in servers)
        assert corrupted >= len(want) - 1  # every entry but the empty ones
        c.slow.reset()
        b = c.start()
        assert digests(b.raw(), want) == want  # the source's bytes, never the corrupt ones
        st = b.stats()["shared"]["by_form"]["raw"]
        assert st["corrupt"] > 0 and st["hits"] == 0, st
        assert c.slow.counters()["opens"] > 0
        # b published good values again: a third daemon reads them all without the source.
        published(b)
        c.slow.reset()
        d = c.start()
        assert digests(d.raw(), want) == want
        assert c.slow.counters()["opens"] == 0
        assert d.stats()["shared"]["by_form"]["raw"]["corrupt"] == 0
    finally:
        c.stop()


def test_a_lease_holder_that_dies_mid_fill_stalls_the_others_at_most_the_lease_ttl(dataset, tmp_path, servers):
    src = dataset / "src"
    rel = images_of(src)[0]  # one chunk, one source read
    want = sha256_file(src / rel)
    ttl = 3
    # Every source read takes 1.5 s: the holder is still fetching when it is killed.
    c = Cluster(dataset, tmp_path, servers, options=f"shared_lease_ttl={ttl},shared_forms=raw",
                slow_args=("--read-latency-ms", "1500"))
    try:
        a = c.start()
        b = c.start()
        def read_on_a():
            try:
                open(os.path.join(a.raw(), rel), "rb").read()
            except OSError:
                pass  # a is killed under this read

        reader = threading.Thread(target=read_on_a, daemon=True)
        reader.start()
        wait_for(lambda: any(k.endswith(":lease") for m in servers for k in m.keys()), timeout=10,
                 what="the first daemon's lease")
        a.stop(sig=9)
        t0 = time.monotonic()
        assert sha256_file(os.path.join(b.raw(), rel)) == want
        waited = time.monotonic() - t0
        st = b.stats()["shared"]["by_form"]["raw"]
        assert st["lease_waits"] >= 1, st
        # At most the lease's TTL, then b's own fetch (1.5 s), plus slack for a loaded machine.
        assert waited < ttl + 1.5 + 5, waited
    finally:
        c.stop()
