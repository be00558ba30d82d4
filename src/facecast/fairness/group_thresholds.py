"""Per-group decision thresholds (Robinson et al., "Face recognition: too bias, or not too
bias?", CVPRW 2020 - Balanced Faces in the Wild).

Decision rule: accept iff ``score >= t``. For a target FMR f* the threshold of a set of
impostor scores is ``t = inf{t : FMR(t) <= f*}``; with ``>=`` the infimum is not attained,
so facecast uses the next float above the ``(floor(f* n) + 1)``-th highest impostor score
(the lowest representable threshold meeting the target). Per protected group s (pairs
whose two images share s): ``t_s`` from the group's impostors, next to the global ``t``
from the impostors of the global set (``global_mask``: every impostor - NIST's convention -
or, as BFW's own code does, the impostor pairs whose two images share a subgroup,
``a1 == a2``; :mod:`facecast.fairness.demographics` chooses). Pairs without a feature
(``failed``) take part in the rates (at ``-inf``: rejected by every threshold) but in no
fit. Per group and target:

* ``deviation = (FMR_s(t) - f*) / f*`` under the global and under the per-group threshold
  (BFW's "deviation from the intended FMR"), and ``TAR_s`` under each;
* a cross-validated variant: thresholds fitted on the other folds, FMR_s and TAR_s counted
  on the held-out fold and pooled over folds, so the per-group gain is not measured on its
  own fitting data;
* identity-clustered bootstrap intervals on the deviations (thresholds re-fitted in every
  replicate).

A target below ``1 / n`` impostors cannot be met by counting (the threshold sits above
every impostor): such rows carry ``resolvable = False`` and read ``n/a (k impostors)``.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np
import pandas as pd

from facecast.evaluate.bands import percentile_band, replicate_weights
from facecast.evaluate.metrics import far_resolvable
from facecast.fairness.threshold import thresholds_at_fmr
from facecast.report.figures import pyplot, save_figure


def threshold_at_fmr(impostor_scores: np.ndarray, target: float) -> float:
    """``inf{t : #{impostor >= t} / n <= target}``: the next float above the
    ``(floor(target * n) + 1)``-th highest impostor (the shared convention of
    :func:`facecast.fairness.threshold.thresholds_at_fmr`); NaN without impostors."""
    return float(thresholds_at_fmr(impostor_scores, [float(target)])[0])


class _Ranked:
    """The scores of one subset sorted once: its distinct values and where each run of
    equal values starts, so that replicate weights only need summing per value."""

    def __init__(self, scores: np.ndarray) -> None:
        s = np.asarray(scores, dtype=np.float64)
        self.order = np.argsort(s, kind="stable")
        ss = s[self.order]
        # runs by equality: np.diff of two -inf (failed pairs) is NaN, not 0
        self.starts = (np.r_[0, np.flatnonzero(ss[1:] != ss[:-1]) + 1] if ss.size
                       else np.zeros(0, np.int64))
        self.unique = ss[self.starts]

    def weights(self, w: np.ndarray) -> np.ndarray:
        """``(B, n)`` weights of the subset's pairs -> ``(B, U)`` weight per distinct score."""
        w = np.atleast_2d(np.asarray(w, dtype=np.float64))
        if not self.unique.size:
            return np.zeros((w.shape[0], 0))
        return np.add.reduceat(w[:, self.order], self.starts, axis=1)

    def thresholds(self, wu: np.ndarray, targets: Sequence[float]) -> np.ndarray:
        """``(B, T)``: per weight row and target, ``inf{t : weight(score >= t) <= target *
        total}`` (the next float above the highest score to reject; NaN without weight)."""
        out = np.full((wu.shape[0], len(targets)), np.nan)
        if not self.unique.size:
            return out
        total = wu.sum(axis=1, keepdims=True)
        above = total - np.cumsum(wu, axis=1)          # weight of scores > u_j
        for i, target in enumerate(targets):
            ok = above <= float(target) * total + 1e-9 * np.maximum(total, 1)
            t = np.nextafter(self.unique[np.argmax(ok, axis=1)], np.inf)
            t = np.where(float(target) >= 1.0, self.unique[0], t)
            out[:, i] = np.where(total[:, 0] > 0, t, np.nan)
        return out

    def at_least(self, wu: np.ndarray, t: np.ndarray) -> np.ndarray:
        """``(B,)``: per weight row the weight of scores ``>= t[b]`` (0 for a NaN
        threshold, which accepts nothing)."""
        t = np.asarray(t, dtype=np.float64)
        if not self.unique.size:
            return np.zeros(wu.shape[0])
        suffix = np.cumsum(wu[:, ::-1], axis=1)[:, ::-1]   # weight of scores >= u_j
        j = np.searchsorted(self.unique, np.where(np.isnan(t), np.inf, t), side="left")
        inside = j < self.unique.size
        got = np.take_along_axis(suffix, np.minimum(j, self.unique.size - 1)[:, None], 1)[:, 0]
        return np.where(inside, got, 0.0)


def weighted_threshold(scores: np.ndarray, weights: np.ndarray, target: float) -> np.ndarray:
    """:func:`threshold_at_fmr` with impostor weights ``(B, n)``: one threshold per row."""
    ranked = _Ranked(scores)
    return ranked.thresholds(ranked.weights(weights), [float(target)])[:, 0]


def _rates(scores: np.ndarray, labels: np.ndarray, w: np.ndarray, t: np.ndarray
           ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Weighted false matches, impostors, true accepts, genuines per row at thresholds t."""
    acc = scores[None, :] >= t[:, None]
    imp, gen = ~labels, labels
    return ((w * (acc & imp)).sum(1), (w * imp).sum(1), (w * (acc & gen)).sum(1),
            (w * gen).sum(1))


def _deviation(fm: np.ndarray, n: np.ndarray, target: float) -> np.ndarray:
    with np.errstate(invalid="ignore", divide="ignore"):
        return (fm / n - target) / target


def group_threshold_table(scores: np.ndarray, labels: np.ndarray, group: np.ndarray,
                          targets: Sequence[float], *, folds: np.ndarray | None = None,
                          identity_a: np.ndarray | None = None,
                          identity_b: np.ndarray | None = None, n_boot: int = 0,
                          seed: int = 0, confidence: float = 0.95,
                          global_mask: np.ndarray | None = None,
                          failed: np.ndarray | None = None) -> pd.DataFrame:
    """One row per (target FMR, group) - see the module docstring.

    ``group``: each pair's group (None for mixed or unknown pairs: they count for the
    global threshold only, and only where ``global_mask`` holds them). ``global_mask``:
    the pairs whose impostors set the global threshold (None = every pair). ``failed``:
    pairs without a feature (their score ``-inf``): counted in every rate, fitted on by no
    threshold. Columns: ``target_fmr``, ``group``, ``n_impostor``, ``n_genuine``,
    ``n_failed``, ``failed_rate`` (the group's pairs without a feature / its pairs),
    ``resolvable``, ``n_impostor_global`` (impostors the global threshold is fitted on),
    ``global_threshold``, ``group_threshold``, ``fmr_global``, ``fmr_group``,
    ``deviation_global``, ``deviation_group``, ``tar_global``, ``tar_group``, the
    cross-validated ``*_cv`` counterparts (when ``folds`` has two or more folds),
    ``deviation_*_lo/hi`` (bootstrap) and ``n_boot``. Every threshold of a set of scores
    comes from one sort of it (all targets at once).
    """
    s = np.asarray(scores, dtype=np.float64)
    y = np.asarray(labels).astype(bool)
    g = np.asarray(group, dtype=object)
    bad = np.zeros(len(s), bool) if failed is None else np.asarray(failed, bool)
    fit_glob = ~y & ~bad & (np.ones(len(s), bool) if global_mask is None
                            else np.asarray(global_mask, bool))
    names = sorted({str(x) for x in g[pd.notna(g)]})
    targets = [float(t) for t in targets]
    fold_names = sorted(set(np.asarray(folds).astype(str))) if folds is not None else []
    f_arr = np.asarray(folds).astype(str) if folds is not None else None
    t_glob = thresholds_at_fmr(s[fit_glob], targets)
    members = {name: g == name for name in names}
    t_grp = {name: thresholds_at_fmr(s[m & ~y & ~bad], targets) for name, m in members.items()}
    cv = (_cross_validated(s, y, g, f_arr, fold_names, names, targets, fit_glob, bad)
          if len(fold_names) >= 2 else {})
    rows = []
    for i, target in enumerate(targets):
        for name in names:
            m = members[name]
            ms, my = s[m], y[m]
            n_imp, n_gen = int((~my).sum()), int(my.sum())
            n_bad = int(bad[m].sum())
            row = {"target_fmr": target, "group": name, "n_impostor": n_imp,
                   "n_genuine": n_gen, "n_failed": n_bad,
                   "failed_rate": n_bad / len(ms) if len(ms) else np.nan,
                   "resolvable": bool(far_resolvable(n_imp, target)),
                   "n_impostor_global": int(fit_glob.sum()),
                   "global_threshold": float(t_glob[i]),
                   "group_threshold": float(t_grp[name][i])}
            for key, t in (("global", t_glob[i]), ("group", t_grp[name][i])):
                fm, ni, ta, ng = _rates(ms, my, np.ones((1, len(ms))), np.array([t]))
                with np.errstate(invalid="ignore", divide="ignore"):
                    row[f"fmr_{key}"] = float(fm[0] / ni[0])
                    row[f"tar_{key}"] = float(ta[0] / ng[0])
                row[f"false_matches_{key}"] = int(fm[0])
                row[f"deviation_{key}"] = float(_deviation(fm, ni, target)[0])
            row.update(cv.get((name, i), {}))
            rows.append(row)
    out = pd.DataFrame(rows)
    if n_boot > 0 and identity_a is not None and len(out):
        out = _bootstrap(out, s, y, g, names, targets, identity_a, identity_b, n_boot, seed,
                         confidence, fit_glob, bad)
    out["n_boot"] = int(n_boot)
    return out


def _cross_validated(s: np.ndarray, y: np.ndarray, g: np.ndarray, folds: np.ndarray,
                     fold_names: Sequence[str], names: Sequence[str],
                     targets: Sequence[float], fit_glob: np.ndarray, bad: np.ndarray
                     ) -> dict[tuple[str, int], dict]:
    """Per (group, target index): thresholds fitted on the other folds (the global one on
    their ``fit_glob`` impostors, a group's on its impostors with a feature), rates counted
    on the held-out fold, pooled over the folds. A threshold without training impostors
    decides nothing and counts as rejecting."""
    train_glob = {f: thresholds_at_fmr(s[(folds != f) & fit_glob], targets)
                  for f in fold_names}
    out = {}
    for name in names:
        in_g = g == name
        fm = {k: np.zeros(len(targets), np.int64) for k in ("global", "group")}
        ta = {k: np.zeros(len(targets), np.int64) for k in ("global", "group")}
        ni = ng = 0
        for f in fold_names:
            t_grp = thresholds_at_fmr(s[(folds != f) & ~y & ~bad & in_g], targets)
            m = (folds == f) & in_g
            imp, gen = np.sort(s[m & ~y]), np.sort(s[m & y])
            for key, t in (("global", train_glob[f]), ("group", t_grp)):
                ok = np.isfinite(t)
                tt = np.where(ok, t, np.inf)
                fm[key] += np.where(ok, imp.size - np.searchsorted(imp, tt, "left"), 0)
                ta[key] += np.where(ok, gen.size - np.searchsorted(gen, tt, "left"), 0)
            ni += imp.size
            ng += gen.size
        for i, target in enumerate(targets):
            row = {}
            for key in ("global", "group"):
                fmr = fm[key][i] / ni if ni else np.nan
                row[f"fmr_{key}_cv"] = fmr
                row[f"tar_{key}_cv"] = ta[key][i] / ng if ng else np.nan
                row[f"deviation_{key}_cv"] = (fmr - target) / target
            row["n_folds_cv"] = len(fold_names)
            out[(name, i)] = row
    return out


def _bootstrap(out: pd.DataFrame, s: np.ndarray, y: np.ndarray, g: np.ndarray,
               names: Sequence[str], targets: Sequence[float], identity_a: np.ndarray,
               identity_b: np.ndarray, n_boot: int, seed: int, confidence: float,
               fit_glob: np.ndarray, bad: np.ndarray) -> pd.DataFrame:
    """Deviation intervals: every replicate re-fits the global threshold (on its
    ``fit_glob`` impostors) and the per-group thresholds (on the group's impostors with a
    feature) on its weights; each impostor subset is sorted once for all replicates."""
    imp = ~y
    glob = _Ranked(s[fit_glob])
    sub = {name: (g == name) & imp for name in names}
    ranked = {name: _Ranked(s[m]) for name, m in sub.items()}
    fit = {name: (_Ranked(s[m & ~bad]) if bad[m].any() else ranked[name])
           for name, m in sub.items()}
    reps = {(i, n, k): [] for i in range(len(targets)) for n in names
            for k in ("global", "group")}
    for w in replicate_weights(identity_a, identity_b, n_boot, seed):
        t_glob = glob.thresholds(glob.weights(w[:, fit_glob]), targets)
        for name in names:
            r = ranked[name]
            wu = r.weights(w[:, sub[name]])
            total = wu.sum(axis=1)
            t_own = (r.thresholds(wu, targets) if fit[name] is r else
                     fit[name].thresholds(fit[name].weights(w[:, sub[name] & ~bad]), targets))
            for i, target in enumerate(targets):
                for key, t in (("global", t_glob[:, i]), ("group", t_own[:, i])):
                    reps[(i, name, key)].append(_deviation(r.at_least(wu, t), total, target))
    index = {t: i for i, t in enumerate(targets)}
    for key in ("global", "group"):
        lo, hi = [], []
        for target, name in zip(out["target_fmr"], out["group"], strict=True):
            vals = np.concatenate(reps[(index[float(target)], name, key)])[:, None]
            a, b = percentile_band(vals, confidence)
            lo.append(float(a[0]))
            hi.append(float(b[0]))
        out[f"deviation_{key}_lo"] = lo
        out[f"deviation_{key}_hi"] = hi
    return out


def plot_deviation(table: pd.DataFrame, path: str | os.PathLike, title: str = "") -> None:
    """Deviation from the intended FMR per group: global vs per-group threshold, one panel
    per target (bootstrap intervals as error bars; cross-validated values as crosses)."""
    plt = pyplot()
    targets = list(dict.fromkeys(table["target_fmr"]))
    fig, axes = plt.subplots(1, max(len(targets), 1), squeeze=False,
                             figsize=(4.8 * max(len(targets), 1), 3.8),
                             constrained_layout=True)
    for ax, target in zip(axes[0], targets, strict=False):
        sub = table[table["target_fmr"] == target].reset_index(drop=True)
        x = np.arange(len(sub))
        for off, key, colour in ((-0.15, "global", "tab:red"), (0.15, "group", "tab:blue")):
            v = sub[f"deviation_{key}"].to_numpy(np.float64)
            if f"deviation_{key}_lo" in sub:
                lo = sub[f"deviation_{key}_lo"].to_numpy(np.float64)
                hi = sub[f"deviation_{key}_hi"].to_numpy(np.float64)
                err = np.vstack([np.clip(v - lo, 0, None), np.clip(hi - v, 0, None)])
                err = np.where(np.isfinite(err), err, 0)
            else:
                err = None
            ax.errorbar(x + off, v, yerr=err, fmt="o", color=colour, capsize=3,
                        label=f"{key} threshold")
            if f"deviation_{key}_cv" in sub:
                ax.plot(x + off, sub[f"deviation_{key}_cv"], "x", color=colour,
                        label=f"{key} (cross-validated)")
        for i, r in sub.iterrows():
            if not r["resolvable"]:
                ax.annotate(f"n/a ({r['n_impostor']} imp.)", (i, 0), fontsize=6,
                            ha="center", va="bottom")
        ax.axhline(0, color="grey", lw=0.8)
        ax.set_xticks(x, sub["group"], rotation=30, ha="right", fontsize=8)
        ax.set_ylabel("(FMR_s - f*) / f*")
        ax.set_title(f"target FMR {target:g}", fontsize=9)
        ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=7)
    fig.suptitle(title or "deviation from the intended FMR", fontsize=9)
    save_figure(fig, path, dpi=100)
