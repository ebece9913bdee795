"""The sampler's logic as pure functions over index lists: no files, no daemon, no global state.

Every function here is deterministic in its arguments (seeds included), so the property tests can
drive it with arbitrary sizes, windows, residency patterns and losses. PrepfsSampler (sampler.py)
only wires these to a mount.
"""
import hashlib
import math
from collections import deque
from typing import Callable, Iterator, List, Sequence

import torch

__all__ = [
    "permutation", "num_samples", "shard", "opportunistic_walk", "rank_weights", "draw_extras",
    "interleave", "seed_for",
]


def seed_for(*parts) -> int:
    """A 64-bit generator seed from a tuple of values, stable across processes and Python versions
    (hash() of a str is salted per process, which would make a resumed run draw differently)."""
    digest = hashlib.blake2b("/".join(map(str, parts)).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little")


def _generator(seed: int) -> torch.Generator:
    g = torch.Generator()
    g.manual_seed(seed)
    return g


def permutation(n: int, seed: int, epoch: int, shuffle: bool = True) -> List[int]:
    """The epoch's order of 0..n-1.

    Drawn exactly as DistributedSampler draws it (torch.randperm with a generator seeded seed + epoch),
    so swapping PrepfsSampler in for DistributedSampler keeps a run's sample order.
    """
    if not shuffle:
        return list(range(n))
    return torch.randperm(n, generator=_generator(seed + epoch)).tolist()


def num_samples(n: int, num_replicas: int, drop_last: bool) -> int:
    """How many indices each rank gets per epoch, by DistributedSampler's rule: pad up to a multiple
    of num_replicas, or with drop_last cut down to one."""
    if drop_last and n % num_replicas != 0:
        return max(0, math.ceil((n - num_replicas) / num_replicas))
    return math.ceil(n / num_replicas)


def shard(order: Sequence[int], num_replicas: int, rank: int, drop_last: bool) -> List[int]:
    """Rank `rank`'s share of an epoch order, as DistributedSampler cuts it.

    Without drop_last the order is padded by repeating its head until every rank gets the same count
    (so a few indices are visited twice per epoch across ranks); with drop_last its tail is cut.
    Then rank r takes positions r, r + num_replicas, ...
    """
    if not 0 <= rank < num_replicas:
        raise ValueError(f"rank {rank} is not in [0, {num_replicas})")
    order = list(order)
    total = num_samples(len(order), num_replicas, drop_last) * num_replicas
    if total > len(order):
        pad = total - len(order)
        order += (order * math.ceil(pad / len(order)))[:pad]
    else:
        order = order[:total]
    return order[rank:total:num_replicas]


def opportunistic_walk(n: int, window: int, residency: Callable[[], Callable[[int], bool]],
                       refresh_every: int) -> Iterator[int]:
    """Yield each of 0..n-1 exactly once: in order, except that within a lookahead window the
    positions that are cached right now go first (Seneca's opportunistic sampling).

    residency() returns a predicate over positions ("is this one cached now?"). It is called before
    the first pick and again every refresh_every picks, so a caller reading a bitmap pays for one read
    per refresh_every samples.

    The rule at pick t (t picks made so far):
      - the window is the first `window` positions not yet picked (all of them are < t + window);
      - if the oldest of them is overdue (position <= t - window) it is picked, whatever is cached;
      - else the oldest position in the window that was cached at the last look is picked;
      - else the oldest position in the window is picked.
    Hence every position p is picked at some t with p - window < t <= p + window: the reordering is
    local, and a job publishing the plain order still tells the daemon what it will read soon.
    """
    if window < 1:
        raise ValueError(f"window must be >= 1, not {window}")
    if refresh_every < 1:
        raise ValueError(f"refresh_every must be >= 1, not {refresh_every}")
    taken = bytearray(n)
    # Both deques hold admitted positions in ascending order. A position picked out of the middle
    # stays in them and is skipped when it reaches the front (lazy deletion keeps each pick O(1)).
    admitted_q: deque = deque()
    cached_q: deque = deque()
    admitted = 0
    is_cached: Callable[[int], bool] = lambda p: False
    for t in range(n):
        if t % refresh_every == 0:
            is_cached = residency()
            # Residency changes both ways (fetched by another job, evicted), so look at the whole window again.
            cached_q = deque(p for p in admitted_q if not taken[p] and is_cached(p))
        while admitted < min(n, t + window):
            admitted_q.append(admitted)
            if is_cached(admitted):
                cached_q.append(admitted)
            admitted += 1
        while taken[admitted_q[0]]:
            admitted_q.popleft()
        pick = admitted_q[0]
        if pick > t - window:  # not overdue: a cached one may go first
            while cached_q and taken[cached_q[0]]:
                cached_q.popleft()
            if cached_q:
                pick = cached_q.popleft()
        taken[pick] = 1
        yield pick


def rank_weights(values: Sequence[float], max_bias: float) -> torch.Tensor:
    """Sampling weights for candidates with importance `values` (NaN = never reported).

    Candidates are ranked by importance, highest first, with every NaN (unseen) ranked above every
    reported value, as SHADE does. The weight of rank k among m candidates is
        w(k) = max_bias ** (1 - k / (m - 1))
    so the top rank weighs exactly max_bias times the bottom one and each rank weighs the same factor
    more than the next. Tied candidates share the weight of their mean rank, so ties (e.g. all unseen,
    in the first epoch) are drawn uniformly rather than by an arbitrary tie-break.
    """
    if not max_bias >= 1.0:
        raise ValueError(f"max_bias must be >= 1, not {max_bias}")
    v = torch.as_tensor(values, dtype=torch.float64)
    m = v.numel()
    if m <= 1:
        return torch.ones(m, dtype=torch.float64)
    key = torch.where(torch.isnan(v), torch.tensor(math.inf, dtype=torch.float64), v)
    sorted_key, order = torch.sort(key, descending=True, stable=True)
    starts_group = torch.ones(m, dtype=torch.bool)
    starts_group[1:] = sorted_key[1:] != sorted_key[:-1]
    starts = torch.nonzero(starts_group).flatten()
    ends = torch.cat([starts[1:], torch.tensor([m])])
    mean_rank = (starts + ends - 1).to(torch.float64) / 2
    rank = torch.empty(m, dtype=torch.float64)
    rank[order] = torch.repeat_interleave(mean_rank, ends - starts)
    return torch.pow(torch.tensor(float(max_bias), dtype=torch.float64), 1.0 - rank / (m - 1))


def draw_extras(candidates: Sequence[int], values: Sequence[float], count: int, max_bias: float,
                seed: int) -> List[int]:
    """`count` distinct candidates, drawn without replacement with rank_weights(values, max_bias).

    Without replacement, so a candidate gets at most one extra visit. The draw is an exponential
    race (key = Exp(1) / weight, the `count` smallest keys win), which is successive weighted
    sampling without replacement; unlike torch.multinomial it has no 2**24 category limit.
    """
    if len(values) != len(candidates):
        raise ValueError(f"{len(candidates)} candidates but {len(values)} importance values")
    if not 0 <= count <= len(candidates):
        raise ValueError(f"cannot draw {count} distinct extras from {len(candidates)} candidates")
    if count == 0:
        return []
    weights = rank_weights(values, max_bias)
    u = torch.rand(len(candidates), generator=_generator(seed), dtype=torch.float64)
    keys = -torch.log(u) / weights
    winners = torch.topk(keys, count, largest=False).indices.tolist()
    return [candidates[i] for i in winners]


def interleave(base: Sequence[int], extras: Sequence[int], seed: int) -> List[int]:
    """base with extras inserted at seeded random places: base keeps its order, the extras land in
    uniformly random slots of the combined sequence (so oversampled visits spread over the epoch)."""
    total = len(base) + len(extras)
    if not extras:
        return list(base)
    slots = torch.randperm(total, generator=_generator(seed))[:len(extras)].tolist()
    extra_at = dict(zip(slots, extras))
    it = iter(base)
    return [extra_at[i] if i in extra_at else next(it) for i in range(total)]
