"""Simulated benchmarks for the level of compare's tests (benchmarks/compare_null.py and
tests/test_compare_level.py).

:func:`null_pair` draws one benchmark on which two models are equally good *in
expectation* but each model's scores carry identity random effects, so on any one draw of
identities one model may look better: the errors cluster by identity, as they do on face
data. A test keeps its level when it rejects "A = B" at 5 % in about 5 % of such
benchmarks and its interval covers 0 at its nominal rate. :func:`mcnemar_exact` is the
unclustered test the stage used before (kept here only as the reference that fails).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy.special import bdtr

from facecast.compare.inference import clustered_test
from facecast.compare.paired import Paired, align, bootstrap_differences, metric_names
from facecast.fairness.threshold import thresholds_at_fmr


@dataclass(frozen=True)
class NullDesign:
    """One simulated benchmark: identities, pairs and the score model's spreads."""

    n_identities: int = 40
    per_identity: int = 6
    n_impostor: int = 600
    genuine_mean: float = 0.55
    impostor_mean: float = 0.15
    shared_sd: float = 0.08      # pair difficulty both models see
    identity_sd: float = 0.08    # each model's own effect of a genuine pair's identity
    impostor_identity_sd: float = 0.04  # ... of each identity of an impostor pair
    noise_sd: float = 0.03       # each model's own pair noise


def null_pair(rng: np.random.Generator, design: NullDesign = NullDesign()
              ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Two models' scored pairs on one benchmark: every genuine pair of each identity and
    ``n_impostor`` distinct impostor pairs; the models share the score model (equal in
    expectation) but draw their own identity effects and noise."""
    d, per = design, design.per_identity
    ia, ib = np.triu_indices(per, 1)
    gen = np.array([(i * per + a, i * per + b) for i in range(d.n_identities)
                    for a, b in zip(ia, ib, strict=True)])
    n_img = d.n_identities * per
    cand = rng.integers(0, n_img, size=(8 * d.n_impostor, 2))
    cand = cand[cand[:, 0] // per != cand[:, 1] // per]
    cand = np.sort(cand, axis=1)
    imp = np.unique(cand, axis=0)
    imp = imp[rng.permutation(len(imp))[: d.n_impostor]]
    pairs = np.vstack([gen, imp])
    label = np.r_[np.ones(len(gen), int), np.zeros(len(imp), int)]
    ida, idb = pairs[:, 0] // per, pairs[:, 1] // per
    base = np.where(label == 1, d.genuine_mean, d.impostor_mean)
    base = base + rng.normal(0.0, d.shared_sd, len(label))
    frames = []
    for _ in range(2):
        u = rng.normal(0.0, d.identity_sd, d.n_identities)
        v = rng.normal(0.0, d.impostor_identity_sd, d.n_identities)
        eff = np.where(label == 1, u[ida], v[ida] + v[idb])
        frames.append(pd.DataFrame({
            "image_a": [f"i{x}" for x in pairs[:, 0]], "image_b": [f"i{x}" for x in pairs[:, 1]],
            "identity_a": ida.astype(str), "identity_b": idb.astype(str), "label": label,
            "score": base + eff + rng.normal(0.0, d.noise_sd, len(label))}))
    return frames[0], frames[1]


def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided exact McNemar p, ``min(1, 2 P(Bin(b + c, 1/2) <= min(b, c)))``: treats
    pairs as independent (the reference that fails on clustered data)."""
    n = b + c
    return 1.0 if n == 0 else float(min(1.0, 2.0 * bdtr(min(b, c), n, 0.5)))


def mcnemar_at_fmr(p: Paired, fmr: float) -> float:
    """McNemar's p on the accept decisions of each model at its own threshold for ``fmr``."""
    right = []
    for s in (p.score_a, p.score_b):
        thr = thresholds_at_fmr(s[p.label == 0], [fmr])[0]
        right.append((s >= thr) == (p.label == 1))
    return mcnemar_exact(int((right[0] & ~right[1]).sum()), int((~right[0] & right[1]).sum()))


def level_study(n_sims: int, *, seed: int = 0, n_boot: int = 200,
                fars: Sequence[float] = (1e-2,), fmr: float = 1e-2,
                confidence: float = 0.95, methods: Sequence[str] = ("t",),
                design: NullDesign = NullDesign()) -> pd.DataFrame:
    """One row per simulated benchmark, metric and method: ``p``, ``ci_lo``, ``ci_hi``;
    McNemar's p as method ``mcnemar`` (metric ``decisions@fmr=..``, no interval)."""
    rng = np.random.default_rng(seed)
    names = metric_names(fars, fmr)
    rows = []
    for sim in range(n_sims):
        fa, fb = null_pair(rng, design)
        p = align(fa, fb)
        ma, mb, d = bootstrap_differences(p, fars=fars, fmr=fmr, n_boot=n_boot,
                                          seed=int(rng.integers(2**31)))
        for j, name in enumerate(names):
            for method in methods:
                t = clustered_test(ma[j] - mb[j], d[:, j], p.n_identities, confidence,
                                   method)
                rows.append({"sim": sim, "metric": name, "method": method, "p": t["p"],
                             "ci_lo": t["ci_lo"], "ci_hi": t["ci_hi"]})
        rows.append({"sim": sim, "metric": f"decisions@fmr={fmr:g}", "method": "mcnemar",
                     "p": mcnemar_at_fmr(p, fmr), "ci_lo": np.nan, "ci_hi": np.nan})
    return pd.DataFrame(rows)


def summarise(study: pd.DataFrame, alpha: float = 0.05) -> pd.DataFrame:
    """Per method and metric: simulations, share rejected at ``alpha`` (raw p) with its
    binomial standard error, and the share of intervals covering 0 (the true difference)."""
    s = study.assign(reject=study["p"] <= alpha,
                     covers=(study["ci_lo"] <= 0) & (study["ci_hi"] >= 0),
                     has_ci=study["ci_lo"].notna())
    out = s.groupby(["method", "metric"], sort=False).agg(
        n=("p", "count"), rejected=("reject", "mean"), covered=("covers", "sum"),
        with_interval=("has_ci", "sum")).reset_index()
    out["rejected_se"] = np.sqrt(out["rejected"] * (1 - out["rejected"]) / out["n"])
    out["covered"] = np.where(out["with_interval"] > 0,
                              out["covered"] / out["with_interval"].clip(lower=1), np.nan)
    return out[["method", "metric", "n", "rejected", "rejected_se", "covered"]]
