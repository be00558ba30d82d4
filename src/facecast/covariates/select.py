"""Model selection by held-out log-likelihood, then the final fit of each class.

Candidates are every combination of ``components`` x ``grid`` x ``width``. Each is fitted
on a seeded training split and scored by the mean held-out log predictive density
log mean_s p(y | x, theta_s); the best one is refitted on all pairs (``refit``) and the
held-out probability integral transforms (PIT) of the chosen candidate are kept for the
posterior predictive check.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Mapping
from typing import Any

import numpy as np

from facecast.covariates.basis import build_basis
from facecast.covariates.infer import fit_class
from facecast.covariates.model import ClassFit

log = logging.getLogger(__name__)

#: held-out points scored per candidate (a seeded subsample beyond this)
MAX_HELDOUT = 5000


def _as_list(value: Any) -> list:
    return list(value) if isinstance(value, (list, tuple)) else [value]


def select_and_fit(x: np.ndarray, y: np.ndarray, cfg: Mapping[str, Any], seed: int,
                   label: str) -> tuple[ClassFit, dict[str, Any], np.ndarray]:
    """(final fit, info, held-out PIT values) for one class."""
    rng = np.random.default_rng(seed)
    n = len(y)
    holdout = float(cfg.get("holdout", 0.2))
    perm = rng.permutation(n)
    n_test = int(round(holdout * n))
    if n_test < 10 or n - n_test < 10:
        raise ValueError(f"{label}: {n} pairs are too few to hold out {holdout:.0%} for "
                         "model selection")
    test, train = perm[:n_test], perm[n_test:]
    scored = test[:MAX_HELDOUT]
    candidates = list(itertools.product(_as_list(cfg["components"]), _as_list(cfg["grid"]),
                                        _as_list(cfg["width"])))
    table, best, best_ll, best_pit = [], None, -np.inf, None
    for i, (h, g, wd) in enumerate(candidates):
        basis = build_basis(x[train], int(g), float(wd), seed=seed,
                            linear=bool(cfg.get("linear", False)))
        fit, info = fit_class(x[train], y[train], n_components=int(h), basis=basis, cfg=cfg,
                              seed=seed + 1000 * (i + 1), label=f"{label} H={h} grid={g} "
                              f"width={wd}")
        ll = float(np.mean(fit.log_predictive(x[scored], y[scored])))
        table.append({"components": int(h), "grid": int(g), "width": float(wd),
                      "n_basis": basis.n_basis, "heldout_loglik": ll,
                      "elbo_converged": info.get("elbo_converged"),
                      "seconds": info["seconds"]})
        log.info("%s candidate H=%s grid=%s width=%s: held-out log-lik %.4f (%d basis "
                 "functions, %.1f s)", label, h, g, wd, ll, basis.n_basis, info["seconds"])
        if ll > best_ll:
            best_ll, best, best_pit = ll, (int(h), int(g), float(wd)), fit.pit(x[scored],
                                                                             y[scored])
            best_fit, best_info = fit, info
    h, g, wd = best
    if cfg.get("refit", True):
        basis = build_basis(x, g, wd, seed=seed, linear=bool(cfg.get("linear", False)))
        final, info = fit_class(x, y, n_components=h, basis=basis, cfg=cfg, seed=seed,
                                label=f"{label} final")
    else:
        final, info = best_fit, best_info
    info = {**info, "selected": {"components": h, "grid": g, "width": wd},
            "candidates": table, "n_train": int(len(train)), "n_heldout": int(n_test)}
    return final, info, best_pit
