"""C11 mining's band search: pick genuine and impostor pairs whose reference score is in band.

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

:class:`PairSelector` enforces the last two rules; :func:`mine_genuine` and
:func:`mine_impostors` feed it candidates (scored by :mod:`facecast.analysis.mining_scores`).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import numpy as np
import torch

from facecast.analysis.mining_config import MiningConfig
from facecast.analysis.mining_scores import (
    EDGE,
    RowGather,
    identity_groups,
    settle_band,
    within_identity_scores,
)


class PairSelector:
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


def mine_genuine(emb: torch.Tensor, codes: np.ndarray, lo: float, hi: float, need: int,
                  cfg: MiningConfig, sel: PairSelector, rng: np.random.Generator
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


def impostor_blocks(n_slices: int, rng: np.random.Generator) -> Iterator[tuple[int, int]]:
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


def mine_impostors(emb: torch.Tensor, codes: np.ndarray, lo: float, hi: float, need: int,
                    p_est: float, cfg: MiningConfig, sel: PairSelector,
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
    blocks = impostor_blocks(n_slices, rng)
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

