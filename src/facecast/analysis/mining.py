"""C11 hard-pair mining: verification pairs whose reference score lies in a band.

From a benchmark subset (images with identities) and a reference model's L2-normalised
embeddings, :func:`mine_pairs` (``mode: band``, the default) draws genuine pairs (same
identity, different images) and impostor pairs (different identities) whose cosine
similarity lies in ``band`` until every fold (``0``..``n_folds-1`` plus ``val``) holds ``n_genuine`` + ``n_impostor`` pairs.

How candidates are drawn (all deterministic from the seed):

* Genuine: identities are visited in a random order, a chunk of ``genuine_chunk_rows``
  images at a time; every within-identity pair of a chunk is scored at once (identities
  grouped by image count, one batched matrix product per group size) and the in-band
  ones join a pending pool. Once the pool holds ``genuine_oversample`` times the pairs
  still needed (or every identity was visited), it is shuffled and taken in that order.
  Only the identities needed are scored, and the picks still spread over several times
  more identities than the pairs need. ``genuine_oversample: 0`` visits every identity
  first: uniform sampling without replacement from all in-band genuine pairs.
* Impostor: the pool is shuffled once and cut into slices of ``m`` images; a block is the
  ``m x m`` score matrix between two slices, and blocks are visited in a scrambled order
  of slice pairs (each exactly once), a batch of blocks per batched matrix product (on the
  GPU when present). In each block the in-band different-identity cells are shuffled and
  matched so that an image is used at most once per block (a spread like uniform
  sampling's: the picks touch about two new images each). ``m`` is ``2 / p`` for the
  band's estimated acceptance rate ``p`` (so a block holds about two in-band cells per
  image and most rows find a partner), and a batch holds about the blocks the missing
  pairs need. Small pools that run out of blocks get a second pass over the same blocks
  without the once-per-block rule (still no repeated pair, still the global cap).
* Never the same unordered pair twice; ``max_image_uses`` caps how often an image appears
  in the whole benchmark (genuine and impostor pairs together; 0 = no cap).

The band is absolute (``band_mode: absolute``) or given as quantiles of the reference
model's impostor scores (``impostor_quantile``: estimated on ``quantile_sample`` uniformly
drawn impostor pairs of the subset) or genuine scores (``genuine_quantile``: all
within-identity pairs). When the subset cannot supply enough pairs (all candidates seen, or
``max_candidates`` impostor candidates scored), mining stops; ``on_shortfall: fail`` raises
:class:`MiningShortfall` with the report, ``write`` returns what was achieved (folds
filled evenly) and marks the report ``shortfall: true``.

``mode: all`` is the exhaustive protocol instead (every genuine pair, all or a seeded sample
of ``n_impostor`` impostor pairs in total, no band): :mod:`facecast.analysis.exhaustive`.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import pandas as pd
import torch

from facecast.analysis.exhaustive import all_pairs

log = logging.getLogger(__name__)

PAIR_COLUMNS = ["image_a", "image_b", "identity_a", "identity_b", "label", "fold", "ref_score"]


class MiningShortfall(RuntimeError):
    """The subset could not supply the requested pairs; ``report`` says what was achieved."""

    def __init__(self, message: str, report: dict[str, Any]) -> None:
        super().__init__(message)
        self.report = report


@dataclass
class MiningConfig:
    """Mining parameters (config section ``mining``, optionally overridden per benchmark)."""

    mode: str = "band"
    band: tuple[float, float] = (0.15, 0.30)
    band_mode: str = "absolute"
    n_folds: int = 10
    n_genuine: int = 500
    n_impostor: int = 500
    val_fold: bool = True
    max_image_uses: int = 7
    on_shortfall: str = "fail"
    block_size: int = 4096
    max_candidates: int = 2_000_000_000
    quantile_sample: int = 100_000
    genuine_oversample: float = 4.0
    genuine_chunk_rows: int = 16_384
    max_pool_images: int = 1_000_000
    device: str = "auto"
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_config(cls, cfg: Mapping[str, Any]) -> MiningConfig:
        """Build from a config mapping; unknown keys (e.g. ``reference_model``) go to extra."""
        names = {f for f in cls.__dataclass_fields__ if f != "extra"}
        kw = {k: v for k, v in cfg.items() if k in names}
        if "band" in kw:
            kw["band"] = tuple(float(b) for b in kw["band"])
        out = cls(**kw, extra={k: v for k, v in cfg.items() if k not in names})
        out.check()
        return out

    def check(self) -> None:
        if self.mode not in ("band", "all"):
            raise ValueError(f"mining mode {self.mode!r}: band | all")
        lo, hi = self.band
        if lo > hi:
            raise ValueError(f"mining band {self.band}: low > high")
        if self.band_mode not in ("absolute", "impostor_quantile", "genuine_quantile"):
            raise ValueError(f"band_mode {self.band_mode!r}: absolute | impostor_quantile | "
                             "genuine_quantile")
        if self.band_mode != "absolute" and not (0 <= lo <= 1 and 0 <= hi <= 1):
            raise ValueError(f"quantile band {self.band} must be fractions in [0, 1]")
        if self.on_shortfall not in ("fail", "write"):
            raise ValueError(f"on_shortfall {self.on_shortfall!r}: fail | write")

    @property
    def fold_names(self) -> list[str]:
        return [str(k) for k in range(self.n_folds)] + (["val"] if self.val_fold else [])


@dataclass
class MiningResult:
    """The mined pairs (columns :data:`PAIR_COLUMNS`) and the report of how it went."""

    pairs: pd.DataFrame
    report: dict[str, Any]


def pool_sample(identity: pd.Series | np.ndarray, max_images: int,
                rng: np.random.Generator) -> np.ndarray:
    """Mask of the images kept in a mining pool of at most about ``max_images``.

    Whole identities are kept, in a seeded random order, until ``max_images`` images are
    in (the last identity may overshoot), so genuine pairs keep every image of an
    identity. ``max_images`` 0, or a subset no larger, keeps everything.
    """
    identity = np.asarray(identity)
    if not max_images or len(identity) <= max_images:
        return np.ones(len(identity), bool)
    codes, uniques = pd.factorize(identity, sort=True)
    sizes = np.bincount(codes, minlength=len(uniques))
    order = rng.permutation(len(uniques))
    n_ids = int(np.searchsorted(np.cumsum(sizes[order]), max_images)) + 1
    chosen = np.zeros(len(uniques), bool)
    chosen[order[:n_ids]] = True
    return chosen[codes]


def resolve_device(device: str) -> torch.device:
    """``auto`` -> cuda when available, else cpu."""
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if not (device == "cpu" or str(device).startswith("cuda")):
        raise ValueError(f"mining.device: {device!r} is not a device; use auto, cpu, cuda or "
                         "cuda:N")
    if str(device).startswith("cuda") and not torch.cuda.is_available():
        raise RuntimeError(f"mining.device is {device!r} but torch sees no CUDA device on "
                           "this host; set mining.device: auto or cpu")
    return torch.device(device)


def identity_groups(codes: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(order, starts, sizes)``: rows of identity ``g`` are ``order[starts[g]:][:sizes[g]]``."""
    order = np.argsort(codes, kind="stable")
    sorted_codes = codes[order]
    starts = np.flatnonzero(np.r_[True, sorted_codes[1:] != sorted_codes[:-1]]) \
        if len(codes) else np.zeros(0, np.int64)
    sizes = np.diff(np.r_[starts, len(codes)]).astype(np.int64)
    return order, starts, sizes


class RowGather:
    """Gathers rows of ``emb`` into reused buffers (one per ``slot``).

    Fancy indexing allocates a fresh tensor per call, and fresh multi-MB allocations cost
    page faults on every call; ``index_select`` into a kept buffer does not.
    """

    def __init__(self, emb: torch.Tensor) -> None:
        self.emb = emb
        self._buffers: dict[str, torch.Tensor] = {}

    def __call__(self, idx: torch.Tensor, slot: str = "rows") -> torch.Tensor:
        n = int(idx.numel())
        buf = self._buffers.get(slot)
        if buf is None or buf.shape[0] < n:
            buf = torch.empty((n, self.emb.shape[1]), dtype=self.emb.dtype, device=self.emb.device)
            self._buffers[slot] = buf
        return torch.index_select(self.emb, 0, idx, out=buf[:n])


#: float32 scores this close to a band edge are decided on exact (float64) scores
EDGE = 1e-4


def exact_scores(emb: torch.Tensor, a: np.ndarray, b: np.ndarray, *, chunk: int = 8192,
                 gather: RowGather | None = None) -> np.ndarray:
    """Cosine of rows ``a`` and ``b`` of ``emb`` in float64 (the same on every device).

    Works ``chunk`` pairs at a time, so memory stays bounded for any number of pairs.
    """
    gather = gather or RowGather(emb)
    out = [np.zeros(0, np.float64)]
    a, b = np.asarray(a, np.int64), np.asarray(b, np.int64)
    for s in range(0, len(a), chunk):
        ea = gather(torch.as_tensor(a[s:s + chunk], device=emb.device), "a")
        eb = gather(torch.as_tensor(b[s:s + chunk], device=emb.device), "b")
        out.append((ea.double() * eb.double()).sum(1).cpu().numpy())
    return np.concatenate(out)


def settle_band(emb: torch.Tensor, a: np.ndarray, b: np.ndarray, s: np.ndarray, lo: float,
                hi: float) -> np.ndarray:
    """Mask of the candidates (float32 scores ``s`` within ``EDGE`` of the band) in band.

    Candidates near an edge are decided on their exact scores, so whether a pair is in
    band does not depend on how the device rounded its matrix product: the same config
    gives the same pairs on a CPU and a GPU (their float32 ``ref_score`` may differ in the
    last digit).
    """
    near = (s < lo + EDGE) | (s > hi - EDGE)
    keep = ~near
    if near.any():
        exact = exact_scores(emb, a[near], b[near])
        keep[near] = (exact >= lo) & (exact <= hi)
    return keep


def within_identity_scores(emb: torch.Tensor, order: np.ndarray, starts: np.ndarray,
                           sizes: np.ndarray, lo: float, hi: float, *,
                           keep_all_scores: bool = False, chunk_rows: int = 16_384,
                           gather: RowGather | None = None
                           ) -> tuple[np.ndarray, np.ndarray, np.ndarray, int, np.ndarray]:
    """Score every within-identity pair of the identities given by ``starts``/``sizes``.

    Returns the in-band pairs ``(a, b, score)`` (row indices of ``emb``, ``a < b``; band
    edges settled by :func:`settle_band`), the number of pairs scored and, with
    ``keep_all_scores``, every score in float64 (else an empty array). Identities are
    batched by image count ``k``: each chunk of a size class is one ``[c, k, D]`` batched
    matrix product.
    """
    gather = gather or RowGather(emb)
    out_a, out_b, out_s, every = [], [], [], []
    total = 0
    for k in np.unique(sizes[sizes >= 2]):
        grp = starts[sizes == k]
        members = order[grp[:, None] + np.arange(k)[None, :]]          # [n_ids, k]
        members.sort(axis=1)
        iu, ju = np.triu_indices(k, 1)
        iu_t = torch.as_tensor(iu, device=emb.device)
        ju_t = torch.as_tensor(ju, device=emb.device)
        step = max(1, chunk_rows // k)
        for s in range(0, len(members), step):
            mem_t = torch.as_tensor(members[s:s + step], device=emb.device)
            e = gather(mem_t.reshape(-1)).view(len(mem_t), k, -1)
            if keep_all_scores:
                e = e.double()
            g = torch.bmm(e, e.transpose(1, 2))[:, iu_t, ju_t]            # [c, n_pairs]
            total += g.numel()
            if keep_all_scores:
                every.append(g.reshape(-1).cpu().numpy())
            r, c = torch.nonzero((g >= lo - EDGE) & (g <= hi + EDGE), as_tuple=True)
            if r.numel():
                sc = g[r, c].float().cpu().numpy()
                a, b = mem_t[r, iu_t[c]].cpu().numpy(), mem_t[r, ju_t[c]].cpu().numpy()
                keep = settle_band(emb, a, b, sc, lo, hi)
                out_s.append(sc[keep])
                out_a.append(a[keep])
                out_b.append(b[keep])
    z = np.zeros(0, np.int64)
    return (np.concatenate(out_a) if out_a else z, np.concatenate(out_b) if out_b else z,
            np.concatenate(out_s) if out_s else np.zeros(0, np.float32), total,
            np.concatenate(every) if every else np.zeros(0, np.float64))


def random_impostor_scores(emb: torch.Tensor, codes: np.ndarray, n: int,
                           rng: np.random.Generator) -> np.ndarray:
    """Scores (float64) of ``n`` uniformly drawn different-identity pairs (fewer if the pool
    is tiny)."""
    N = len(codes)
    if N < 2 or codes.min() == codes.max():
        return np.zeros(0, np.float32)
    a = rng.integers(0, N, size=2 * n)
    b = rng.integers(0, N, size=2 * n)
    keep = codes[a] != codes[b]
    return exact_scores(emb, a[keep][:n], b[keep][:n])


class _Selector:
    """Greedy pair selection under the per-image cap, never repeating a pair.

    Picks are kept as arrays (:meth:`picked`); ``uses`` counts every image's pairs so far.
    """

    def __init__(self, n_images: int, cap: int) -> None:
        self.uses = np.zeros(n_images, np.int64)
        self.cap = cap if cap and cap > 0 else np.iinfo(np.int64).max
        self.seen: set[int] = set()              # taken pairs as min * n + max
        self.rejected_cap = 0
        self._a: list[np.ndarray] = []
        self._b: list[np.ndarray] = []
        self._s: list[np.ndarray] = []
        self.n = 0

    def take(self, a: np.ndarray, b: np.ndarray, s: np.ndarray, need: int,
             block_unique: bool = False) -> int:
        """Take up to ``need`` of the candidates in the given order; return how many.

        A candidate is skipped when its pair was taken before, (``block_unique``) when one
        of its images was already taken in this call, or when an image reached the cap.
        When the first ``need`` candidates trip none of these rules they are taken at once
        (vectorised); otherwise the candidates are walked one by one.
        """
        a, b = np.asarray(a, np.int64), np.asarray(b, np.int64)
        s = np.asarray(s, np.float32)
        head = slice(0, max(0, min(need, len(a))))
        keys = np.minimum(a[head], b[head]) * len(self.uses) + np.maximum(a[head], b[head])
        imgs = np.concatenate([a[head], b[head]])
        imgs_u, counts = np.unique(imgs, return_counts=True)
        clean = (len(np.unique(keys)) == len(keys) and self.seen.isdisjoint(keys.tolist())
                 and (not block_unique or len(imgs_u) == len(imgs))
                 and bool(np.all(self.uses[imgs_u] + counts <= self.cap)))
        if clean:
            idx = np.arange(head.stop)
            np.add.at(self.uses, imgs, 1)
            self.seen.update(keys.tolist())
        else:
            idx = self._walk(a, b, need, block_unique)
        self._a.append(a[idx])
        self._b.append(b[idx])
        self._s.append(s[idx])
        self.n += len(idx)
        return len(idx)

    def _walk(self, a: np.ndarray, b: np.ndarray, need: int, block_unique: bool) -> np.ndarray:
        keep: list[int] = []
        used_here: set[int] = set()
        uses, cap, seen, n_img = self.uses, self.cap, self.seen, len(self.uses)
        for pos, (x, y) in enumerate(zip(a.tolist(), b.tolist(), strict=True)):
            if len(keep) >= need:
                break
            key = min(x, y) * n_img + max(x, y)
            if key in seen:
                continue
            if block_unique and (x in used_here or y in used_here):
                continue
            if uses[x] >= cap or uses[y] >= cap:
                self.rejected_cap += 1
                continue
            seen.add(key)
            uses[x] += 1
            uses[y] += 1
            if block_unique:
                used_here.update((x, y))
            keep.append(pos)
        return np.asarray(keep, np.int64)

    def picked(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(a, b, score)`` of every pick so far, in the order they were taken."""
        if not self._a:
            z = np.zeros(0, np.int64)
            return z, z, np.zeros(0, np.float32)
        return np.concatenate(self._a), np.concatenate(self._b), np.concatenate(self._s)


def _mine_genuine(emb: torch.Tensor, codes: np.ndarray, lo: float, hi: float, need: int,
                  cfg: MiningConfig, sel: _Selector, rng: np.random.Generator
                  ) -> dict[str, Any]:
    """Genuine pairs: identities in a seeded random order, visited a chunk at a time.

    Each chunk's within-identity pairs are scored at once and its in-band ones join a
    pending pool; once the pool holds ``genuine_oversample`` x the pairs still needed (or
    every identity was visited) it is shuffled and offered to the selector, and the loop
    goes on while pairs are missing. ``genuine_oversample: 0`` visits every identity
    first: uniform sampling without replacement from all in-band genuine pairs.
    """
    order, starts, sizes = identity_groups(codes)
    multi = np.flatnonzero(sizes >= 2)
    visit = multi[rng.permutation(len(multi))]
    csum = np.cumsum(sizes[visit])
    gather = RowGather(emb)
    stats = {"candidates": 0, "in_band": 0, "identities_visited": 0,
             "identities_with_pairs": int(len(multi))}
    pos = 0
    while sel.n < need and pos < len(visit):
        missing = need - sel.n
        target = cfg.genuine_oversample * missing if cfg.genuine_oversample > 0 else np.inf
        pa, pb, ps, n_pending = [], [], [], 0
        while pos < len(visit) and n_pending < target:
            base = csum[pos - 1] if pos else 0
            end = max(pos + 1, int(np.searchsorted(csum, base + cfg.genuine_chunk_rows,
                                                   side="right")))
            chunk = visit[pos:end]
            pos = end
            a, b, s, n, _ = within_identity_scores(emb, order, starts[chunk], sizes[chunk],
                                                   lo, hi, chunk_rows=cfg.genuine_chunk_rows,
                                                   gather=gather)
            stats["candidates"] += n
            stats["in_band"] += len(s)
            n_pending += len(s)
            pa.append(a), pb.append(b), ps.append(s)
        stats["identities_visited"] = int(pos)
        a, b, s = np.concatenate(pa), np.concatenate(pb), np.concatenate(ps)
        shuffle = rng.permutation(len(s))
        sel.take(a[shuffle], b[shuffle], s[shuffle], missing)
    return stats


def _first_unique(idx: np.ndarray) -> np.ndarray:
    """Positions of the first occurrence of each value of ``idx`` (in order)."""
    _, first = np.unique(idx, return_index=True)
    return np.sort(first)


def block_matching(row_keys: np.ndarray, col_keys: np.ndarray, rounds: int = 3) -> np.ndarray:
    """Positions (ascending) of cells ``(row_keys[k], col_keys[k])`` using each key once.

    Rows and columns share one key space (a key is an image within a block, so a diagonal
    block's image cannot be a row in one cell and a column in another). Cells are taken in
    their given order: each round keeps the first free cell of every row key and then of
    every column key, and retires the keys it used; a few rounds come close to a maximal
    matching (what a greedy walk over the cells gives) at vectorised cost.
    """
    n = len(row_keys)
    if not n:
        return np.zeros(0, np.int64)
    _, inv = np.unique(np.concatenate([row_keys, col_keys]), return_inverse=True)
    rk, ck = inv[:n], inv[n:]
    used = np.zeros(int(inv.max()) + 1, bool)
    pos = np.arange(n)
    chosen = []
    for _ in range(rounds):
        pos = pos[~used[rk[pos]] & ~used[ck[pos]]]
        if not len(pos):
            break
        k = pos[_first_unique(rk[pos])]
        k = k[_first_unique(ck[k])]
        both = np.concatenate([rk[k], ck[k]])      # a key kept as a row and as a column
        first = np.zeros(len(both), bool)
        first[np.unique(both, return_index=True)[1]] = True
        k = k[first[:len(k)] & first[len(k):]]
        used[rk[k]] = True
        used[ck[k]] = True
        chosen.append(k)
    return np.sort(np.concatenate(chosen)) if chosen else np.zeros(0, np.int64)


def _impostor_blocks(n_slices: int, rng: np.random.Generator) -> Iterator[tuple[int, int]]:
    """Every slice pair ``(i <= j)`` exactly once, in a seeded scrambled order, lazily.

    Block numbers ``k`` (``k = j (j + 1) / 2 + i``) are visited as ``(a t + c) mod n`` with
    ``a`` coprime to ``n`` and near ``n`` / golden ratio: a bijection that needs no memory
    and spreads consecutive blocks over all slices (the slices themselves are random
    subsets of the shuffled pool).
    """
    n = n_slices * (n_slices + 1) // 2
    # a step near n / golden ratio spreads consecutive blocks evenly (low discrepancy)
    a = max(1, int(n * 0.6180339887) + int(rng.integers(0, max(1, n // 64))))
    while math.gcd(a, n) != 1:
        a += 1
    c = int(rng.integers(0, n))
    for t in range(n):
        k = (a * t + c) % n
        j = (math.isqrt(8 * k + 1) - 1) // 2
        yield k - j * (j + 1) // 2, j


def _mine_impostors(emb: torch.Tensor, codes: np.ndarray, lo: float, hi: float, need: int,
                    p_est: float, cfg: MiningConfig, sel: _Selector,
                    rng: np.random.Generator) -> dict[str, Any]:
    """Impostor pairs from batches of ``m x m`` score blocks between random slices.

    See the module docstring. Each batch of blocks is one batched matrix product; in pass
    1 every image is used at most once per block (:func:`block_matching`), pass 2 (small
    pools that ran out of blocks) revisits the same blocks with only the global rules.
    """
    N = len(codes)
    stats = {"cells_scored": 0, "in_band_cells": 0, "blocks": 0, "slice_size": 0,
             "exhausted": False, "budget_hit": False, "second_pass": False}
    start = sel.n
    if need == 0 or N < 2:
        stats["exhausted"] = need > 0
        return stats
    p = max(p_est, 1e-12)
    m = min(N, int(np.clip(math.ceil(2.0 / p), 16, max(16, cfg.block_size))))
    stats["slice_size"] = m
    n_slices = -(-N // m)
    perm = np.full(n_slices * m, -1, np.int64)       # the shuffled pool, padded to slices
    perm[:N] = rng.permutation(N)
    dev = emb.device
    valid_t = torch.as_tensor(perm >= 0, device=dev).view(n_slices, m)
    rows_t = torch.as_tensor(np.maximum(perm, 0), device=dev).view(n_slices, m)
    codes_t = torch.as_tensor(np.where(perm >= 0, codes[np.maximum(perm, 0)], -1),
                              device=dev).view(n_slices, m)
    upper = torch.triu(torch.ones(m, m, dtype=torch.bool, device=dev), diagonal=1)
    gather = RowGather(emb)
    # blocks per batch: enough for the pairs still missing, at most ~4M score cells
    per_block = max(1.0, 0.8 * m * (1.0 - math.exp(-m * p)))
    max_batch = max(1, (1 << 22) // (m * m))
    blocks = _impostor_blocks(n_slices, rng)
    visited: list[np.ndarray] = []

    def next_batch(pass_no: int, k: int) -> np.ndarray | None:
        if pass_no == 2:
            return visited[k] if k < len(visited) else None
        missing = need - (sel.n - start)
        budget = math.ceil((cfg.max_candidates - stats["cells_scored"]) / (m * m))
        size = int(np.clip(math.ceil(1.25 * missing / per_block), 1, min(max_batch, budget)))
        batch = np.array([b for _, b in zip(range(size), blocks, strict=False)], np.int64)
        return batch.reshape(-1, 2) if len(batch) else None

    for pass_no in (1, 2):
        k = 0
        while sel.n - start < need:
            if pass_no == 1 and stats["cells_scored"] >= cfg.max_candidates:
                stats["budget_hit"] = True
                break
            batch = next_batch(pass_no, k)
            k += 1
            if batch is None:
                break
            bi = torch.as_tensor(batch[:, 0], device=dev)
            bj = torch.as_tensor(batch[:, 1], device=dev)
            B = len(batch)
            A = gather(rows_t[bi].reshape(-1), "rows").view(B, m, -1)
            C = gather(rows_t[bj].reshape(-1), "cols").view(B, m, -1)
            S = torch.bmm(A, C.transpose(1, 2))                                   # [B, m, m]
            vr, vc = valid_t[bi], valid_t[bj]
            ok = (S >= lo - EDGE) & (S <= hi + EDGE) & vr[:, :, None] & vc[:, None, :] \
                & (codes_t[bi][:, :, None] != codes_t[bj][:, None, :])
            diag = bi == bj
            if bool(diag.any()):
                ok[diag] &= upper
            if pass_no == 1:
                visited.append(batch)
                nr, nc = vr.sum(1), vc.sum(1)
                stats["cells_scored"] += int(torch.where(diag, nr * (nr - 1) // 2,
                                                         nr * nc).sum())
                stats["blocks"] += B
            blk, r, c = torch.nonzero(ok, as_tuple=True)
            sc = S[blk, r, c].float().cpu().numpy()
            blk, r, c = blk.cpu().numpy(), r.cpu().numpy(), c.cpu().numpy()
            a = perm[batch[blk, 0] * m + r]
            b = perm[batch[blk, 1] * m + c]
            keep = settle_band(emb, a, b, sc, lo, hi)
            blk, a, b, sc = blk[keep], a[keep], b[keep], sc[keep]
            n_ok = len(sc)
            if pass_no == 1:
                stats["in_band_cells"] += n_ok
            if n_ok == 0:
                continue
            shuffle = rng.permutation(n_ok)
            blk, a, b, sc = blk[shuffle], a[shuffle], b[shuffle], sc[shuffle]
            if pass_no == 1:                           # each image once per block
                keep = block_matching(blk * N + a, blk * N + b)
                a, b, sc = a[keep], b[keep], sc[keep]
            sel.take(a, b, sc, need - (sel.n - start))
        if sel.n - start >= need or stats["budget_hit"]:
            break
        stats["second_pass"] = pass_no == 1
    stats["exhausted"] = sel.n - start < need and not stats["budget_hit"]
    return stats


def _assign_folds(n: int, folds: list[str], per_fold: int) -> np.ndarray:
    if n == len(folds) * per_fold:
        idx = np.arange(n) // max(per_fold, 1)
    else:  # shortfall: spread what there is evenly
        idx = (np.arange(n) * len(folds)) // max(n, 1)
    return np.asarray(folds, dtype=object)[idx] if n else np.zeros(0, dtype=object)


def _estimate_band(e: torch.Tensor, codes: np.ndarray, cfg: MiningConfig,
                   imp_sample: np.ndarray) -> tuple[float, float, str]:
    """The absolute band ``(lo, hi, note)``; quantile bands are read off the subset's scores.

    ``note`` is non-empty when a quantile band cannot be estimated (then ``lo > hi``: an
    empty band that selects nothing).
    """
    lo, hi = cfg.band
    if cfg.band_mode == "absolute":
        return float(lo), float(hi), ""
    if cfg.band_mode == "genuine_quantile":
        sample = within_identity_scores(e, *identity_groups(codes), 1.0, -1.0,
                                        keep_all_scores=True)[4]
    else:
        sample = imp_sample
    if len(sample) == 0:
        kind = cfg.band_mode.split("_")[0]
        return float("inf"), float("-inf"), \
            f"no {kind} pairs in the subset to estimate the quantile band from"
    # rounded, so float64 summation-order noise (CPU vs GPU) cannot move the band
    lo, hi = (round(float(q), 12) for q in np.quantile(sample, cfg.band))
    return lo, hi, ""


def mine_pairs(emb: np.ndarray | torch.Tensor, identity: np.ndarray | pd.Categorical,
               image_ids: np.ndarray, cfg: MiningConfig, seed: int | list[int]) -> MiningResult:
    """Mine genuine and impostor pairs in the score band (see the module docstring).

    ``emb`` rows are L2-normalised embeddings of ``image_ids`` with ``identity`` labels
    (any array; a ``pandas.Categorical`` is factorised without touching the strings).
    Same inputs and seed give the same pairs. Raises :class:`MiningShortfall` when
    ``cfg.on_shortfall == 'fail'`` and the subset cannot supply the pairs.
    """
    rng = np.random.default_rng(seed)
    device = resolve_device(cfg.device)
    e = torch.as_tensor(np.asarray(emb, dtype=np.float32)) if not torch.is_tensor(emb) else emb
    e = e.to(device=device, dtype=torch.float32).contiguous()
    image_ids = np.asarray(image_ids)
    codes, labels = pd.factorize(identity, sort=True)   # fast for a Categorical
    labels = np.asarray(labels).astype(str)
    N = len(codes)
    if cfg.mode == "all":
        pairs, report = all_pairs(e, codes, labels, image_ids, cfg, rng)
        return MiningResult(pairs, report)
    folds = cfg.fold_names
    need_g, need_i = len(folds) * cfg.n_genuine, len(folds) * cfg.n_impostor

    imp_sample = random_impostor_scores(
        e, codes, cfg.quantile_sample if cfg.band_mode == "impostor_quantile" else 2048, rng)
    lo, hi, band_note = _estimate_band(e, codes, cfg, imp_sample)
    if band_note and cfg.on_shortfall == "fail":
        raise MiningShortfall(f"mining: {band_note} ({N} images)",
                              {"shortfall": True, "band_note": band_note})
    p_est = float(((imp_sample >= lo) & (imp_sample <= hi)).mean()) if len(imp_sample) else 0.0

    sel = _Selector(N, cfg.max_image_uses)
    gstats = _mine_genuine(e, codes, lo, hi, need_g, cfg, sel, rng)
    n_gen, g_rejected_cap = sel.n, sel.rejected_cap
    istats = _mine_impostors(e, codes, lo, hi, need_i, p_est, cfg, sel, rng)
    n_imp = sel.n - n_gen

    a, b, score = sel.picked()
    label = np.r_[np.ones(n_gen, np.int8), np.zeros(n_imp, np.int8)]
    fold = np.r_[_assign_folds(n_gen, folds, cfg.n_genuine),
                 _assign_folds(n_imp, folds, cfg.n_impostor)].astype(object)
    fold_rank = {f: k for k, f in enumerate(folds)}
    rank = np.asarray([fold_rank[f] for f in fold], np.int64)
    order = np.lexsort((1 - label, rank))                # fold by fold, genuine first
    a, b, score, label, fold = a[order], b[order], score[order], label[order], fold[order]
    pairs = pd.DataFrame({
        "image_a": image_ids[a].astype(str), "image_b": image_ids[b].astype(str),
        "identity_a": labels[codes[a]], "identity_b": labels[codes[b]],
        "label": label, "fold": fold.astype(str), "ref_score": score.astype(np.float32)},
        columns=PAIR_COLUMNS)

    rank = rank[order]
    per_fold = {lab: np.bincount(rank[label == lab], minlength=len(folds)) for lab in (0, 1)}
    uses = sel.uses
    n_cells = istats["cells_scored"]
    n_gen_candidates = gstats["candidates"]
    report = {
        "band_mode": cfg.band_mode, "band_config": list(cfg.band),
        "band": [lo, hi] if not band_note else [None, None], "band_note": band_note,
        "device": str(device),
        "pool": {"n_images": int(N), "n_identities": int(codes.max() + 1) if N else 0,
                 "n_identities_2plus": gstats["identities_with_pairs"]},
        "genuine": {"needed": need_g, "selected": n_gen,
                    "candidates": int(n_gen_candidates), "in_band": int(gstats["in_band"]),
                    "acceptance_rate": float(gstats["in_band"] / n_gen_candidates)
                    if n_gen_candidates else 0.0,
                    "identities_visited": gstats["identities_visited"],
                    "rejected_by_image_cap": int(g_rejected_cap)},
        "impostor": {"needed": need_i, "selected": n_imp, "candidates_scored": int(n_cells),
                     "in_band": int(istats["in_band_cells"]),
                     "acceptance_rate": float(istats["in_band_cells"] / n_cells) if n_cells else 0.0,
                     "estimated_acceptance_rate": p_est, "blocks": istats["blocks"],
                     "slice_size": istats["slice_size"], "all_candidates_seen": istats["exhausted"],
                     "candidate_budget_hit": istats["budget_hit"],
                     "second_pass": istats["second_pass"],
                     "rejected_by_image_cap": int(sel.rejected_cap - g_rejected_cap)},
        "max_image_uses": cfg.max_image_uses,
        "max_uses_observed": int(uses.max()) if N else 0,
        "images_used": int((uses > 0).sum()),
        "fold_counts": {f: {"genuine": int(per_fold[1][k]), "impostor": int(per_fold[0][k])}
                        for k, f in enumerate(folds)},
        "config": {k: v for k, v in asdict(cfg).items() if k != "extra"},
    }
    report["shortfall"] = n_gen < need_g or n_imp < need_i
    if report["shortfall"]:
        msg = shortfall_message(report)
        if cfg.on_shortfall == "fail":
            raise MiningShortfall(msg, report)
        log.warning("%s", msg)
    return MiningResult(pairs, report)


def shortfall_message(report: Mapping[str, Any]) -> str:
    """One readable paragraph: what was asked, what was achieved, and why it stopped."""
    g, i = report["genuine"], report["impostor"]
    lo, hi = (float("nan") if b is None else b for b in report["band"])
    why = []
    if g["selected"] < g["needed"]:
        why.append(f"genuine: {g['selected']}/{g['needed']} (of {g['candidates']} within-identity "
                   f"pairs {g['in_band']} are in band, acceptance {g['acceptance_rate']:.4f}; "
                   f"{g['rejected_by_image_cap']} refused by the image-use cap)")
    if i["selected"] < i["needed"]:
        cause = ("all candidate pairs were scored" if i["all_candidates_seen"] else
                 "the candidate budget (mining.max_candidates) ran out")
        why.append(f"impostor: {i['selected']}/{i['needed']} ({i['candidates_scored']} candidates "
                   f"scored, {i['in_band']} in band, acceptance {i['acceptance_rate']:.5f}; "
                   f"{cause})")
    pool = report["pool"]
    return (f"mining shortfall in band [{lo:.4f}, {hi:.4f}] ({report['band_mode']}) on a pool of "
            f"{pool['n_images']} images / {pool['n_identities']} identities: " + "; ".join(why)
            + ". Widen the band, lower n_genuine/n_impostor, raise max_image_uses, or set "
            "on_shortfall: write to keep what was achieved.")
