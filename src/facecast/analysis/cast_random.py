"""Verification lists CAST's way, without embeddings (``mining.mode: cast_random``).

CAST's ``dataset_builder/subset_tool.py`` draws, from a filtered list of paths in their
array order:

* genuine pairs: a random *identity run* (a maximal block of neighbouring rows of the same
  folder, CAST's ``make_id_array``) whose first row is followed by a row of the same
  folder gives the pair (first row, next row);
* impostor pairs: two random paths of different folders, both then removed from the pool;
* folds: ``0.list`` .. ``9.list``, each genuine lines then impostor lines.

Its bugs are fixed here, on purpose (each fix keeps what the code meant to do):

1. Reuse: CAST removes the drawn run start only when no pair was formed (``rand_select``
   is moved by 2 before the deletion), so a run can give the same genuine pair again; its
   ``unused_ids`` compares row numbers with paths and never shrinks. Here every run gives
   at most one genuine pair and each pair is drawn once.
2. Termination: CAST loops forever when fewer runs of two or more images exist than pairs
   are asked (and when the remaining impostor pool is one identity). Here the draws stop
   when the candidates are exhausted; ``on_shortfall`` says whether that fails (the
   report names what was found) or writes what was found.
3. Folds: CAST samples each fold independently from all drawn pairs with an unseeded
   generator (a pair can sit in several folds) and samples impostors with the genuine
   count. Here the drawn pairs are dealt into disjoint folds, ``n_genuine`` +
   ``n_impostor`` each, plus ``val`` when ``mining.val_fold``.
4. Seeds: everything is drawn from the benchmark's seed (``[seed, crc32(name)]``), so the
   same config gives the same lists.

As in CAST, an image may appear in one genuine and one impostor pair (the two draws use
the same pool); within each class no image repeats. ``ref_score`` is NaN: no model scored
the pairs.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from facecast.analysis.mining_config import PAIR_COLUMNS, MiningConfig, MiningResult


def identity_runs(identity: np.ndarray) -> np.ndarray:
    """First row of every run of equal neighbouring identities (CAST's ``make_id_array``)."""
    ident = np.asarray(identity)
    if not len(ident):
        return np.zeros(0, np.int64)
    change = np.flatnonzero(ident[1:] != ident[:-1]) + 1
    return np.r_[0, change].astype(np.int64)


def pair_starts(identity: np.ndarray) -> np.ndarray:
    """Run starts whose next row has the same identity (runs of two or more rows)."""
    ident = np.asarray(identity)
    starts = identity_runs(ident)
    ok = starts[starts + 1 < len(ident)]
    return ok[ident[ok + 1] == ident[ok]]


def draw_genuine(identity: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
    """Up to ``n`` genuine pairs ``(row, row + 1)``: the first two rows of distinct, randomly
    chosen identity runs of at least two rows. Shape ``(k, 2)``, ``k <= n``."""
    chosen = rng.permutation(pair_starts(identity))[:n]
    return np.stack([chosen, chosen + 1], axis=1) if len(chosen) else np.zeros((0, 2), np.int64)


def draw_impostors(identity: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
    """Up to ``n`` impostor pairs of different identities, no image used twice.

    Rounds: the images still free are shuffled and paired in order; pairs of two
    identities are kept, the images of rejected pairs go back for the next round. Stops
    with ``n`` pairs, or when a round keeps none (what is left is one identity or one
    image). Shape ``(k, 2)``.
    """
    codes = pd.factorize(np.asarray(identity))[0]
    free = np.arange(len(codes))
    out: list[np.ndarray] = []
    have = 0
    while have < n and len(free) >= 2:
        perm = rng.permutation(free)
        m = len(perm) // 2
        a, b = perm[:m], perm[m:2 * m]
        keep = codes[a] != codes[b]
        if not keep.any():
            break
        pairs = np.stack([a[keep], b[keep]], axis=1)[:n - have]
        out.append(pairs)
        have += len(pairs)
        used = np.zeros(len(codes), bool)
        used[pairs.ravel()] = True
        free = free[~used[free]]
    return np.concatenate(out) if out else np.zeros((0, 2), np.int64)


def cast_random_pairs(image_id: Sequence[str], identity: Sequence[str], cfg: MiningConfig,
                      seed: Sequence[int]) -> MiningResult:
    """CAST's random verification pairs of a subset (rows in the subset's order), dealt into
    ``cfg.fold_names``; raises nothing itself: ``report["shortfall"]`` says whether the
    subset fell short (the caller applies ``on_shortfall``)."""
    ids = np.asarray(image_id).astype(str)
    ident = np.asarray(identity).astype(str)
    folds = cfg.fold_names
    need_g, need_i = cfg.n_genuine * len(folds), cfg.n_impostor * len(folds)
    rng = np.random.default_rng([*seed, 7])
    gen = draw_genuine(ident, need_g, rng)
    imp = draw_impostors(ident, need_i, rng)
    per_g = len(gen) // len(folds) if len(gen) < need_g else cfg.n_genuine
    per_i = len(imp) // len(folds) if len(imp) < need_i else cfg.n_impostor
    gen, imp = gen[:per_g * len(folds)], imp[:per_i * len(folds)]
    rows = []
    for label, pairs, per in ((1, gen, per_g), (0, imp, per_i)):
        fold = np.repeat(np.asarray(folds, dtype=object), per)
        rows.append(pd.DataFrame({"image_a": ids[pairs[:, 0]], "image_b": ids[pairs[:, 1]],
                                  "identity_a": ident[pairs[:, 0]],
                                  "identity_b": ident[pairs[:, 1]], "label": label,
                                  "fold": fold, "ref_score": np.nan}))
    out = pd.concat(rows, ignore_index=True)[PAIR_COLUMNS]
    out["label"] = out["label"].astype(np.int8)
    order = {f: k for k, f in enumerate(folds)}
    out = out.sort_values(["fold", "label"], key=lambda s: s.map(order) if s.name == "fold"
                          else -s, kind="mergesort").reset_index(drop=True)
    n_runs = len(identity_runs(ident))
    report: dict[str, Any] = {
        "mode": "cast_random", "band": [None, None],
        "pool": {"n_images": int(len(ids)), "n_identity_runs": int(n_runs)},
        "genuine": {"needed": int(need_g), "available": int(len(pair_starts(ident))),
                    "selected": int(len(gen))},
        "impostor": {"needed": int(need_i), "selected": int(len(imp))},
        "shortfall": bool(len(gen) < need_g or len(imp) < need_i),
        "folds_formed": (f"CAST random pairs dealt into {len(folds)} disjoint folds of "
                         f"{per_g} genuine + {per_i} impostor pairs"),
    }
    return MiningResult(out, report)
