"""C11 hard-pair mining: verification pairs whose reference score lies in a band.

From a benchmark subset (images with identities) and a reference model's L2-normalised
embeddings, :func:`mine_pairs` draws genuine pairs (same identity, different images) and
impostor pairs (different identities) whose cosine similarity lies in ``band`` until every
fold (``0``..``n_folds-1`` plus ``val``) holds ``n_genuine`` + ``n_impostor`` pairs.

How candidates are drawn (all deterministic from the seed):

* Genuine: every within-identity pair of the subset is enumerated and scored at once
  (identities grouped by image count, one batched matrix product per group size), the
  in-band ones are shuffled and taken in that order. This is uniform sampling without
  replacement from the in-band genuine pairs.
* Impostor: the pool is shuffled once and cut into slices of ``m`` images; a block is the
  ``m x m`` score matrix between two slices (one matrix product, on the GPU when present),
  visited in a random order of slice pairs, so no candidate pair is scored twice. In each
  block the in-band different-identity cells are shuffled and thinned so that an image is
  used at most once per block; the slice size is chosen from the band's acceptance rate
  (about four in-band candidates per image per block), so each block yields up to ``m``
  pairs at ~``4/p`` candidates per pair instead of a loop over single candidates. Small
  pools that run out of blocks get a second pass over the same blocks without the
  once-per-block rule (still no repeated pair, still the global cap).
* Never the same unordered pair twice; ``max_image_uses`` caps how often an image appears
  in the whole benchmark (genuine and impostor pairs together; 0 = no cap).

The band is absolute (``band_mode: absolute``) or given as quantiles of the reference
model's impostor scores (``impostor_quantile``: estimated on ``quantile_sample`` uniformly
drawn impostor pairs of the subset) or genuine scores (``genuine_quantile``: all
within-identity pairs). When the subset cannot supply enough pairs (all candidates seen, or
``max_candidates`` impostor candidates scored), mining stops; ``on_shortfall: fail`` raises
:class:`MiningShortfall` with the report, ``write`` returns what was achieved (folds
filled evenly) and marks the report ``shortfall: true``.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import pandas as pd
import torch

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


def resolve_device(device: str) -> torch.device:
    """``auto`` -> cuda when available, else cpu."""
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device)


def genuine_candidates(emb: torch.Tensor, codes: np.ndarray, lo: float, hi: float, *,
                       keep_all_scores: bool = False, chunk_rows: int = 16_384
                       ) -> tuple[np.ndarray, np.ndarray, np.ndarray, int, np.ndarray | None]:
    """In-band within-identity pairs ``(a, b, score)`` with ``a < b`` (row indices of ``emb``).

    Also returns the number of within-identity pairs scored and, with ``keep_all_scores``,
    every such score (for genuine-quantile bands). Identities are grouped by image count
    ``k``; each chunk of a group is one batched ``[c, k, D]`` matrix product.
    """
    order = np.argsort(codes, kind="mergesort")
    sorted_codes = codes[order]
    starts = np.flatnonzero(np.r_[True, sorted_codes[1:] != sorted_codes[:-1]])
    sizes = np.diff(np.r_[starts, len(codes)])
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
            mem = members[s:s + step]
            mem_t = torch.as_tensor(mem, device=emb.device)
            e = emb[mem_t.reshape(-1)].view(len(mem), k, -1)
            g = torch.bmm(e, e.transpose(1, 2))[:, iu_t, ju_t]            # [c, n_pairs]
            total += g.numel()
            if keep_all_scores:
                every.append(g.reshape(-1).float().cpu().numpy())
            r, c = torch.nonzero((g >= lo) & (g <= hi), as_tuple=True)
            if r.numel():
                out_s.append(g[r, c].float().cpu().numpy())
                out_a.append(mem_t[r, iu_t[c]].cpu().numpy())
                out_b.append(mem_t[r, ju_t[c]].cpu().numpy())
    all_scores = (np.concatenate(every) if every else np.zeros(0, np.float32)) \
        if keep_all_scores else None
    if not out_a:
        z = np.zeros(0, np.int64)
        return z, z, np.zeros(0, np.float32), total, all_scores
    return (np.concatenate(out_a), np.concatenate(out_b), np.concatenate(out_s), total,
            all_scores)


def random_impostor_scores(emb: torch.Tensor, codes: np.ndarray, n: int,
                           rng: np.random.Generator) -> np.ndarray:
    """Scores of ``n`` uniformly drawn different-identity pairs (fewer if the pool is tiny)."""
    N = len(codes)
    if N < 2 or codes.min() == codes.max():
        return np.zeros(0, np.float32)
    a = rng.integers(0, N, size=2 * n)
    b = rng.integers(0, N, size=2 * n)
    keep = codes[a] != codes[b]
    a, b = a[keep][:n], b[keep][:n]
    out = []
    for s in range(0, len(a), 8192):
        ia = torch.as_tensor(a[s:s + 8192], device=emb.device)
        ib = torch.as_tensor(b[s:s + 8192], device=emb.device)
        out.append((emb[ia] * emb[ib]).sum(1).float().cpu().numpy())
    return np.concatenate(out) if out else np.zeros(0, np.float32)


class _Selector:
    """Greedy pair selection under the per-image cap, never repeating a pair."""

    def __init__(self, n_images: int, cap: int) -> None:
        self.uses = np.zeros(n_images, np.int64)
        self.cap = cap if cap and cap > 0 else np.iinfo(np.int64).max
        self.seen: set[tuple[int, int]] = set()
        self.rejected_cap = 0

    def take(self, a: np.ndarray, b: np.ndarray, s: np.ndarray, need: int,
             block_unique: bool = False) -> list[tuple[int, int, float]]:
        """Take up to ``need`` of the candidates in the given order."""
        chosen: list[tuple[int, int, float]] = []
        used_here: set[int] = set()
        uses, cap, seen = self.uses, self.cap, self.seen
        for x, y, sc in zip(a.tolist(), b.tolist(), s.tolist(), strict=True):
            if len(chosen) >= need:
                break
            key = (x, y) if x < y else (y, x)
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
            chosen.append((x, y, sc))
        return chosen


def _first_unique(idx: np.ndarray) -> np.ndarray:
    """Positions of the first occurrence of each value of ``idx`` (in order)."""
    _, first = np.unique(idx, return_index=True)
    return np.sort(first)


def _mine_impostors(emb: torch.Tensor, codes: np.ndarray, lo: float, hi: float, need: int,
                    p_est: float, cfg: MiningConfig, sel: _Selector,
                    rng: np.random.Generator) -> tuple[list[tuple[int, int, float]],
                                                        dict[str, Any]]:
    N = len(codes)
    stats = {"cells_scored": 0, "in_band_cells": 0, "blocks": 0, "slice_size": 0,
             "exhausted": False, "budget_hit": False, "second_pass": False}
    chosen: list[tuple[int, int, float]] = []
    if need == 0 or N < 2:
        stats["exhausted"] = need > 0
        return chosen, stats
    m = int(np.clip(math.ceil(4.0 / max(p_est, 1e-12)), 256, max(256, cfg.block_size)))
    m = min(m, N)
    stats["slice_size"] = m
    perm = rng.permutation(N)
    perm_t = torch.as_tensor(perm, device=emb.device)
    codes_p = torch.as_tensor(codes[perm], device=emb.device)
    n_slices = -(-N // m)
    n_blocks = n_slices * (n_slices + 1) // 2
    if n_blocks <= 2_000_000:
        iu, ju = np.triu_indices(n_slices)
        order = rng.permutation(n_blocks)
        first_pass = [(int(iu[k]), int(ju[k])) for k in order]
    else:  # huge pools: random slice pairs, remembered so none is scored twice
        def _random_blocks():
            seen_blocks: set[tuple[int, int]] = set()
            while len(seen_blocks) < n_blocks:
                i, j = sorted(rng.integers(0, n_slices, 2).tolist())
                if (i, j) not in seen_blocks:
                    seen_blocks.add((i, j))
                    yield i, j
        first_pass = _random_blocks()
    lo_t, hi_t = float(lo), float(hi)
    visited: list[tuple[int, int]] = []
    # pass 1: an image at most once per block; pass 2 (small pools that ran out of blocks):
    # the same blocks again with only the global cap and the no-repeat rule
    for pass_no, blocks in ((1, first_pass), (2, visited)):
        for i, j in blocks:
            if len(chosen) >= need:
                break
            if stats["cells_scored"] >= cfg.max_candidates:
                stats["budget_hit"] = True
                break
            if pass_no == 1:
                visited.append((i, j))
            ri = slice(i * m, min(N, (i + 1) * m))
            rj = slice(j * m, min(N, (j + 1) * m))
            s = emb[perm_t[ri]] @ emb[perm_t[rj]].T
            ok = (s >= lo_t) & (s <= hi_t) & (codes_p[ri][:, None] != codes_p[rj][None, :])
            if i == j:
                ok = torch.triu(ok, diagonal=1)
            if pass_no == 1:
                stats["cells_scored"] += (s.shape[0] * (s.shape[0] - 1) // 2 if i == j
                                          else s.shape[0] * s.shape[1])
                stats["blocks"] += 1
            r, c = torch.nonzero(ok, as_tuple=True)
            n_ok = int(r.numel())
            if pass_no == 1:
                stats["in_band_cells"] += n_ok
            if n_ok == 0:
                continue
            sc = s[r, c].float().cpu().numpy()
            r, c = r.cpu().numpy(), c.cpu().numpy()
            shuffle = rng.permutation(n_ok)
            r, c, sc = r[shuffle], c[shuffle], sc[shuffle]
            if pass_no == 1:
                k = _first_unique(r)                   # one pair per row image ...
                r, c, sc = r[k], c[k], sc[k]
                k = _first_unique(c)                   # ... and per column image
                r, c, sc = r[k], c[k], sc[k]
            a = perm[ri.start + r]
            b = perm[rj.start + c]
            chosen += sel.take(a, b, sc, need - len(chosen), block_unique=pass_no == 1)
        if len(chosen) >= need or stats["budget_hit"]:
            break
        stats["second_pass"] = pass_no == 1
    stats["exhausted"] = len(chosen) < need and not stats["budget_hit"]
    return chosen, stats


def _assign_folds(n: int, folds: list[str], per_fold: int) -> np.ndarray:
    if n == len(folds) * per_fold:
        idx = np.arange(n) // max(per_fold, 1)
    else:  # shortfall: spread what there is evenly
        idx = (np.arange(n) * len(folds)) // max(n, 1)
    return np.asarray(folds, dtype=object)[idx] if n else np.zeros(0, dtype=object)


def mine_pairs(emb: np.ndarray | torch.Tensor, identity: np.ndarray, image_ids: np.ndarray,
               cfg: MiningConfig, seed: int | list[int]) -> MiningResult:
    """Mine genuine and impostor pairs in the score band (see the module docstring).

    ``emb`` rows are L2-normalised embeddings of ``image_ids`` with ``identity`` labels.
    Same inputs and seed give the same pairs. Raises :class:`MiningShortfall` when
    ``cfg.on_shortfall == 'fail'`` and the subset cannot supply the pairs.
    """
    t0 = time.perf_counter()
    rng = np.random.default_rng(seed)
    device = resolve_device(cfg.device)
    e = torch.as_tensor(np.asarray(emb, dtype=np.float32)) if not torch.is_tensor(emb) else emb
    e = e.to(device=device, dtype=torch.float32).contiguous()
    identity = np.asarray(identity).astype(str)
    image_ids = np.asarray(image_ids).astype(str)
    codes, _ = pd.factorize(identity, sort=True)
    N = len(codes)
    folds = cfg.fold_names
    need_g, need_i = len(folds) * cfg.n_genuine, len(folds) * cfg.n_impostor

    imp_sample = random_impostor_scores(
        e, codes, cfg.quantile_sample if cfg.band_mode == "impostor_quantile" else 4096, rng)
    lo, hi = cfg.band
    band_note = ""
    if cfg.band_mode == "genuine_quantile":
        _, _, _, _, sample = genuine_candidates(e, codes, 1.0, -1.0, keep_all_scores=True)
    elif cfg.band_mode == "impostor_quantile":
        sample = imp_sample
    if cfg.band_mode != "absolute":
        if len(sample) == 0:
            kind = cfg.band_mode.split("_")[0]
            band_note = f"no {kind} pairs in the subset to estimate the quantile band from"
            if cfg.on_shortfall == "fail":
                raise MiningShortfall(f"mining: {band_note} ({N} images)",
                                      {"shortfall": True, "band_note": band_note})
            lo, hi = float("inf"), float("-inf")   # an empty band: nothing is selected
        else:
            lo, hi = (float(q) for q in np.quantile(sample, cfg.band))
    ga, gb, gs, n_gen_candidates = genuine_candidates(e, codes, lo, hi)[:4]
    p_est = float(((imp_sample >= lo) & (imp_sample <= hi)).mean()) if len(imp_sample) else 0.0

    sel = _Selector(N, cfg.max_image_uses)
    order = rng.permutation(len(gs))
    genuine = sel.take(ga[order], gb[order], gs[order], need_g)
    g_rejected_cap = sel.rejected_cap
    impostor, istats = _mine_impostors(e, codes, lo, hi, need_i, p_est, cfg, sel, rng)

    rows = []
    for label, chosen, per in ((1, genuine, cfg.n_genuine), (0, impostor, cfg.n_impostor)):
        fold = _assign_folds(len(chosen), folds, per)
        for (a, b, s), f in zip(chosen, fold, strict=True):
            rows.append((image_ids[a], image_ids[b], identity[a], identity[b], label, f, s))
    pairs = pd.DataFrame(rows, columns=PAIR_COLUMNS)
    pairs["label"] = pairs["label"].astype(np.int8)
    pairs["ref_score"] = pairs["ref_score"].astype(np.float32)
    pairs["fold"] = pairs["fold"].astype(str)
    rank = {f: k for k, f in enumerate(folds)}
    pairs["_f"] = pairs["fold"].map(rank)
    pairs = (pairs.sort_values(["_f", "label"], ascending=[True, False], kind="mergesort")
             .drop(columns="_f").reset_index(drop=True))

    uses = sel.uses
    n_cells = istats["cells_scored"]
    report = {
        "band_mode": cfg.band_mode, "band_config": list(cfg.band),
        "band": [lo, hi] if not band_note else [None, None], "band_note": band_note,
        "device": str(device),
        "pool": {"n_images": int(N), "n_identities": int(codes.max() + 1) if N else 0,
                 "n_identities_2plus": int((np.bincount(codes) >= 2).sum()) if N else 0},
        "genuine": {"needed": need_g, "selected": len(genuine),
                    "candidates": int(n_gen_candidates), "in_band": int(len(gs)),
                    "acceptance_rate": float(len(gs) / n_gen_candidates)
                    if n_gen_candidates else 0.0,
                    "rejected_by_image_cap": int(g_rejected_cap)},
        "impostor": {"needed": need_i, "selected": len(impostor), "candidates_scored": int(n_cells),
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
        "fold_counts": {f: {"genuine": int(((pairs.fold == f) & (pairs.label == 1)).sum()),
                            "impostor": int(((pairs.fold == f) & (pairs.label == 0)).sum())}
                        for f in folds},
        "seconds": round(time.perf_counter() - t0, 3),
        "config": {k: v for k, v in asdict(cfg).items() if k != "extra"},
    }
    report["shortfall"] = len(genuine) < need_g or len(impostor) < need_i
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
