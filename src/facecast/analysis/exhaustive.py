"""The exhaustive protocol (``mining.mode: all``): every genuine pair, all or a sample of the
impostor pairs, folds stratified by label and grouped by identity.

* Genuine: every within-identity pair of the pool (``n_genuine`` and the band do not apply).
* Impostor: every different-identity pair when the pool has at most ``n_impostor`` of them
  (or ``n_impostor: 0``), else a seeded uniform sample of exactly ``n_impostor`` distinct
  ones (``n_impostor`` is the TOTAL over all folds here, not a per-fold count).
* ``ref_score`` is the reference model's exact cosine (float64, stored as float32).
* Folds (``0``..``n_folds-1`` plus ``val``): stratified by label. Genuine pairs are grouped by
  identity (all pairs of an identity share a fold, so no identity's genuine pairs straddle
  a train/test split of the 10-fold accuracy) and identities are dealt, largest first, to
  the fold with the fewest genuine pairs so far; with fewer identities than folds the pairs
  are dealt one by one. Impostor pairs are shuffled and dealt round-robin. Both are
  deterministic from the seed.

Nothing is asked beyond what exists, so there is never a shortfall; the report says how
many pairs the pool holds (``available``) and whether impostors were sampled.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict
from typing import Any

import numpy as np
import pandas as pd
import torch

#: largest number of pair indices enumerated at once when most impostor pairs are wanted
ENUMERATE_MAX = 50_000_000


def _pair_from_index(k: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Triangular pair index ``k`` -> ``(i, j)`` with ``i < j`` (``k = j (j - 1) / 2 + i``)."""
    k = np.asarray(k, np.int64)
    j = ((1 + np.sqrt(1 + 8 * k.astype(np.float64))) / 2).astype(np.int64)
    j -= (j * (j - 1) // 2) > k                  # float rounding, both ways
    j += ((j + 1) * j // 2) <= k
    return k - j * (j - 1) // 2, j


def genuine_pairs(codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Every within-identity pair ``(a, b)``, ``a < b`` (row indices), identity by identity."""
    order = np.lexsort((np.arange(len(codes)), codes))
    sorted_codes = codes[order]
    starts = np.flatnonzero(np.r_[True, sorted_codes[1:] != sorted_codes[:-1]]) \
        if len(codes) else np.zeros(0, np.int64)
    sizes = np.diff(np.r_[starts, len(codes)])
    out_a, out_b = [np.zeros(0, np.int64)], [np.zeros(0, np.int64)]
    for k in np.unique(sizes[sizes >= 2]):
        members = order[starts[sizes == k][:, None] + np.arange(k)[None, :]]
        iu, ju = np.triu_indices(k, 1)
        a, b = members[:, iu].reshape(-1), members[:, ju].reshape(-1)
        out_a.append(np.minimum(a, b))
        out_b.append(np.maximum(a, b))
    a, b = np.concatenate(out_a), np.concatenate(out_b)
    keep = np.lexsort((b, a))
    return a[keep], b[keep]


def impostor_pairs(codes: np.ndarray, n: int, n_genuine: int, rng: np.random.Generator
                   ) -> tuple[np.ndarray, np.ndarray, int]:
    """``(a, b, available)``: all impostor pairs, or a uniform sample of ``n`` of them.

    ``n == 0`` or ``n >= available`` takes all (in index order); otherwise a seeded sample
    without replacement, drawn by rejection from the pair index space when impostors are
    plentiful, else by enumerating every pair index and choosing among the impostors.
    """
    N = len(codes)
    total = N * (N - 1) // 2
    available = total - n_genuine
    want_all = n <= 0 or n >= available
    if want_all or (n > available // 2 and total <= ENUMERATE_MAX):
        if total > ENUMERATE_MAX:
            raise ValueError(
                f"mining.mode all: the pool's {available:,} impostor pairs are too many to "
                f"take all; set n_impostor (the total number to sample) below {available:,}")
        a, b = _pair_from_index(np.arange(total, dtype=np.int64))
        imp = codes[a] != codes[b]
        a, b = a[imp], b[imp]
        if not want_all:
            pick = np.sort(rng.choice(len(a), size=n, replace=False))
            a, b = a[pick], b[pick]
        return a, b, int(available)
    chosen = np.zeros(0, np.int64)
    while len(chosen) < n:
        k = rng.integers(0, total, size=int(1.3 * (n - len(chosen))) + 64, dtype=np.int64)
        a, b = _pair_from_index(k)
        k = k[codes[a] != codes[b]]
        both = np.concatenate([chosen, k])
        _, first = np.unique(both, return_index=True)
        chosen = both[np.sort(first)][:n]        # distinct, in the order drawn
    chosen = np.sort(chosen)
    a, b = _pair_from_index(chosen)
    return a, b, int(available)


def stratified_folds(n_pairs: int, group: np.ndarray | None, folds: list[str],
                     rng: np.random.Generator) -> np.ndarray:
    """Fold names for ``n_pairs`` pairs of one label (see the module docstring).

    ``group`` (e.g. the identity code of a genuine pair) keeps a group's pairs in one fold
    when there are at least as many groups as folds; ``None`` deals pairs round-robin after
    a seeded shuffle.
    """
    names = np.asarray(folds, dtype=object)
    if n_pairs == 0:
        return np.zeros(0, dtype=object)
    if group is not None:
        uniq, inv, sizes = np.unique(group, return_inverse=True, return_counts=True)
        if len(uniq) >= len(folds):
            perm = rng.permutation(len(uniq))
            order = perm[np.argsort(-sizes[perm], kind="stable")]   # largest first, ties random
            load = np.zeros(len(folds), np.int64)
            fold_of = np.empty(len(uniq), np.int64)
            for g in order:
                f = int(np.argmin(load))
                fold_of[g] = f
                load[f] += sizes[g]
            return names[fold_of[inv]]
    idx = np.empty(n_pairs, np.int64)
    idx[rng.permutation(n_pairs)] = np.arange(n_pairs) % len(folds)
    return names[idx]


def exact_cosines(emb: torch.Tensor, a: np.ndarray, b: np.ndarray,
                  chunk: int = 65_536) -> np.ndarray:
    """Cosine of rows ``a`` and ``b`` of L2-normalised ``emb``, in float64."""
    out = [np.zeros(0, np.float64)]
    for s in range(0, len(a), chunk):
        ea = emb[torch.as_tensor(a[s:s + chunk], device=emb.device)].double()
        eb = emb[torch.as_tensor(b[s:s + chunk], device=emb.device)].double()
        out.append((ea * eb).sum(1).cpu().numpy())
    return np.concatenate(out)


def all_pairs(emb: torch.Tensor, codes: np.ndarray, labels: np.ndarray, image_ids: np.ndarray,
              cfg: Any, rng: np.random.Generator) -> tuple[pd.DataFrame, dict[str, Any]]:
    """The exhaustive protocol's pairs (columns of ``mining.PAIR_COLUMNS``) and report."""
    folds = cfg.fold_names
    ga, gb = genuine_pairs(codes)
    ia, ib, available = impostor_pairs(codes, int(cfg.n_impostor), len(ga), rng)
    gfold = stratified_folds(len(ga), codes[ga], folds, rng)
    ifold = stratified_folds(len(ia), None, folds, rng)
    a, b = np.r_[ga, ia], np.r_[gb, ib]
    label = np.r_[np.ones(len(ga), np.int8), np.zeros(len(ia), np.int8)]
    fold = np.r_[gfold, ifold].astype(object)
    rank_of = {f: k for k, f in enumerate(folds)}
    rank = np.asarray([rank_of[f] for f in fold], np.int64)
    order = np.lexsort((np.arange(len(a)), 1 - label, rank))      # fold by fold, genuine first
    a, b, label, fold, rank = a[order], b[order], label[order], fold[order], rank[order]
    score = exact_cosines(emb, a, b) if len(a) else np.zeros(0)
    pairs = pd.DataFrame({
        "image_a": image_ids[a].astype(str), "image_b": image_ids[b].astype(str),
        "identity_a": labels[codes[a]], "identity_b": labels[codes[b]],
        "label": label, "fold": fold.astype(str), "ref_score": score.astype(np.float32)})
    per_fold = {lab: np.bincount(rank[label == lab], minlength=len(folds)) for lab in (0, 1)}
    uses = np.bincount(np.r_[a, b], minlength=len(codes))
    n_ids = int(codes.max() + 1) if len(codes) else 0
    n_imp = len(ia)
    report = {
        "mode": "all", "band_mode": None, "band_config": None, "band": [None, None],
        "band_note": "", "device": str(emb.device),
        "pool": {"n_images": int(len(codes)), "n_identities": n_ids,
                 "n_identities_2plus": int((np.bincount(codes, minlength=n_ids) >= 2).sum())},
        "genuine": {"needed": None, "selected": int(len(ga)), "available": int(len(ga))},
        "impostor": {"needed": int(cfg.n_impostor) or None, "selected": int(n_imp),
                     "available": int(available), "sampled": bool(n_imp < available)},
        "folds_formed": "stratified by label; genuine pairs grouped by identity"
                        if len(np.unique(codes[ga])) >= len(folds) else "stratified by label",
        "max_image_uses": 0, "max_uses_observed": int(uses.max()) if len(uses) else 0,
        "images_used": int((uses > 0).sum()),
        "fold_counts": {f: {"genuine": int(per_fold[1][k]), "impostor": int(per_fold[0][k])}
                        for k, f in enumerate(folds)},
        "config": {k: v for k, v in asdict(cfg).items() if k != "extra"},
        "shortfall": False,
    }
    return pairs, report


def describe_all(report: Mapping[str, Any]) -> str:
    """One log line for an exhaustive protocol."""
    g, i = report["genuine"], report["impostor"]
    how = (f"a seeded sample of {i['selected']:,} of {i['available']:,} impostor pairs"
           if i["sampled"] else f"all {i['selected']:,} impostor pairs")
    return (f"mode all: all {g['selected']:,} genuine pairs and {how} of "
            f"{report['pool']['n_images']:,} images; folds {report['folds_formed']}")

