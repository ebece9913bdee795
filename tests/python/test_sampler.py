"""PrepfsSampler: epochs, ranks, modes, resume, and the daemon side through control files in a
temporary directory (written in the daemon's formats; the order and importance files are plain
files here, so what the sampler wrote can be read back)."""
import collections
import io
import itertools
import os
import pickle
import random
import tempfile
import warnings

import pytest
import torch
from hypothesis import given, settings, strategies as st
from torch.utils.data import DataLoader, DistributedSampler, Subset, TensorDataset
from torchvision.datasets import ImageFolder

from prepfs import Indexed, PrepfsSampler, PrepfsWarning

# Each example of the sampler-level properties builds samplers (and some a mount directory).
few = settings(max_examples=60)

MODES = ("plain", "opportunistic", "importance")
IMAGE_EXT = {"raw": ".JPEG", "decoded": ".ppm", "augmented": ".ppm"}


class FakeMount:
    """A directory laid out like a prepfs mount: .prepfs/samples in a daemon order that differs
    from ImageFolder's (so dataset and sample indices never coincide by accident), a resident
    bitmap the test rewrites, and order/importance files that collect what the sampler writes."""

    def __init__(self, root, n, classes=3, files=False, seed=1):
        self.root = str(root)
        names = [f"train/c{i % classes}/img_{i:04d}" for i in range(n)]
        random.Random(seed).shuffle(names)  # the daemon's sample index order
        self.rows = [(f"{x}.JPEG", f"{x}.ppm") for x in names]
        self.n = n
        ctl = os.path.join(self.root, ".prepfs")
        os.makedirs(ctl)
        with open(os.path.join(ctl, "samples"), "w") as f:
            f.writelines(f"{r}\t{i}\n" for r, i in self.rows)
        for name in ("order", "importance"):
            open(os.path.join(ctl, name), "w").close()
        self.set_resident(())
        if files:
            for view in ("raw", "decoded", "augmented"):
                for r, i in self.rows:
                    p = os.path.join(self.root, view, r if view == "raw" else i)
                    os.makedirs(os.path.dirname(p), exist_ok=True)
                    with open(p, "wb") as f:
                        f.write(b"x" * (1 + len(p) % 5))

    def sid(self, view, rel):
        """The daemon's sample index of a path relative to the view root."""
        col = 0 if view == "raw" else 1
        return [row[col] for row in self.rows].index(rel)

    def path(self, view, sample):
        r, i = self.rows[sample]
        return os.path.join(self.root, view, r if view == "raw" else i)

    def set_resident(self, samples):
        data = bytearray((self.n + 7) // 8)
        for s in samples:
            data[s // 8] |= 1 << (s % 8)
        with open(os.path.join(self.root, ".prepfs", "resident"), "wb") as f:
            f.write(data)

    def orders(self):
        """{job: lines published under it, in order}."""
        out, job = collections.defaultdict(list), None
        with open(os.path.join(self.root, ".prepfs", "order")) as f:
            for line in f.read().splitlines():
                if line.startswith("job "):
                    job = line[4:].split(" ")[0]  # "job NAME [opportunistic]"
                else:
                    out[job].append(line)
        return out

    def importance(self):
        with open(os.path.join(self.root, ".prepfs", "importance")) as f:
            return [(int(a), float(b)) for a, b in (l.split(" ") for l in f.read().splitlines())]


def file_size(path):  # an ImageFolder loader that needs no image decoder
    return os.path.getsize(path)


def distributed_order(n, seed, epoch, r=1, rank=0, drop_last=False):
    ds = DistributedSampler(range(n), num_replicas=r, rank=rank, seed=seed, drop_last=drop_last)
    ds.set_epoch(epoch)
    return list(ds)


def paths_sampler(mount, view="decoded", **kw):
    """A sampler over the mount's samples in their daemon order, by explicit paths."""
    paths = [mount.path(view, s) for s in range(mount.n)]
    return PrepfsSampler(TensorDataset(torch.arange(mount.n)), mount.root, paths=paths, **kw)


def quiet(fn, *a, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrepfsWarning)
        return fn(*a, **kw)


# ---------------------------------------------------------------------------- views and publishing

@pytest.mark.parametrize("view", ["raw", "decoded", "augmented"])
def test_imagefolder_over_each_view_publishes_what_it_yields(tmp_path, view):
    m = FakeMount(tmp_path, 24, files=True)
    ds = ImageFolder(os.path.join(m.root, view, "train"), loader=file_size)
    assert len(ds) == 24
    s = PrepfsSampler(ds, m.root, seed=5, job="t")
    seq = list(s)
    assert seq == distributed_order(24, 5, 0)
    expect = [os.path.relpath(ds.samples[i][0], m.root) for i in seq]
    assert all(p.startswith(view + "/train/") and p.endswith(IMAGE_EXT[view]) for p in expect)
    assert m.orders() == {"t": ["reset"] + expect}


@pytest.mark.parametrize("view", ["raw", "decoded", "augmented"])
def test_dataset_indices_map_to_the_daemons_sample_indices(tmp_path, view):
    # Through the public side effects: importance is written by daemon sample index.
    m = FakeMount(tmp_path, 20, files=True)
    ds = ImageFolder(os.path.join(m.root, view, "train"), loader=file_size)
    s = PrepfsSampler(ds, m.root, importance_flush=1)
    s.report_loss([3, 11], [0.5, 2.0])
    rel = [os.path.relpath(ds.samples[i][0], os.path.join(m.root, view)) for i in (3, 11)]
    assert sorted(m.importance()) == sorted([(m.sid(view, rel[0]), 0.5), (m.sid(view, rel[1]), 2.0)])


def test_subset_and_indexed_wrappers_are_looked_through(tmp_path):
    m = FakeMount(tmp_path, 12, files=True)
    base = ImageFolder(os.path.join(m.root, "raw", "train"), loader=file_size)
    sub = Subset(base, [10, 2, 7, 5])
    s = PrepfsSampler(Indexed(sub), m.root, job="sub")
    seq = list(s)
    assert sorted(seq) == [0, 1, 2, 3]
    assert m.orders()["sub"][1:] == [os.path.relpath(base.samples[sub.indices[i]][0], m.root) for i in seq]


def test_each_epoch_resets_then_publishes_its_order(tmp_path):
    m = FakeMount(tmp_path, 10)
    s = paths_sampler(m, job="j")
    e0 = list(s)
    s.set_epoch(1)
    e1 = list(s)
    rel = lambda i: os.path.relpath(m.path("decoded", i), m.root)
    assert m.orders()["j"] == ["reset"] + [rel(i) for i in e0] + ["reset"] + [rel(i) for i in e1]
    s.close()
    assert m.orders()["j"][-1] == "end"


def test_ranks_publish_under_their_own_names(tmp_path):
    m = FakeMount(tmp_path, 10)
    seqs = [list(paths_sampler(m, job="big", num_replicas=3, rank=r)) for r in range(3)]
    orders = m.orders()
    assert set(orders) == {"big.r0", "big.r1", "big.r2"}
    for r in range(3):
        assert orders[f"big.r{r}"] == ["reset"] + [os.path.relpath(m.path("decoded", i), m.root) for i in seqs[r]]


def test_default_job_name_has_pid_and_rank(tmp_path):
    m = FakeMount(tmp_path, 4)
    list(paths_sampler(m, num_replicas=2, rank=1))
    assert list(m.orders()) == [f"pid{os.getpid()}.r1"]


def test_publish_false_writes_no_order(tmp_path):
    m = FakeMount(tmp_path, 6)
    list(paths_sampler(m, publish=False))
    assert m.orders() == {}


# ---------------------------------------------------------------------------------- epochs, ranks

@few
@given(n=st.integers(0, 120), seed=st.integers(0, 10**6), epochs=st.integers(1, 3), mode=st.sampled_from(MODES),
       extra=st.floats(0, 1), losses_seed=st.integers(0, 100))
def test_one_rank_visits_each_index_once_per_epoch(n, seed, epochs, mode, extra, losses_seed):
    s = PrepfsSampler(range(n), None, seed, mode=mode, extra=extra)
    rng = random.Random(losses_seed)
    for e in range(epochs):
        s.set_epoch(e)
        seq = list(s)
        assert len(seq) == len(s)
        counts = collections.Counter(seq)
        assert set(counts) == set(range(n))
        if mode == "importance":
            # every index once, plus floor(extra * n) distinct ones a second time
            assert sum(c - 1 for c in counts.values()) == int(extra * n)
            assert max(counts.values(), default=1) <= 2
            # what the epoch visits after the first is ranked by the losses reported in between
            idx = rng.sample(range(n), k=n // 2)
            s.report_loss(idx, [rng.random() * 5 for _ in idx])
        else:
            assert seq == distributed_order(n, seed, e)  # same order as DistributedSampler


@few
@given(n=st.integers(0, 120), seed=st.integers(0, 10**6), r=st.integers(1, 6), mode=st.sampled_from(MODES),
       drop_last=st.booleans(), epoch=st.integers(0, 5))
def test_ranks_partition_each_epoch(n, seed, r, mode, drop_last, epoch):
    shards = []
    for rank in range(r):
        s = PrepfsSampler(range(n), None, seed, num_replicas=r, rank=rank, mode=mode, drop_last=drop_last, extra=0.3)
        s.set_epoch(epoch)
        seq = list(s)
        assert len(seq) == len(s)
        # The rank's share is DistributedSampler's; importance adds extra visits within the share only.
        share = distributed_order(n, seed, epoch, r, rank, drop_last)
        assert set(seq) == set(share) and collections.Counter(seq) >= collections.Counter(share)
        shards.append(share)
    flat = [i for sh in shards for i in sh]
    if drop_last:
        assert len(flat) == len(set(flat)) and n - len(flat) < r
    else:
        assert set(flat) == set(range(n))
        assert len(flat) - n == (-n) % r  # padding: exactly enough repeats to even the ranks out


def test_rank_and_world_default_to_one_process():
    s = PrepfsSampler(range(5), None)
    assert (s.num_replicas, s.rank) == (1, 0)
    with pytest.raises(ValueError, match="rank 2"):
        PrepfsSampler(range(5), None, num_replicas=2, rank=2)


def test_bad_arguments_are_refused_clearly(tmp_path):
    with pytest.raises(ValueError, match="mode"):
        PrepfsSampler(range(5), None, mode="fast")
    with pytest.raises(ValueError, match="window"):
        PrepfsSampler(range(5), None, window=0)
    with pytest.raises(ValueError, match="max_bias"):
        PrepfsSampler(range(5), None, max_bias=0.5)
    with pytest.raises(ValueError, match="job name"):
        PrepfsSampler(range(5), None, job="my job")
    with pytest.raises(TypeError, match="paths"):
        PrepfsSampler(TensorDataset(torch.arange(5)), str(tmp_path))
    with pytest.raises(ValueError, match="3 paths for a dataset of 5"):
        PrepfsSampler(range(5), str(tmp_path), paths=["a", "b", "c"])


# ---------------------------------------------------------------------------------- opportunistic

def test_opportunistic_takes_resident_samples_first(tmp_path):
    m = FakeMount(tmp_path, 30)
    cached = {2, 9, 17, 28}  # sample indices == dataset indices with paths_sampler
    m.set_resident(cached)
    s = paths_sampler(m, seed=4, mode="opportunistic", window=30)
    perm = distributed_order(30, 4, 0)
    assert list(s) == [i for i in perm if i in cached] + [i for i in perm if i not in cached]
    # published as an opportunistic job: a set of upcoming reads, not an exact sequence
    with open(os.path.join(m.root, ".prepfs", "order")) as f:
        assert f"job {s.job} opportunistic" in f.read().splitlines()
    # and what it publishes is the plain order: the daemon prefetches in that order
    assert m.orders()[s.job][1:] == [os.path.relpath(m.path("decoded", i), m.root) for i in perm]


def test_opportunistic_maps_residency_through_the_daemon_index(tmp_path):
    m = FakeMount(tmp_path, 15, files=True)
    ds = ImageFolder(os.path.join(m.root, "raw", "train"), loader=file_size)
    target = 6  # a dataset index; make exactly its sample resident
    m.set_resident({m.sid("raw", os.path.relpath(ds.samples[target][0], os.path.join(m.root, "raw")))})
    s = PrepfsSampler(ds, m.root, mode="opportunistic", window=15)
    assert next(iter(s)) == target


def test_opportunistic_rereads_residency_every_refresh(tmp_path):
    m = FakeMount(tmp_path, 40)
    s = paths_sampler(m, seed=2, mode="opportunistic", window=40, refresh_every=5)
    perm = distributed_order(40, 2, 0)
    it = iter(s)
    first = list(itertools.islice(it, 5))
    assert first == perm[:5]  # nothing cached
    late = perm[30]
    m.set_resident({late})  # another job fetched it: seen at the next refresh
    assert next(it) == late
    rest = list(it)
    assert sorted(first + [late] + rest) == list(range(40))


def test_opportunistic_without_a_daemon_is_the_plain_order(tmp_path):
    s = quiet(PrepfsSampler, range(50), str(tmp_path), paths=[str(tmp_path / f"{i}") for i in range(50)],
              mode="opportunistic", seed=8)
    assert list(s) == distributed_order(50, 8, 0)


# ------------------------------------------------------------------------------------- importance

def test_report_loss_is_written_in_batches(tmp_path):
    m = FakeMount(tmp_path, 20)
    s = paths_sampler(m, mode="importance", importance_flush=5)
    s.report_loss(torch.tensor([1, 2, 3]), torch.tensor([0.5, 1.5, 2.5]))
    assert m.importance() == []  # pending, not a write per call
    s.report_loss([4, 5, 3], [4.0, 5.0, 3.25])  # 3 again: the later value replaces it
    assert sorted(m.importance()) == [(1, 0.5), (2, 1.5), (3, 3.25), (4, 4.0), (5, 5.0)]
    s.report_loss([7], [0.125])
    s.flush()
    assert m.importance()[-1] == (7, 0.125)


def test_pending_losses_are_written_when_the_next_epoch_starts(tmp_path):
    m = FakeMount(tmp_path, 10)
    s = paths_sampler(m, mode="importance")
    list(s)
    s.report_loss([0], [1.0])
    assert m.importance() == []
    iter(s)
    assert m.importance() == [(0, 1.0)]


def test_report_loss_accepts_grad_tensors_and_refuses_what_it_cannot_use():
    s = PrepfsSampler(range(10), None, mode="importance")
    loss = torch.tensor([0.5, 1.0], requires_grad=True) * 2
    s.report_loss(torch.tensor([1, 2]), loss)
    with pytest.raises(ValueError, match="reduction='none'"):
        s.report_loss([1, 2], torch.tensor(0.7))
    with pytest.raises(ValueError, match="not a finite non-negative"):
        s.report_loss([1], [float("nan")])
    with pytest.raises(IndexError, match="out of range"):
        s.report_loss([10], [1.0])


def test_importance_extras_favour_high_loss_and_unseen_samples():
    n = 40
    s = PrepfsSampler(range(n), None, seed=3, mode="importance", extra=0.25, max_bias=50.0)
    s.report_loss(range(n), [10.0 if i < 5 else 0.1 for i in range(n)])
    hits = collections.Counter()
    for e in range(20):
        s.set_epoch(e)
        hits.update(i for i, c in collections.Counter(s).items() if c == 2)
    top = sum(hits[i] for i in range(5)) / 5
    rest = sum(hits[i] for i in range(5, n)) / (n - 5)
    assert top > 2 * rest  # 10 extras of 40 per epoch: uniform would give top == rest
    # A sample never reported ranks above every reported one.
    t = PrepfsSampler(range(n), None, seed=3, mode="importance", extra=0.25, max_bias=50.0)
    t.report_loss([i for i in range(n) if i != 17], [10.0] * (n - 1))
    seen17 = 0
    for e in range(20):
        t.set_epoch(e)
        seen17 += collections.Counter(t)[17] == 2
    assert seen17 > 20 * 10 / n * 2


# ------------------------------------------------------------------------------------------ resume

def roundtrip(state):
    buf = io.BytesIO()
    torch.save(state, buf)  # as a checkpoint would carry it
    buf.seek(0)
    return torch.load(buf)


@few
@given(n=st.integers(1, 80), mode=st.sampled_from(MODES), r=st.integers(1, 3), data=st.data(),
       seed=st.integers(0, 1000), epoch=st.integers(0, 3), window=st.integers(1, 20))
def test_resume_mid_epoch_neither_repeats_nor_skips(n, mode, r, data, seed, epoch, window):
    rank = data.draw(st.integers(0, r - 1))
    churn = data.draw(st.integers(0, 1000))  # drives the residency the "daemon" reports
    with tempfile.TemporaryDirectory() as tmp:
        m = FakeMount(tmp, n)
        kw = dict(seed=seed, num_replicas=r, rank=rank, mode=mode, window=window, refresh_every=3, extra=0.4,
                  job="resume")
        rng = random.Random(churn)
        losses = [rng.random() for _ in range(n)]

        def fresh():
            s = paths_sampler(m, **kw)
            s.report_loss(range(0, n, 2), losses[::2])  # importance known before the epoch
            s.set_epoch(epoch)
            return s

        full = list(fresh())  # uninterrupted (residency still empty: the plain order)
        k = data.draw(st.integers(0, len(full)))
        u = data.draw(st.integers(0, k))

        a = fresh()
        it = iter(a)
        first = []
        for _ in range(k):
            first.append(next(it))
            m.set_resident(rng.sample(range(n), rng.randint(0, n)))  # the cache changes under the job
        # Losses reported mid-epoch rank the next epoch; this one keeps the extras it drew.
        a.report_loss(range(1, n, 2), [10 + x for x in losses[1::2]])
        state = roundtrip(a.state_dict(unconsumed=u))
        consumed = first[:k - u]

        b = paths_sampler(m, **kw)  # a new process would start like this: no losses reported yet
        b.load_state_dict(state)
        b.set_epoch(epoch)  # the usual loop calls set_epoch on resume; same epoch keeps the state
        rest = list(b)
        if mode == "opportunistic":
            assert collections.Counter(consumed + rest) == collections.Counter(full)
        else:
            assert consumed + rest == full
        # The next epoch is a fresh one, ranked by the same losses on both sides.
        for s in (a, b):
            s.set_epoch(epoch + 1)
        m.set_resident(())
        assert list(a) == list(b)


def test_state_taken_right_after_loading_still_resumes(tmp_path):
    s = PrepfsSampler(range(30), None, seed=1)
    it = iter(s)
    head = [next(it) for _ in range(12)]
    st1 = s.state_dict()
    t = PrepfsSampler(range(30), None, seed=1)
    t.load_state_dict(st1)
    st2 = t.state_dict()  # a checkpoint before iterating again
    u = PrepfsSampler(range(30), None, seed=1)
    u.load_state_dict(st2)
    assert head + list(u) == distributed_order(30, 1, 0)


def test_a_finished_epoch_resumes_nothing_and_set_epoch_elsewhere_drops_the_state():
    s = PrepfsSampler(range(20), None, seed=1)
    s.set_epoch(4)
    list(s)
    t = PrepfsSampler(range(20), None, seed=1)
    t.load_state_dict(s.state_dict())
    assert t.epoch == 4 and list(t) == distributed_order(20, 1, 4)  # a whole epoch again, not an empty one

    it = iter(s)
    next(it)
    mid = s.state_dict()
    t.load_state_dict(mid)
    t.set_epoch(5)  # moving on to another epoch abandons the saved one
    assert list(t) == distributed_order(20, 1, 5)


def test_resume_in_a_new_process_publishes_only_the_rest(tmp_path):
    m = FakeMount(tmp_path, 12)
    s = paths_sampler(m, seed=2, job="r")
    it = iter(s)
    head = [next(it) for _ in range(5)]
    t = paths_sampler(m, seed=2, job="r")
    t.load_state_dict(s.state_dict())
    rest = list(t)
    rel = lambda i: os.path.relpath(m.path("decoded", i), m.root)
    published = m.orders()["r"]
    assert published[-len(rest) - 1:] == ["reset"] + [rel(i) for i in rest]
    assert head + rest == distributed_order(12, 2, 0)


def test_load_state_dict_refuses_a_state_from_another_setup():
    s = PrepfsSampler(range(20), None, seed=1, num_replicas=2, rank=0)
    state = s.state_dict()
    for kw, what in [(dict(seed=2), "seed"), (dict(num_replicas=4), "num_replicas"), (dict(rank=1), "rank")]:
        args = dict(seed=1, num_replicas=2, rank=0)
        args.update(kw)
        with pytest.raises(ValueError, match=what):
            PrepfsSampler(range(20), None, **args).load_state_dict(state)
    with pytest.raises(ValueError, match="dataset_len"):
        PrepfsSampler(range(21), None, seed=1, num_replicas=2, rank=0).load_state_dict(state)
    with pytest.raises(ValueError, match="cannot resume"):
        PrepfsSampler(range(20), None, seed=1, num_replicas=2, rank=0, mode="importance").load_state_dict(state)
    # plain and opportunistic walk the same sequence: a resume may switch between them
    PrepfsSampler(range(20), None, seed=1, num_replicas=2, rank=0, mode="opportunistic").load_state_dict(state)


def test_unconsumed_cannot_reach_past_the_epoch():
    s = PrepfsSampler(range(10), None)
    with pytest.raises(ValueError, match="no epoch is in progress"):
        s.state_dict(unconsumed=1)
    it = iter(s)
    next(it)
    with pytest.raises(ValueError, match="only the last 1"):
        s.state_dict(unconsumed=2)


# ---------------------------------------------------------------------------- no daemon, failures

def test_a_plain_directory_samples_plainly_and_says_so_once(tmp_path):
    paths = [str(tmp_path / "decoded" / f"{i}.ppm") for i in range(25)]
    with pytest.warns(PrepfsWarning, match="no prepfs daemon") as caught:
        s = PrepfsSampler(range(25), str(tmp_path), seed=6, paths=paths, mode="importance")
        for e in range(3):
            s.set_epoch(e)
            seq = list(s)
            assert sorted(set(seq)) == list(range(25))
            s.report_loss(seq[:10], [1.0] * 10)
        s.flush()
        s.close()
    assert len(caught) == 1
    assert not os.path.exists(tmp_path / ".prepfs")


def test_a_failing_order_write_warns_once_and_sampling_goes_on(tmp_path):
    m = FakeMount(tmp_path, 10)
    os.remove(os.path.join(m.root, ".prepfs", "order"))
    os.symlink("/dev/full", os.path.join(m.root, ".prepfs", "order"))  # every write: ENOSPC
    s = paths_sampler(m, seed=1)
    with pytest.warns(PrepfsWarning, match="order") as caught:
        for e in range(3):
            s.set_epoch(e)
            assert list(s) == distributed_order(10, 1, e)
        s.close()
    assert len(caught) == 1


def test_a_failing_importance_write_warns_once(tmp_path):
    m = FakeMount(tmp_path, 10)
    os.remove(os.path.join(m.root, ".prepfs", "importance"))  # an older daemon without the file
    s = paths_sampler(m, mode="importance", importance_flush=1)
    with pytest.warns(PrepfsWarning, match="importance") as caught:
        for i in range(4):
            s.report_loss([i], [1.0])
    assert len(caught) == 1


def test_an_unreadable_resident_bitmap_falls_back_to_the_plain_order(tmp_path):
    m = FakeMount(tmp_path, 10)
    os.remove(os.path.join(m.root, ".prepfs", "resident"))
    s = paths_sampler(m, seed=3, mode="opportunistic")
    with pytest.warns(PrepfsWarning, match="resident"):
        assert list(s) == distributed_order(10, 3, 0)


def test_a_malformed_sample_list_means_no_daemon_not_a_crash(tmp_path):
    m = FakeMount(tmp_path, 5)
    with open(os.path.join(m.root, ".prepfs", "samples"), "a") as f:
        f.write("a line without a tab\n")
    with pytest.warns(PrepfsWarning, match="line 6"):
        s = paths_sampler(m, seed=1)
    assert list(s) == distributed_order(5, 1, 0)
    assert m.orders() == {}


def test_files_the_daemon_does_not_serve_are_sampled_but_not_published(tmp_path):
    m = FakeMount(tmp_path, 6)
    paths = [m.path("decoded", i) for i in range(6)] + [os.path.join(m.root, "decoded", "extra.ppm"),
                                                         "/elsewhere/x.ppm"]
    with pytest.warns(PrepfsWarning, match="2 of 8"):
        s = PrepfsSampler(range(8), m.root, paths=paths, job="u")
    seq = list(s)
    assert sorted(seq) == list(range(8))
    assert m.orders()["u"][1:] == [os.path.relpath(m.path("decoded", i), m.root) for i in seq if i < 6]


# -------------------------------------------------------------------------- DataLoader, pickle, fork

@pytest.mark.parametrize("mode", MODES)
def test_dataloader_with_persistent_workers(tmp_path, mode):
    m = FakeMount(tmp_path, 30, files=True)
    ds = Indexed(ImageFolder(os.path.join(m.root, "decoded", "train"), loader=file_size))
    s = PrepfsSampler(ds, m.root, seed=9, mode=mode, window=8, refresh_every=4, importance_flush=8, job="dl")
    loader = DataLoader(ds, batch_size=4, sampler=s, num_workers=2, persistent_workers=True,
                        multiprocessing_context="fork")
    for epoch in range(2):
        s.set_epoch(epoch)
        got = []
        for idx, (sizes, _targets) in loader:
            got += idx.tolist()
            s.report_loss(idx, sizes.float())  # losses from the workers' items, reported in the main process
            m.set_resident(itertools.islice(range(m.n), epoch * 7, epoch * 7 + 10))
        assert len(got) == len(s)
        assert set(got) == set(range(30))
        if mode == "plain":
            assert got == distributed_order(30, 9, epoch)
    s.close()
    assert sum(1 for l in m.orders()["dl"] if l == "reset") == 2
    assert len(m.importance()) >= 8


def test_sampler_pickles_mid_epoch(tmp_path):
    m = FakeMount(tmp_path, 16)
    s = paths_sampler(m, seed=4, mode="importance", job="p")
    s.report_loss([1, 2], [3.0, 4.0])
    it = iter(s)
    next(it)
    copy = pickle.loads(pickle.dumps(s))
    for x in (s, copy):
        x.set_epoch(1)
    assert list(copy) == list(s)


def test_residency_reads_are_bounded_by_default(tmp_path, monkeypatch):
    # Re-reading a large bitmap every few yields would move gigabytes per epoch: the default interval
    # keeps it near 1 KiB per yield (here N = 600k, 75 KB per read).
    import prepfs.mount
    n, taken = 600_000, 50_000
    m = FakeMount(tmp_path, n, classes=1000)
    read_bytes = []
    real = prepfs.mount.MountClient.resident

    def spy(self):
        r = real(self)
        read_bytes.append(len(r.data))
        return r

    monkeypatch.setattr(prepfs.mount.MountClient, "resident", spy)
    s = PrepfsSampler(range(n), m.root, paths=[os.path.join(m.root, "raw", r) for r, _ in m.rows],
                      mode="opportunistic")
    assert len(list(itertools.islice(iter(s), taken))) == taken
    assert read_bytes and read_bytes[0] == (n + 7) // 8
    assert sum(read_bytes) / taken <= 1100
