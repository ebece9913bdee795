"""Offline cache simulations over an access trace, for the sampling benches' reference columns.

simulate(policy, trace, sizes, capacity) replays `trace` (a list of epochs, each a list of item ids)
through a cache of `capacity` bytes holding whole items of `sizes[item]` bytes, and returns per-epoch
counts: accesses, hits, bytes and hit_bytes. Policies:

  min     Belady's MIN with the whole trace known: on a miss the item is admitted and the items
          whose next use is farthest go until it fits (the newcomer itself when it is the
          farthest, i.e. bypass). For equal sizes this is optimal; for mixed sizes (up to ~3x
          here) it is the standard farthest-next-use bound, not an exact optimum (NP-hard).
  lru     least recently used
  lfu     fewest uses since insertion, least recent among equals (as src/cache/policy.cc)
  random  a uniformly random victim
  none    admit until full, never evict
"""
import heapq
import random
from collections import OrderedDict

INF = float("inf")
POLICIES = ("min", "lru", "lfu", "random", "none")


def simulate(policy, trace, sizes, capacity, seed=0):
    flat = [x for epoch in trace for x in epoch]
    bounds = []
    pos = 0
    for epoch in trace:
        bounds.append((pos, pos + len(epoch)))
        pos += len(epoch)
    hit = _RUN[policy](flat, sizes, capacity, seed)
    out = []
    for a, b in bounds:
        out.append({"accesses": b - a, "hits": sum(hit[a:b]),
                    "bytes": sum(sizes[x] for x in flat[a:b]),
                    "hit_bytes": sum(sizes[x] for x, h in zip(flat[a:b], hit[a:b]) if h)})
    return out


def _min(flat, sizes, cap, seed):
    nxt = [INF] * len(flat)
    last = {}
    for i in range(len(flat) - 1, -1, -1):
        nxt[i] = last.get(flat[i], INF)
        last[flat[i]] = i
    held = {}  # item -> its next use
    heap = []  # (-next use, item), lazily deleted
    used = 0
    hit = []
    for i, x in enumerate(flat):
        if x in held:
            hit.append(True)
        else:
            hit.append(False)
            used += sizes[x]
        held[x] = nxt[i]
        heapq.heappush(heap, (-nxt[i], x))
        while used > cap:
            neg, y = heapq.heappop(heap)
            if held.get(y) != -neg:
                continue  # stale
            del held[y]
            used -= sizes[y]
    return hit


def _lru(flat, sizes, cap, seed):
    held = OrderedDict()
    used = 0
    hit = []
    for x in flat:
        if x in held:
            held.move_to_end(x)
            hit.append(True)
            continue
        hit.append(False)
        while used + sizes[x] > cap and held:
            y, _ = held.popitem(last=False)
            used -= sizes[y]
        held[x] = True
        used += sizes[x]
    return hit


def _lfu(flat, sizes, cap, seed):
    held = {}  # item -> (uses, last use); a newcomer is admitted after the victims leave
    heap = []
    used = 0
    hit = []
    for t, x in enumerate(flat):
        if x in held:
            hit.append(True)
            held[x] = (held[x][0] + 1, t)
        else:
            hit.append(False)
            while used + sizes[x] > cap and held:
                rank, y = heapq.heappop(heap)
                if held.get(y) == rank:  # else stale
                    del held[y]
                    used -= sizes[y]
            held[x] = (1, t)
            used += sizes[x]
        heapq.heappush(heap, (held[x], x))
    return hit


def _random(flat, sizes, cap, seed):
    rng = random.Random(seed)
    keys, pos = [], {}
    used = 0
    hit = []
    for x in flat:
        if x in pos:
            hit.append(True)
            continue
        hit.append(False)
        while used + sizes[x] > cap and keys:
            i = rng.randrange(len(keys))
            y = keys[i]
            keys[i] = keys[-1]
            pos[keys[i]] = i
            keys.pop()
            del pos[y]
            used -= sizes[y]
        pos[x] = len(keys)
        keys.append(x)
        used += sizes[x]
    return hit


def _none(flat, sizes, cap, seed):
    held = set()
    used = 0
    hit = []
    for x in flat:
        if x in held:
            hit.append(True)
        else:
            hit.append(False)
            if used + sizes[x] <= cap:
                held.add(x)
                used += sizes[x]
    return hit


_RUN = {"min": _min, "lru": _lru, "lfu": _lfu, "random": _random, "none": _none}
