"""Known-truth synthetic pairs for the covariate model (tests and benchmarks).

Two covariates x = (x_q, x_g) in [0, 1] (query and gallery image). Per class a two-component
normal mixture whose locations and weight vary with x (issue 13):
match: mu_1 = 0.55 + 0.45 (x_q - x_g)^2 + 0.15 sin 3 x_q - 0.10 x_g, mu_2 = mu_1 + 0.30,
weight of component 2 = sigmoid(-1 + 3 (x_q + x_g - 1)), sd 0.10 each;
non-match: mu_1 = 0.25 + 0.10 (x_q - x_g)^2 + 0.05 sin 3 x_g + 0.05 x_q, mu_2 = mu_1 + 0.15,
weight sigmoid(-1 + 2 (x_q + x_g - 1)), sd 0.08 each (true FNMR at FMR 1e-2: 0.13 to 0.28
at the five recovery points).
Extra covariates (``n_covariates`` > 2) are uniform noise with no effect.
"""

from __future__ import annotations

import numpy as np

from facecast.covariates.mixture import mixture_cdf, mixture_quantile


def _sigmoid(v: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-v))


def true_mixture(x: np.ndarray, cls: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(w, mu, sd), each (n, 2), of class ``cls`` (match | nonmatch) at covariates x (n, >=2)."""
    xq, xg = np.asarray(x, float)[:, 0], np.asarray(x, float)[:, 1]
    if cls == "match":
        m1 = 0.55 + 0.45 * (xq - xg) ** 2 + 0.15 * np.sin(3 * xq) - 0.10 * xg
        m2, p2, sd = m1 + 0.30, _sigmoid(-1 + 3 * (xq + xg - 1)), 0.10
    else:
        m1 = 0.25 + 0.10 * (xq - xg) ** 2 + 0.05 * np.sin(3 * xg) + 0.05 * xq
        m2, p2, sd = m1 + 0.15, _sigmoid(-1 + 2 * (xq + xg - 1)), 0.08
    w = np.column_stack([1 - p2, p2])
    mu = np.column_stack([m1, m2])
    return w, mu, np.full_like(mu, sd)


def true_fnmr_at_fmr(x: np.ndarray, fmr: float) -> np.ndarray:
    """The true FNMR at target FMR at each covariate row."""
    t = mixture_quantile(fmr, *true_mixture(x, "nonmatch"), upper=True)
    return mixture_cdf(t, *true_mixture(x, "match"))


def sample_class(n: int, cls: str, rng: np.random.Generator, n_covariates: int = 2,
                 x: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``n`` (x, y) draws of class ``cls``; x uniform on [0, 1]^d unless given."""
    if x is None:
        x = rng.uniform(0, 1, (n, n_covariates))
    w, mu, sd = true_mixture(x, cls)
    comp = (rng.uniform(size=len(x)) < w[:, 1]).astype(int)
    rows = np.arange(len(x))
    y = rng.normal(mu[rows, comp], sd[rows, comp])
    return x, y


#: the five fixed covariate points (x_q, x_g) of the recovery check
RECOVERY_POINTS = np.array([[0.1, 0.1], [0.2, 0.8], [0.5, 0.5], [0.8, 0.3], [0.9, 0.9]])


def recovery_trial(seed: int, n_per_class: int = 5000, fmr: float = 1e-2,
                   cfg: dict | None = None, points: np.ndarray = RECOVERY_POINTS) -> dict:
    """Fit both classes on one synthetic data set; FNMR at ``fmr`` at ``points`` vs truth.

    Returns truth, posterior mean, 90 % interval (q05, q95) per point and the fit infos.
    """
    from facecast.covariates.basis import build_basis
    from facecast.covariates.derive import conditional_metrics, summarise
    from facecast.covariates.infer import fit_class

    cfg = {"steps": 1500, "batch_size": 1024, "draws": 200, **(cfg or {})}
    grid, width, h = int(cfg.pop("grid", 5)), float(cfg.pop("width", 1.0)), \
        int(cfg.pop("components", 2))
    linear = bool(cfg.pop("linear", False))
    rng = np.random.default_rng(seed)
    fits, infos = {}, {}
    for k, cls in enumerate(("match", "nonmatch")):
        x, y = sample_class(n_per_class, cls, rng)
        basis = build_basis(x, grid, width, seed=seed, linear=linear)
        fits[cls], infos[cls] = fit_class(x, y, n_components=h, basis=basis, cfg=cfg,
                                          seed=seed * 10 + k, label=cls)
    m = conditional_metrics(fits["match"], fits["nonmatch"], points, fmr)
    s = summarise(m["fnmr"])
    return {"truth": true_fnmr_at_fmr(points, fmr), "mean": s["mean"], "q50": s["q50"], "q05": s["q05"],
            "q95": s["q95"], "infos": infos}


def small_case_mixture(x: np.ndarray, cls: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The small reference case (one covariate, one component per class; NUTS checks).

    match: N(0.55 + 0.15 sin 3x - 0.10 x, 0.10); non-match: N(0.20 + 0.10 x, 0.08), x in
    [0, 1] (true FNMR at FMR 1e-2 runs from about 0.02 at x = 0.5 to 0.56 at x = 1).
    """
    xv = np.asarray(x, float)[:, 0]
    if cls == "match":
        mu, sd = 0.55 + 0.15 * np.sin(3 * xv) - 0.10 * xv, 0.10
    else:
        mu, sd = 0.20 + 0.10 * xv, 0.08
    return np.ones((len(xv), 1)), mu[:, None], np.full((len(xv), 1), sd)


#: the covariate points of the small-case check
SMALL_CASE_POINTS = np.array([[0.1], [0.5], [0.9]])


def small_case_trial(seed: int, n_per_class: int = 300, fmr: float = 1e-2,
                     cfg: dict | None = None, points: np.ndarray = SMALL_CASE_POINTS) -> dict:
    """Fit the small case (default NUTS, H = 1, grid 4) on one data set; FNMR at ``fmr``
    at ``points`` vs truth, as :func:`recovery_trial` returns it."""
    from facecast.covariates.basis import build_basis
    from facecast.covariates.derive import conditional_metrics, summarise
    from facecast.covariates.infer import fit_class

    cfg = {"inference": "nuts", "draws": 200, "warmup": 200, **(cfg or {})}
    grid, width = int(cfg.pop("grid", 4)), float(cfg.pop("width", 1.0))
    linear = bool(cfg.pop("linear", False))
    rng = np.random.default_rng(seed)
    fits, infos = {}, {}
    for k, cls in enumerate(("match", "nonmatch")):
        x = rng.uniform(0, 1, (n_per_class, 1))
        w, mu, sd = small_case_mixture(x, cls)
        y = rng.normal(mu[:, 0], sd[:, 0])
        basis = build_basis(x, grid, width, seed=seed, linear=linear)
        fits[cls], infos[cls] = fit_class(x, y, n_components=1, basis=basis, cfg=cfg,
                                          seed=seed * 10 + k, label=cls)
    m = conditional_metrics(fits["match"], fits["nonmatch"], points, fmr)
    s = summarise(m["fnmr"])
    t = mixture_quantile(fmr, *small_case_mixture(points, "nonmatch"), upper=True)
    truth = mixture_cdf(t, *small_case_mixture(points, "match"))
    return {"truth": truth, "mean": s["mean"], "q50": s["q50"], "q05": s["q05"],
            "q95": s["q95"], "infos": infos}
