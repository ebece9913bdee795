"""The sampling rules of prepfs.order, as pure functions: property tests over sizes, seeds, ranks,
windows, residency patterns and losses."""
import collections
import math
import random

import pytest
from hypothesis import given, strategies as st
from torch.utils.data import DistributedSampler

from prepfs import order

sizes = st.integers(min_value=0, max_value=300)
seeds = st.integers(min_value=0, max_value=2**31)


@st.composite
def world(draw):
    r = draw(st.integers(min_value=1, max_value=9))
    return r, draw(st.integers(min_value=0, max_value=r - 1))


# ------------------------------------------------------------------------------- permutation/shard

@given(n=sizes, seed=seeds, epoch=st.integers(0, 50), w=world(), shuffle=st.booleans(), drop_last=st.booleans())
def test_shard_of_permutation_is_what_distributed_sampler_yields(n, seed, epoch, w, shuffle, drop_last):
    r, rank = w
    ds = DistributedSampler(range(n), num_replicas=r, rank=rank, shuffle=shuffle, seed=seed, drop_last=drop_last)
    ds.set_epoch(epoch)
    mine = order.shard(order.permutation(n, seed, epoch, shuffle), r, rank, drop_last)
    assert mine == list(ds)
    assert len(mine) == order.num_samples(n, r, drop_last) == len(ds)


@given(n=st.integers(1, 300), seed=seeds, epoch=st.integers(0, 50))
def test_permutation_visits_each_index_once_and_changes_with_the_epoch(n, seed, epoch):
    p = order.permutation(n, seed, epoch)
    assert sorted(p) == list(range(n))
    assert p == order.permutation(n, seed, epoch)  # reproducible: resume depends on it
    if n >= 8:
        assert p != order.permutation(n, seed, epoch + 1)


@given(n=sizes, seed=seeds, r=st.integers(1, 9))
def test_ranks_partition_an_epoch_with_padding(n, seed, r):
    perm = order.permutation(n, seed, 0)
    shards = [order.shard(perm, r, k, drop_last=False) for k in range(r)]
    per_rank = math.ceil(n / r)
    assert all(len(s) == per_rank for s in shards)
    counts = collections.Counter(i for s in shards for i in s)
    assert set(counts) == set(range(n))  # the union is everything
    # Padding repeats the permutation's head, and nothing else: with n >= r each of the first
    # per_rank * r - n indices of the permutation is visited exactly twice, every other index once.
    pad = per_rank * r - n
    if n >= r:
        assert sorted(i for i, c in counts.items() if c == 2) == sorted(perm[:pad])
        assert max(counts.values(), default=1) <= 2


@given(n=sizes, seed=seeds, r=st.integers(1, 9))
def test_ranks_partition_an_epoch_with_drop_last(n, seed, r):
    perm = order.permutation(n, seed, 0)
    shards = [order.shard(perm, r, k, drop_last=True) for k in range(r)]
    each = order.num_samples(n, r, True)
    assert all(len(s) == each for s in shards)
    flat = [i for s in shards for i in s]
    assert len(flat) == len(set(flat))  # pairwise disjoint
    assert set(flat) == set(perm[:each * r])  # only the permutation's tail is dropped
    assert n - len(flat) < r


def test_shard_rejects_a_rank_outside_the_world():
    with pytest.raises(ValueError, match="rank 3"):
        order.shard([0, 1, 2], 3, 3, False)


# ------------------------------------------------------------------------------- opportunistic

@st.composite
def residency_pattern(draw, n):
    """A residency() callable that returns a different random bitmap at each call (what another job
    fetching and the cache evicting look like), plus the list of predicates it handed out."""
    seed = draw(seeds)
    density = draw(st.sampled_from([0.0, 0.05, 0.3, 0.7, 1.0]))
    handed = []

    def residency():
        rng = random.Random(seed * 7919 + len(handed))
        bits = [rng.random() < density for _ in range(n)]
        handed.append(bits)
        return lambda p: bits[p]

    return residency, handed


@given(data=st.data(), n=st.integers(0, 200), window=st.integers(1, 64), refresh=st.integers(1, 40))
def test_opportunistic_walk_takes_cached_first_and_visits_each_once(data, n, window, refresh):
    residency, handed = data.draw(residency_pattern(n))
    walk = list(order.opportunistic_walk(n, window, residency, refresh))
    assert sorted(walk) == list(range(n))

    # Brute-force oracle of the documented rule, pick by pick.
    assert len(handed) == math.ceil(n / refresh)  # one bitmap read per refresh_every picks
    done = set()
    for t, p in enumerate(walk):
        cached = handed[t // refresh]
        win = [q for q in range(min(n, t + window)) if q not in done]
        oldest = win[0]
        if oldest <= t - window:
            expect = oldest  # overdue: the bound beats residency
        else:
            expect = next((q for q in win if cached[q]), oldest)
        assert p == expect, f"pick {t}: window {win}, cached {[q for q in win if cached[q]]}"
        assert p - window < t <= p + window
        done.add(p)


@given(n=st.integers(0, 200), window=st.integers(1, 64), cached=st.sampled_from([True, False]))
def test_opportunistic_walk_without_any_difference_in_residency_is_the_plain_order(n, window, cached):
    assert list(order.opportunistic_walk(n, window, lambda: (lambda p: cached), 7)) == list(range(n))


def test_opportunistic_walk_with_a_static_bitmap_and_a_whole_epoch_window():
    cached = {3, 5, 8}
    walk = list(order.opportunistic_walk(10, 10, lambda: cached.__contains__, 1000))
    assert walk == [3, 5, 8, 0, 1, 2, 4, 6, 7, 9]


def test_opportunistic_walk_rejects_an_empty_window():
    with pytest.raises(ValueError, match="window"):
        list(order.opportunistic_walk(5, 0, lambda: (lambda p: False), 1))


# ---------------------------------------------------------------------------------- importance

losses = st.one_of(st.just(math.nan), st.floats(min_value=0, max_value=100, allow_nan=False))


@given(values=st.lists(losses, min_size=0, max_size=80), max_bias=st.floats(1.0, 50.0))
def test_rank_weights_are_bounded_and_follow_importance(values, max_bias):
    w = order.rank_weights(values, max_bias).tolist()
    assert len(w) == len(values)
    if not values:
        return
    assert min(w) >= 1.0 - 1e-9 and max(w) <= max_bias * (1 + 1e-9)
    key = [math.inf if math.isnan(v) else v for v in values]
    for i in range(len(values)):
        for j in range(len(values)):
            if key[i] > key[j]:
                # more important weighs more (strictly, unless max_bias is too close to 1 to tell)
                assert w[i] > w[j] if max_bias >= 1.5 else w[i] >= w[j]
            elif key[i] == key[j]:
                assert w[i] == pytest.approx(w[j])  # ties share a weight
    if len(set(key)) == len(key) and len(key) > 1:
        assert max(w) / min(w) == pytest.approx(max_bias)  # the bound is reached exactly


def test_unseen_samples_rank_above_every_reported_one():
    w = order.rank_weights([0.1, math.nan, 99.0, math.nan], 8.0).tolist()
    assert w[1] == w[3] > w[2] > w[0]


@given(values=st.lists(losses, min_size=0, max_size=80), frac=st.floats(0, 1), seed=seeds)
def test_draw_extras_draws_distinct_candidates(values, frac, seed):
    candidates = [1000 + 3 * i for i in range(len(values))]
    count = math.floor(frac * len(values))
    extras = order.draw_extras(candidates, values, count, 4.0, seed)
    assert len(extras) == count == len(set(extras))
    assert set(extras) <= set(candidates)
    assert extras == order.draw_extras(candidates, values, count, 4.0, seed)


def test_draw_extras_favours_high_loss_within_the_bound():
    # 200 candidates with distinct losses, 20 extras per draw, 400 seeded draws: the 20 highest-loss
    # candidates are drawn more often than the 20 lowest, but not more than max_bias times as often.
    n, count, max_bias = 200, 20, 4.0
    values = [float(i) for i in range(n)]  # candidate i has loss i
    hits = collections.Counter()
    for seed in range(400):
        hits.update(order.draw_extras(list(range(n)), values, count, max_bias, seed))
    top = sum(hits[i] for i in range(n - 20, n))
    bottom = sum(hits[i] for i in range(20))
    assert 2.0 * bottom < top < max_bias * bottom


def test_draw_extras_refuses_more_extras_than_candidates():
    with pytest.raises(ValueError, match="distinct"):
        order.draw_extras([1, 2], [0.0, 1.0], 3, 2.0, 0)


@given(base=st.lists(st.integers(0, 50), max_size=60), data=st.data(), seed=seeds)
def test_interleave_keeps_base_order_and_adds_each_extra_once(base, data, seed):
    extras = data.draw(st.lists(st.integers(0, 50), max_size=len(base)))
    out = order.interleave(base, extras, seed)
    assert len(out) == len(base) + len(extras)
    assert collections.Counter(out) == collections.Counter(base) + collections.Counter(extras)
    # base is a subsequence of out, in order
    it = iter(out)
    assert all(any(x == y for y in it) for x in base)
    assert out == order.interleave(base, extras, seed)


def test_seed_for_is_stable_across_processes():
    # str hash() is salted per process; seed_for must not be: a resumed run in a new process
    # must draw the same extras and slots.
    assert order.seed_for(0, 1, 2, "extras") == order.seed_for(0, 1, 2, "extras")
    assert order.seed_for(0, 1, 2, "extras") != order.seed_for(0, 1, 3, "extras")
    import subprocess
    import sys
    other = subprocess.run([sys.executable, "-c", "from prepfs import order; print(order.seed_for(0, 1, 2, 'extras'))"],
                           capture_output=True, text=True, check=True).stdout
    assert int(other) == order.seed_for(0, 1, 2, "extras")


def test_interleave_spreads_extras_over_the_epoch():
    # Extras land in uniformly random slots: over many seeds, as many in the first half as in the second.
    base, extras = list(range(100)), list(range(1000, 1050))
    first_half = 0
    for seed in range(60):
        out = order.interleave(base, extras, seed)
        first_half += sum(1 for x in out[:75] if x >= 1000)
    assert 0.4 < first_half / (60 * 50) < 0.6
