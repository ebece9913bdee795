"""PrepfsSampler: a DistributedSampler-like sampler that tells prepfs what the job will read.

The sampling rules are the pure functions of order.py; this module maps dataset indices to the
daemon's sample indices, publishes each epoch's order, reads residency, reports losses, and keeps
the resume state. See docs/SAMPLER.md.
"""
import collections
import math
import os
import warnings
from typing import Dict, List, Optional, Sequence

import torch
from torch.utils.data import Dataset, Sampler

from . import order as _order
from .mount import VIEWS, MountClient, ProtocolError, _check_job

__all__ = ["PrepfsSampler", "PrepfsWarning", "Indexed", "MODES"]

MODES = ("plain", "opportunistic", "importance")
STATE_VERSION = 1
# How many of the latest yields state_dict(unconsumed=k) can take back: enough for a DataLoader's
# read-ahead (prefetch_factor x num_workers batches) at large batch sizes.
HISTORY = 16384


class PrepfsWarning(RuntimeWarning):
    """Something about the cache is off (no daemon, a failed write); sampling goes on without it."""


class Indexed(Dataset):
    """Wraps a dataset so each item comes with its index: dataset[i] -> (i, item).

    A DataLoader then yields (indices, batch), which is what report_loss() needs. The wrapped
    dataset's .samples / .imgs stay reachable, so PrepfsSampler(Indexed(ds), ...) finds the paths.
    """

    def __init__(self, dataset):
        self.dataset = dataset

    def __len__(self):
        return len(self.dataset)

    def __getitem__(self, i):
        return i, self.dataset[i]


def _dataset_paths(dataset) -> Optional[List[str]]:
    """The file path behind each index of an ImageFolder-like dataset, through Subset and Indexed."""
    for attr in ("samples", "imgs"):
        pairs = getattr(dataset, attr, None)
        if pairs is not None:
            return [p[0] if isinstance(p, (tuple, list)) else p for p in pairs]
    inner = getattr(dataset, "dataset", None)
    if inner is None:
        return None
    paths = _dataset_paths(inner)
    indices = getattr(dataset, "indices", None)  # torch.utils.data.Subset
    if paths is not None and indices is not None:
        return [paths[i] for i in indices]
    return paths


class _Progress:
    """Which positions of one epoch's sequence this rank has yielded.

    Stored as a prefix (every position below it is done) plus the done positions above it, which
    stay few: the opportunistic walk yields nothing more than `window` positions late.
    """

    def __init__(self, epoch: int, length: int, prefix: int = 0, ahead=(), extras=None):
        self.epoch, self.length, self.extras = epoch, length, extras
        self.prefix, self.ahead = prefix, set(ahead)
        self.recent = collections.deque(maxlen=HISTORY)
        self.complete = False

    def done(self, p: int) -> bool:
        return p < self.prefix or p in self.ahead

    def mark(self, p: int) -> None:
        if p == self.prefix:
            self.prefix += 1
            while self.prefix in self.ahead:
                self.ahead.remove(self.prefix)
                self.prefix += 1
        else:
            self.ahead.add(p)
        self.recent.append(p)

    def snapshot(self, unconsumed: int) -> dict:
        """The resume state, with the last `unconsumed` yields counted as not yielded."""
        if not 0 <= unconsumed <= len(self.recent):
            raise ValueError(f"unconsumed={unconsumed}, but only the last {len(self.recent)} yields of this "
                             f"epoch are remembered")
        undo = set(list(self.recent)[len(self.recent) - unconsumed:])
        prefix = min([self.prefix, *undo])
        ahead = [p for p in range(prefix, self.prefix) if p not in undo]
        ahead += [p for p in self.ahead if p not in undo]
        return {"epoch": self.epoch, "length": self.length, "prefix": prefix, "ahead": sorted(ahead),
                "extras": None if self.extras is None else list(self.extras)}


class PrepfsSampler(Sampler[int]):
    """Samples dataset indices epoch by epoch and tells a prepfs mount the order ahead of time.

    Args:
      dataset: an ImageFolder-like dataset (.samples or .imgs of (path, target); Subset and Indexed
        wrappers are looked through) whose files lie under MOUNT/raw/, MOUNT/decoded/ or
        MOUNT/augmented/; or any dataset, with `paths`.
      mount: the prepfs mountpoint. None: no daemon, plain sampling, no paths needed.
      seed: the epoch's permutation is drawn from seed + epoch, as DistributedSampler does (the same
        permutation, so the same order as DistributedSampler in plain mode).
      paths: the file behind each dataset index (absolute, or relative to the current directory),
        for datasets without .samples.
      num_replicas, rank: world size and rank; default from torch.distributed when it is
        initialized, else 1 and 0. Ranks partition each epoch with DistributedSampler's padding
        (drop_last=False: the order's head repeats to fill) or truncation (drop_last=True).
      shuffle: False samples 0..N-1 in order (still sharded, published and, in the other modes,
        reordered or oversampled).
      mode: "plain" yields the permutation; "opportunistic" takes samples cached now first within a
        window of the permutation; "importance" oversamples high-loss samples (see report_loss).
      window: opportunistic lookahead: a sample is yielded at most `window` places early or late.
      refresh_every: opportunistic: .prepfs/resident is re-read every this many yields. Default:
        max(64, ceil(N / 8192)), so the bitmap costs at most about 1 KiB of reads per yield.
      extra: importance: extra visits per epoch, as a fraction of this rank's share (0 to 1).
      max_bias: importance: the top-ranked sample weighs this many times the bottom-ranked one.
      job: the name this job publishes under ([A-Za-z0-9_.-], with ".r<rank>" appended when there
        are several ranks). Default "pid<pid>.r<rank>". Give a stable name to resume a job: the
        resumed run then replaces (resets) what the old process had published.
      publish: False never writes .prepfs/order (residency and importance still work).
      importance_flush: report_loss() writes to .prepfs/importance once this many samples are pending.

    An epoch (one pass of iter()) yields, on this rank:
      plain, opportunistic: its share of the epoch's permutation, each index once;
      importance: its share once, plus floor(extra * share) distinct indices of the share a second
        time (len(sampler) counts both).
    The epoch changes only through set_epoch(), as with DistributedSampler.

    The daemon being absent or failing never stops sampling: it is reported once as a PrepfsWarning
    and the sampler carries on without it.
    """

    def __init__(self, dataset, mount, seed: int = 0, *, paths: Optional[Sequence] = None,
                 num_replicas: Optional[int] = None, rank: Optional[int] = None, shuffle: bool = True,
                 drop_last: bool = False, mode: str = "plain", window: int = 1024, refresh_every: Optional[int] = None,
                 extra: float = 0.25, max_bias: float = 4.0, job: Optional[str] = None, publish: bool = True,
                 importance_flush: int = 4096):
        if mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}, not {mode!r}")
        if refresh_every is None:
            # A read is ceil(N/8) bytes: for ImageNet's 1.28M samples, 160 KB. Re-reading every 64
            # yields would move 3 GB through FUSE per epoch; every N/8192 keeps it near 1 KiB a yield.
            refresh_every = max(64, math.ceil(len(dataset) / 8192))
        if window < 1 or refresh_every < 1:
            raise ValueError(f"window ({window}) and refresh_every ({refresh_every}) must be >= 1")
        if not 0.0 <= extra <= 1.0:
            raise ValueError(f"extra must be in [0, 1], not {extra}")
        if not max_bias >= 1.0:
            raise ValueError(f"max_bias must be >= 1, not {max_bias}")
        if importance_flush < 1:
            raise ValueError(f"importance_flush must be >= 1, not {importance_flush}")
        if num_replicas is None or rank is None:
            dist = torch.distributed
            initialized = dist.is_available() and dist.is_initialized()
            if num_replicas is None:
                num_replicas = dist.get_world_size() if initialized else 1
            if rank is None:
                rank = dist.get_rank() if initialized else 0
        if num_replicas < 1 or not 0 <= rank < num_replicas:
            raise ValueError(f"rank {rank} is not in [0, {num_replicas})")

        self.n = len(dataset)
        self.seed, self.shuffle, self.drop_last = int(seed), bool(shuffle), bool(drop_last)
        self.num_replicas, self.rank = int(num_replicas), int(rank)
        self.mode, self.window, self.refresh_every = mode, int(window), int(refresh_every)
        self.extra, self.max_bias = float(extra), float(max_bias)
        self.importance_flush = int(importance_flush)
        self.num_samples = _order.num_samples(self.n, self.num_replicas, self.drop_last)
        self.epoch = 0
        # Each rank publishes its own future under its own name: one shared name would make the
        # ranks append to, and reset, one another's orders.
        if job is None:
            self.job = f"pid{os.getpid()}.r{self.rank}"
        else:
            self.job = f"{job}.r{self.rank}" if self.num_replicas > 1 else job
        _check_job(self.job)

        # Per-sample importance by dataset index; NaN = no loss reported yet. float32 keeps a
        # checkpoint of a million samples at 4 MB.
        self._importance = torch.full((self.n,), math.nan, dtype=torch.float32)
        self._pending_importance: Dict[int, float] = {}
        self._progress: Optional[_Progress] = None
        self._resume: Optional[dict] = None
        self._warned = set()
        self._published_any = False

        # Daemon side: None unless the mount has a daemon whose sample list we could read.
        self._client: Optional[MountClient] = None
        self._rel: List[Optional[str]] = []  # mount-relative path per dataset index, to publish
        self._sid: List[int] = []  # daemon sample index per dataset index, -1 if it serves none
        self._publish = bool(publish)
        if mount is not None:
            if paths is None:
                paths = _dataset_paths(dataset)
                if paths is None:
                    raise TypeError("PrepfsSampler needs the file behind each dataset index: pass a dataset with "
                                    ".samples or .imgs (ImageFolder), or paths=[...]")
            if len(paths) != self.n:
                raise ValueError(f"{len(paths)} paths for a dataset of {self.n}")
            self._connect(MountClient(mount), paths)

    # ----------------------------------------------------------------------------- the daemon side

    def _warn_once(self, kind: str, msg: str) -> None:
        if kind not in self._warned:
            self._warned.add(kind)
            warnings.warn(f"prepfs: {msg}", PrepfsWarning, stacklevel=3)

    def _connect(self, client: MountClient, paths: Sequence) -> None:
        if not client.present():
            self._warn_once("absent", f"no prepfs daemon at {client.mount} ({client.ctl} is missing): sampling "
                            "without it, nothing is published")
            return
        try:
            table = client.samples()
        except (OSError, ProtocolError) as e:
            self._warn_once("absent", f"cannot read {client.path('samples')} ({e}): sampling without the daemon")
            return
        # The view a path lies in decides the column it is matched against (raw/ by source path,
        # decoded/ and augmented/ by image path); both maps are built only if some path needs them.
        by_view: Dict[str, Dict[str, int]] = {}
        roots = {client.mount, os.path.realpath(client.mount)}
        rel, sid, unmapped = [], [], []
        for p in paths:
            r = _relative(os.path.abspath(os.fspath(p)), roots)
            view, _, key = (r or "").partition("/")
            if view not in VIEWS:
                rel.append(None)
                sid.append(-1)
                unmapped.append(p)
                continue
            if view not in by_view:
                column = 0 if view == "raw" else 1
                by_view[view] = {row[column]: i for i, row in enumerate(table)}
            s = by_view[view].get(key, -1)
            rel.append(r if s >= 0 else None)
            sid.append(s)
            if s < 0:
                unmapped.append(p)
        if unmapped:
            self._warn_once("unmapped", f"{len(unmapped)} of {len(paths)} dataset files are not samples the daemon "
                            f"at {client.mount} serves (first: {os.fspath(unmapped[0])!r}); they are sampled but "
                            "neither published nor counted as cached")
        self._client, self._rel, self._sid = client, rel, sid

    def _write(self, what: str, fn) -> bool:
        try:
            fn()
            return True
        except (OSError, ValueError) as e:
            self._warn_once(what, f"writing {what} to {self._client.ctl} failed ({e}); training goes on, "
                            "this is said once")
            return False

    def _publish_order(self, indices: Sequence[int]) -> None:
        if self._client is None or not self._publish:
            return
        rel = self._rel
        paths = [rel[i] for i in indices if rel[i] is not None]
        # reset first: whatever the last epoch left unread (a broken-off loop, a resumed run) is not
        # this job's future any more.
        opportunistic = self.mode == "opportunistic"
        if self._write("order", lambda: self._client.publish(self.job, paths, reset=True,
                                                             opportunistic=opportunistic)):
            self._published_any = True

    def _residency(self, seq: List[int], remaining: List[int]):
        """For opportunistic_walk: a fresh read of .prepfs/resident as a predicate over walk positions."""
        sid, client = self._sid, self._client

        def look():
            try:
                bits = client.resident()
            except OSError as e:
                self._warn_once("resident", f"cannot read {client.path('resident')} ({e}); taking the plain order")
                return lambda q: False
            return lambda q: sid[seq[remaining[q]]] in bits  # -1 (not served) is never in the bitmap

        return look

    def flush(self) -> None:
        """Write pending report_loss() values to .prepfs/importance now."""
        if not self._pending_importance:
            return
        pairs = sorted(self._pending_importance.items())
        self._pending_importance = {}
        if self._client is not None:
            self._write("importance", lambda: self._client.report_importance(pairs))

    def close(self) -> None:
        """Flush importance and tell the daemon this job is done (`end`). Call it when training ends;
        the sampler cannot tell the last epoch from the others."""
        self.flush()
        if self._client is not None and self._published_any:
            self._write("order", lambda: self._client.end(self.job))
            self._published_any = False

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # --------------------------------------------------------------------------------- sampling

    def __len__(self) -> int:
        if self.mode == "importance":
            return self.num_samples + self._extra_count()
        return self.num_samples

    def _extra_count(self) -> int:
        return math.floor(self.extra * self.num_samples)

    def set_epoch(self, epoch: int) -> None:
        """Select the epoch the next iter() samples. A loaded mid-epoch state survives only a
        set_epoch() to its own epoch."""
        self.epoch = int(epoch)
        if self._resume is not None and self._resume["epoch"] != self.epoch:
            self._resume = None

    def _sequence(self, epoch: int, extras: Optional[List[int]]):
        """This rank's sequence for `epoch` and, in importance mode, the extras it holds."""
        base = _order.shard(_order.permutation(self.n, self.seed, epoch, self.shuffle), self.num_replicas,
                            self.rank, self.drop_last)
        if self.mode != "importance":
            return base, None
        if extras is None:
            values = self._importance[base].tolist() if base else []
            extras = _order.draw_extras(base, values, self._extra_count(), self.max_bias,
                                        _order.seed_for(self.seed, epoch, self.rank, "extras"))
        return _order.interleave(base, extras, _order.seed_for(self.seed, epoch, self.rank, "slots")), extras

    def __iter__(self):
        self.flush()  # the last batches' losses of the previous epoch, before their sequence is drawn
        resume, self._resume = self._resume, None
        if resume is not None and resume["epoch"] != self.epoch:
            resume = None
        seq, extras = self._sequence(self.epoch, resume["extras"] if resume else None)
        if resume is not None:
            if resume["length"] != len(seq):
                raise ValueError(f"the loaded state is for a sequence of {resume['length']} samples, this sampler "
                                 f"draws {len(seq)} for epoch {self.epoch}")
            progress = _Progress(self.epoch, len(seq), resume["prefix"], resume["ahead"], extras)
        else:
            progress = _Progress(self.epoch, len(seq), extras=extras)
        self._progress = progress
        remaining = [p for p in range(progress.prefix, len(seq)) if p not in progress.ahead]
        self._publish_order([seq[p] for p in remaining])
        return self._walk(seq, remaining, progress)

    def _walk(self, seq: List[int], remaining: List[int], progress: _Progress):
        if self.mode == "opportunistic" and self._client is not None:
            walk = _order.opportunistic_walk(len(remaining), self.window, self._residency(seq, remaining),
                                             self.refresh_every)
        else:
            walk = range(len(remaining))
        for q in walk:
            p = remaining[q]
            progress.mark(p)  # before the yield: once the consumer holds it, it counts as visited
            yield seq[p]
        progress.complete = True

    # ------------------------------------------------------------------------------- importance

    def report_loss(self, indices, losses) -> None:
        """Record per-sample losses (dataset indices; tensors, arrays or lists of equal length).

        Use per-sample losses (reduction="none"). Higher loss = more important. In importance mode
        they rank the samples for the next epoch's extra visits; in every mode they go to
        .prepfs/importance (in batches of importance_flush, and at each epoch start and flush()),
        where the daemon's importance policy keeps the important samples cached.
        """
        idx = _as_list(indices, "indices")
        val = _as_list(losses, "losses")
        if len(idx) != len(val):
            raise ValueError(f"{len(idx)} indices but {len(val)} losses (per-sample losses need reduction='none')")
        updates: Dict[int, float] = {}
        for i, v in zip(idx, val):
            i, v = int(i), float(v)
            if not 0 <= i < self.n:
                raise IndexError(f"dataset index {i} is out of range for {self.n} samples")
            if not (v >= 0.0 and v != math.inf):
                raise ValueError(f"loss {v} of sample {i} is not a finite non-negative number")
            updates[i] = v  # a sample twice in one report: the later loss wins
        if not updates:
            return
        self._importance[torch.tensor(list(updates))] = torch.tensor(list(updates.values()), dtype=torch.float32)
        if self._client is not None:
            sid = self._sid
            for i, v in updates.items():
                if sid[i] >= 0:
                    self._pending_importance[sid[i]] = v
            if len(self._pending_importance) >= self.importance_flush:
                self.flush()

    # ----------------------------------------------------------------------------------- resume

    def state_dict(self, unconsumed: int = 0) -> dict:
        """The state to resume from: epoch, the current epoch's progress, the reported losses.

        unconsumed: how many of the latest yields the training loop has not consumed yet (a plain
        DataLoader reads prefetch_factor x num_workers batches ahead of it); they are recorded as not
        yielded, so the resumed run visits them. At most the last HISTORY yields can be taken back.
        """
        resume = self._resume
        p = self._progress
        if resume is None and p is not None and p.epoch == self.epoch and (not p.complete or unconsumed):
            resume = p.snapshot(unconsumed)
        elif unconsumed:
            raise ValueError(f"unconsumed={unconsumed}, but no epoch is in progress")
        return {
            "version": STATE_VERSION, "mode": self.mode, "seed": self.seed, "epoch": self.epoch,
            "dataset_len": self.n, "num_replicas": self.num_replicas, "rank": self.rank, "shuffle": self.shuffle,
            "drop_last": self.drop_last, "resume": resume, "importance": self._importance.clone(),
        }

    def load_state_dict(self, state: dict) -> None:
        """Resume: the next iter() yields exactly what the saved epoch had not yielded yet (if the
        state was saved mid-epoch), then epochs go on as before."""
        if state.get("version") != STATE_VERSION:
            raise ValueError(f"state version {state.get('version')!r}, this sampler reads {STATE_VERSION}")
        mine = {"seed": self.seed, "dataset_len": self.n, "num_replicas": self.num_replicas, "rank": self.rank,
                "shuffle": self.shuffle, "drop_last": self.drop_last}
        for key, value in mine.items():
            if state[key] != value:
                raise ValueError(f"the state was saved with {key}={state[key]!r}, this sampler has {value!r}")
        # plain and opportunistic walk the same sequence, so a resume may switch between them;
        # importance sequences hold extra visits and only resume as importance.
        if (state["mode"] == "importance") != (self.mode == "importance"):
            raise ValueError(f"a {state['mode']} state cannot resume a {self.mode} sampler")
        importance = torch.as_tensor(state["importance"], dtype=torch.float32)
        if importance.shape != (self.n,):
            raise ValueError(f"the state's importance has shape {tuple(importance.shape)}, expected ({self.n},)")
        self.epoch = int(state["epoch"])
        self._resume = state["resume"]
        self._progress = None
        self._importance = importance.clone()


def _relative(path: str, roots) -> Optional[str]:
    for root in roots:
        if path.startswith(root + os.sep):
            return path[len(root) + 1:]
    return None


def _as_list(x, what: str) -> list:
    if isinstance(x, torch.Tensor):
        return x.detach().cpu().reshape(-1).tolist()
    if hasattr(x, "tolist"):  # numpy
        x = x.tolist()
    if isinstance(x, (int, float)):
        raise ValueError(f"{what} must be a sequence, not the single number {x} (per-sample losses need "
                         "reduction='none')")
    return list(x)
