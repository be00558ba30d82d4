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

from collections.abc import Callable

import numpy as np

from facecast.covariates.mixture import mixture_cdf, mixture_quantile

#: a known score model: (covariate rows, "match" | "nonmatch") -> (w, mu, sd), each (n, H)
Mixture = Callable[[np.ndarray, str], tuple[np.ndarray, np.ndarray, np.ndarray]]


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


def mixture_fnmr_at_fmr(mixture: Mixture, x: np.ndarray, fmr: float) -> np.ndarray:
    """The FNMR at target ``fmr`` at each covariate row of a known ``mixture``."""
    t = mixture_quantile(fmr, *mixture(x, "nonmatch"), upper=True)
    return mixture_cdf(t, *mixture(x, "match"))


def true_fnmr_at_fmr(x: np.ndarray, fmr: float) -> np.ndarray:
    """The true FNMR at target FMR at each covariate row (:func:`true_mixture`)."""
    return mixture_fnmr_at_fmr(true_mixture, x, fmr)


def draw_scores(mixture: Mixture, x: np.ndarray, cls: str,
                rng: np.random.Generator) -> np.ndarray:
    """One score per covariate row of ``x``, drawn from class ``cls`` of ``mixture``.

    The component is the number of k >= 1 with u < w_k + ... + w_H (one uniform u per row,
    none with a single component), then a normal draw from it.
    """
    w, mu, sd = mixture(x, cls)
    rows = np.arange(len(x))
    comp = np.zeros(len(x), int)
    if w.shape[1] > 1:
        u = rng.uniform(size=len(x))
        tails = np.cumsum(w[:, ::-1], axis=1)[:, ::-1][:, 1:]   # sum_{j >= k} w_j, k >= 1
        comp = (u[:, None] < tails).sum(axis=1)
    return rng.normal(mu[rows, comp], sd[rows, comp])


def sample_class(n: int, cls: str, rng: np.random.Generator, n_covariates: int = 2,
                 x: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``n`` (x, y) draws of class ``cls``; x uniform on [0, 1]^d unless given."""
    if x is None:
        x = rng.uniform(0, 1, (n, n_covariates))
    return x, draw_scores(true_mixture, x, cls, rng)


#: the five fixed covariate points (x_q, x_g) of the recovery check
RECOVERY_POINTS = np.array([[0.1, 0.1], [0.2, 0.8], [0.5, 0.5], [0.8, 0.3], [0.9, 0.9]])


def fit_trial(mixture: Mixture, n_covariates: int, seed: int, n_per_class: int, fmr: float,
              points: np.ndarray, cfg: dict, *, grid: int, components: int) -> dict:
    """Draw ``n_per_class`` pairs per class of ``mixture`` (x uniform on [0, 1]^d), fit
    each class (``cfg``: fit settings plus ``grid``, ``width``, ``components``, ``linear``
    overrides) and compare FNMR at ``fmr`` at ``points`` with the truth.

    Returns truth, posterior mean and median, 90 % interval (q05, q95) per point and the
    fit infos.
    """
    from facecast.covariates.basis import build_basis
    from facecast.covariates.derive import conditional_metrics, summarise
    from facecast.covariates.infer import fit_class

    cfg = dict(cfg)
    grid, width = int(cfg.pop("grid", grid)), float(cfg.pop("width", 1.0))
    h, linear = int(cfg.pop("components", components)), bool(cfg.pop("linear", False))
    rng = np.random.default_rng(seed)
    fits, infos = {}, {}
    for k, cls in enumerate(("match", "nonmatch")):
        x = rng.uniform(0, 1, (n_per_class, n_covariates))
        y = draw_scores(mixture, x, cls, rng)
        basis = build_basis(x, grid, width, seed=seed, linear=linear)
        fits[cls], infos[cls] = fit_class(x, y, n_components=h, basis=basis, cfg=cfg,
                                          seed=seed * 10 + k, label=cls)
    s = summarise(conditional_metrics(fits["match"], fits["nonmatch"], points, fmr)["fnmr"])
    return {"truth": mixture_fnmr_at_fmr(mixture, points, fmr), "mean": s["mean"],
            "q50": s["q50"], "q05": s["q05"], "q95": s["q95"], "infos": infos}


def recovery_trial(seed: int, n_per_class: int = 5000, fmr: float = 1e-2,
                   cfg: dict | None = None, points: np.ndarray = RECOVERY_POINTS) -> dict:
    """The issue's recovery check on one data set (:func:`true_mixture`, SVI, grid 5,
    H = 2, 1500 steps unless ``cfg`` says otherwise); see :func:`fit_trial`."""
    cfg = {"steps": 1500, "batch_size": 1024, "draws": 200, **(cfg or {})}
    return fit_trial(true_mixture, 2, seed, n_per_class, fmr, points, cfg, grid=5,
                     components=2)


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
    """The small reference case on one data set (:func:`small_case_mixture`, NUTS, H = 1,
    grid 4, 200 warmup + 200 draws unless ``cfg`` says otherwise); see :func:`fit_trial`."""
    cfg = {"inference": "nuts", "draws": 200, "warmup": 200, **(cfg or {})}
    return fit_trial(small_case_mixture, 1, seed, n_per_class, fmr, points, cfg, grid=4,
                     components=1)
