"""The ChaLearn FairFace 2020 bias metric (Sixta et al., ECCV 2020 workshops).

For a protected group a and a combination x_L of legitimate attributes:

- positive pairs: AUC+(a; x_L) = AUC of group a's positive pairs with combination x_L
  against ALL negative pairs (of every group, combination, and mixed pairs);
- negative pairs: AUC-(a; x_L) = AUC of ALL positive pairs against group a's negative pairs
  with combination x_L;
- discrimination d(a; x_L) = max over groups a' present at x_L of AUC(a'; x_L) - AUC(a; x_L);
- Bias = max_a mean_{x_L} d(a; x_L) - min_a mean_{x_L} d(a; x_L), once for + and once for -;
- accuracy = AUC over all (reference) pairs.

Sparse cells (our stated handling, the challenge data did not need one): a cell (a, x_L)
takes part only when it holds at least ``min_pairs`` pairs of its sign; a group is
"present at x_L" when its cell takes part. A combination takes part only when at least
``min_groups`` groups are present there. The default, ``min_groups = 1``, is the paper's
eq. 3-4 read literally: a combination where one group alone is present gives that group
d = 0 (it is the best present group) and the 0 enters its mean. ``min_groups = 2`` is a
facecast deviation (an option): a lone group compares nothing, so such combinations are
left out instead of pulling that group's mean towards 0. The mean over x_L of a group
runs over the combinations where that group is present. A group present at no
combination has no mean discrimination and is left out of max/min. Constant scores give
every AUC 0.5, every d 0 and Bias 0 (read accuracy beside it).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from facecast.fairness.auc import grouped_auc, rank_auc


def codes_of(values: np.ndarray, categories: list[str]) -> np.ndarray:
    """Position of each value's text in ``categories``; -1 for missing or unlisted values."""
    v = pd.Series(np.asarray(values, dtype=object))
    text = v.where(v.isna(), v.astype(str))
    return pd.Index(categories, dtype=object).get_indexer(text).astype(np.int64)


@dataclass
class CellIndex:
    """Integer codes of the groups and combinations of the pairs in cells."""

    groups: list[str]
    combos: list[str]
    cells: np.ndarray  # per pair: group_code * n_combos + combo_code, -1 if not in cells

    @property
    def shape(self) -> tuple[int, int]:
        return len(self.groups), len(self.combos)


def cell_index(group: np.ndarray, combo: np.ndarray, in_cells: np.ndarray) -> CellIndex:
    """Code each pair's (group, combination) cell; pairs outside ``in_cells`` get -1."""
    in_cells = np.asarray(in_cells, bool)
    g = np.asarray(group, dtype=object)
    c = np.asarray(combo, dtype=object)
    groups = sorted({str(x) for x in g[in_cells]})
    combos = sorted({str(x) for x in c[in_cells]})
    gc = codes_of(g, groups)
    cc = codes_of(c, combos)
    cells = np.where(in_cells & (gc >= 0) & (cc >= 0), gc * max(len(combos), 1) + cc, -1)
    return CellIndex(groups, combos, cells)


def discrimination(auc: np.ndarray, present: np.ndarray,
                   min_groups: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """d(a; x_L) and the per-group mean over x_L, for AUC arrays ``(..., G, C)``.

    ``present`` (bool, broadcastable to ``auc``) marks the cells that take part. Returns
    ``(d, mean_d)`` with shapes ``(..., G, C)`` (NaN outside taking-part cells) and
    ``(..., G)`` (NaN for a group present nowhere).
    """
    auc = np.asarray(auc, dtype=np.float64)
    present = np.broadcast_to(np.asarray(present, bool), auc.shape) & np.isfinite(auc)
    combo_ok = present.sum(axis=-2, keepdims=True) >= min_groups
    present = present & combo_ok
    masked = np.where(present, auc, -np.inf)
    best = masked.max(axis=-2, keepdims=True, initial=-np.inf)  # no group: empty, no error
    d = np.where(present, best - auc, np.nan)
    n = present.sum(axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean_d = np.where(n > 0, np.nansum(np.where(present, d, 0.0), axis=-1) / n, np.nan)
    return d, mean_d


def bias_of(mean_d: np.ndarray) -> np.ndarray | float:
    """Bias = max_a mean_d(a) - min_a mean_d(a) over groups with a value (NaN if none)."""
    mean_d = np.asarray(mean_d, dtype=np.float64)
    ok = np.isfinite(mean_d)
    hi = np.where(ok, mean_d, -np.inf).max(axis=-1, initial=-np.inf)
    lo = np.where(ok, mean_d, np.inf).min(axis=-1, initial=np.inf)
    out = np.where(ok.any(axis=-1), hi - lo, np.nan)
    return float(out) if out.ndim == 0 else out


@dataclass
class BiasResult:
    """Point estimates of the FairFace 2020 metric for one model on one protocol."""

    bias_pos: float
    bias_neg: float
    accuracy: float
    cells: pd.DataFrame  # sign, group, combo, n, auc, present, d
    groups: pd.DataFrame  # sign, group, mean_d, n_combos, n_most_discriminated
    n_combos_used: dict[str, int]


def fairface_bias(scores: np.ndarray, labels: np.ndarray, group: np.ndarray,
                  combo: np.ndarray, in_cells: np.ndarray, in_reference: np.ndarray, *,
                  min_pairs: int = 1, min_groups: int = 1) -> BiasResult:
    """Bias+, Bias- and accuracy with the per-cell and per-group tables.

    ``in_cells`` marks pairs that enter the (group, combination) cells; ``in_reference``
    marks pairs that count among ALL positives/negatives and in accuracy (see
    :func:`facecast.fairness.groups.annotate_pairs`).
    """
    scores = np.asarray(scores, dtype=np.float64)
    labels = np.asarray(labels).astype(bool)
    ref = np.asarray(in_reference, bool)
    idx = cell_index(group, combo, np.asarray(in_cells, bool) & ref)
    n_g, n_c = idx.shape
    accuracy = rank_auc(scores[ref], labels[ref]) if ref.any() else float("nan")
    cell_rows, group_rows, used = [], [], {}
    biases = {}
    for sign in ("+", "-"):
        auc, count = grouped_auc(scores, labels, idx.cells, n_g * n_c, sign=sign,
                                 reference=ref)
        auc = auc.reshape(n_g, n_c)
        count = count.reshape(n_g, n_c)
        present = count >= max(min_pairs, 1)
        d, mean_d = discrimination(auc, present, min_groups)
        biases[sign] = bias_of(mean_d)
        taking = np.isfinite(d)
        used[sign] = int(taking.any(axis=0).sum())
        worst = np.zeros(n_g, dtype=np.int64)
        for c in np.flatnonzero(taking.any(axis=0)):
            col = np.where(taking[:, c], d[:, c], -np.inf)
            worst[col == col.max()] += 1
        gi, ci = np.nonzero(count > 0)
        cell_rows.append(pd.DataFrame({
            "sign": sign, "group": np.asarray(idx.groups, dtype=object)[gi],
            "combo": np.asarray(idx.combos, dtype=object)[ci], "n": count[gi, ci],
            "auc": auc[gi, ci], "present": taking[gi, ci], "d": d[gi, ci]}))
        group_rows.append(pd.DataFrame({
            "sign": sign, "group": idx.groups, "mean_d": mean_d,
            "n_combos": taking.sum(axis=1), "n_most_discriminated": worst}))
    return BiasResult(
        bias_pos=float(biases["+"]), bias_neg=float(biases["-"]), accuracy=float(accuracy),
        cells=pd.concat(cell_rows, ignore_index=True),
        groups=pd.concat(group_rows, ignore_index=True), n_combos_used=used)


def legitimate_subsets(cells: pd.DataFrame, attributes: list[str]) -> pd.DataFrame:
    """Tables A9-A14: per legitimate attribute and subset value (e.g. ``A0-A1``), the
    groups' average discrimination over the combinations in that subset, with the max and
    min and the groups attaining them. ``cells`` is :attr:`BiasResult.cells`."""
    part = cells[cells["present"]].copy()
    rows = []
    if part.empty:
        return pd.DataFrame(columns=["sign", "attribute", "subset", "n_combos", "max_d",
                                     "max_group", "min_d", "min_group"])
    split = part["combo"].str.split(",", expand=True)
    for k, attr in enumerate(attributes):
        part["_subset"] = split[k] if k in split.columns else None
        means = part.groupby(["sign", "_subset", "group"], sort=True)["d"].mean()
        ncomb = part.groupby(["sign", "_subset"], sort=True)["combo"].nunique()
        for (sign, subset), sub in means.groupby(level=[0, 1], sort=True):
            sub = sub.droplevel([0, 1])
            rows.append({"sign": sign, "attribute": attr, "subset": subset,
                         "n_combos": int(ncomb.loc[(sign, subset)]),
                         "max_d": float(sub.max()), "max_group": str(sub.idxmax()),
                         "min_d": float(sub.min()), "min_group": str(sub.idxmin())})
    return pd.DataFrame(rows)
