"""Inference for one class: SVI (AutoNormal or low-rank guide, minibatches) or NUTS.

Both return a :class:`~facecast.covariates.model.ClassFit` holding ``draws`` posterior draws
of every site, and an info dict (ELBO trace summary for SVI, R-hat / ESS for NUTS). A fixed
seed gives identical draws.
"""

from __future__ import annotations

import logging
import time
import warnings
from collections.abc import Mapping
from typing import Any

import numpy as np
import pyro
import torch
from pyro.infer import MCMC, NUTS, SVI, Trace_ELBO, TraceMeanField_ELBO
from pyro.infer.autoguide import AutoLowRankMultivariateNormal, AutoNormal, init_to_value
from pyro.optim import ClippedAdam
from tqdm import tqdm

from facecast.covariates.basis import RBFBasis
from facecast.covariates.model import ClassFit, Priors, complete_draws, mixture_model, model_sites

log = logging.getLogger(__name__)

INFER_DEFAULTS: dict[str, Any] = {
    "inference": "svi", "elbo": "meanfield", "guide": "normal", "steps": 2000,
    "batch_size": 1024, "lr": 0.02,
    "lr_final": 0.002, "draws": 200, "warmup": 200, "rank": 8,
    "smoothness": {"weight": 1.0, "location": 0.5}, "device": "cpu",
}


def converged(trace: np.ndarray, tol: float = 1e-3) -> tuple[bool, float]:
    """Relative ELBO change over the last 10 % of steps < ``tol``.

    The change is between the means of the two halves of the last 10 % of the trace (means,
    because minibatch ELBOs are noisy), relative to max(|ELBO|, 1): the trace is in nats per
    pair on standardised scores, where |ELBO| can pass through 0.
    """
    n = max(2, len(trace) // 10)
    tail = np.asarray(trace[-n:], float)
    a, b = tail[: n // 2].mean(), tail[n // 2:].mean()
    rel = float(abs(b - a) / max(abs(b), 1.0))
    return rel < tol, rel


def drift_within_noise(trace: np.ndarray, z: float = 3.0) -> tuple[bool, float]:
    """Whether the ELBO change over the last 10 % of steps is within minibatch noise.

    Compares the means of the two halves of the last 10 % of the trace against ``z``
    standard errors of their difference (from the spread of the per-step minibatch ELBOs).
    With small minibatches the noise of those means can exceed the 1e-3 relative criterion
    of :func:`converged` although the fit no longer moves; more steps would not help then.
    Returns (within noise, |change| / standard error).
    """
    n = max(4, len(trace) // 10)
    tail = np.asarray(trace[-n:], float)
    a, b = tail[: n // 2], tail[n // 2:]
    se = float(np.sqrt(a.var(ddof=1) / len(a) + b.var(ddof=1) / len(b)))
    t = float(abs(b.mean() - a.mean()) / se) if se > 0 else (0.0 if a.mean() == b.mean()
                                                               else np.inf)
    return t <= z, t


def _init_values(y: np.ndarray, h: int, k: int) -> dict[str, torch.Tensor]:
    """Break the components' symmetry: locations at spread quantiles of the scores."""
    q = np.quantile(y, (np.arange(h) + 0.5) / h) if len(y) else np.zeros(h)
    init = {"w_intercept": torch.zeros(h), "w_coef": torch.zeros(k, h),
            "mu_intercept": torch.as_tensor(q, dtype=torch.float32),
            "mu_coef": torch.zeros(k, h),
            "sigma": torch.full((h,), 0.7 / np.sqrt(h) if h > 1 else 1.0)}
    return {s: init[s] for s in model_sites(h)}


def _priors(cfg: Mapping[str, Any]) -> Priors:
    s = cfg.get("smoothness") or {}
    return Priors(weight_scale=float(s.get("weight", 1.0)),
                  loc_scale=float(s.get("location", 0.5)))


def fit_class(x: np.ndarray, y: np.ndarray, *, n_components: int, basis: RBFBasis,
              cfg: Mapping[str, Any], seed: int, label: str = "") -> tuple[ClassFit, dict]:
    """Fit one class's mixture to scores ``y`` (n,) at covariates ``x`` (n, d).

    Pyro's and torch's distribution argument checks are off during the fit (they cost
    10-20 % of every SVI step and change no number); the one thing they would
    catch on our inputs, a non-finite score or covariate, is refused here instead.
    """
    cfg = {**INFER_DEFAULTS, **cfg}
    y = np.asarray(y, float)
    xv = np.asarray(x, float)
    bad = ~np.isfinite(y) | ~np.isfinite(xv).all(axis=tuple(range(1, xv.ndim)))
    if bad.any():
        raise ValueError(f"covariate fit {label or ''}: {int(bad.sum())} of {len(y)} pairs have "
                         "a non-finite score or covariate (drop them before fitting)")
    center, scale = float(y.mean()), float(y.std() or 1.0)
    ys = (y - center) / scale
    device = torch.device(cfg["device"])
    z = torch.as_tensor(basis.zscore(x), dtype=torch.float32, device=device)
    yt = torch.as_tensor(ys, dtype=torch.float32, device=device)
    n, h, k = len(ys), int(n_components), basis.n_basis
    priors = _priors(cfg)
    pyro.clear_param_store()
    pyro.set_rng_seed(int(seed))
    info: dict[str, Any] = {"class": label, "n": n, "components": h, "n_basis": k,
                            "inference": cfg["inference"], "center": center, "scale": scale}
    t0 = time.perf_counter()
    with pyro.validation_enabled(False):
        if cfg["inference"] == "nuts":
            draws = _nuts(z, yt, basis, h, priors, cfg, info)
        else:
            draws = _svi(z, yt, basis, h, priors, cfg, info, seed, label)
    info["seconds"] = time.perf_counter() - t0
    return ClassFit(h, basis, center, scale, complete_draws(draws, h, k)), info


def _svi(z, yt, basis, h, priors, cfg, info, seed, label) -> dict[str, np.ndarray]:
    n, k = len(yt), basis.n_basis
    init = _init_values(yt.cpu().numpy(), h, k)
    init = {key: v.to(yt.device) for key, v in init.items()}
    model_args = (h, priors, basis.n_linear)

    def model(phi, y, n_total):
        return mixture_model(phi, y, n_total, *model_args)

    if cfg["guide"] == "lowrank":
        guide = AutoLowRankMultivariateNormal(model, init_loc_fn=init_to_value(values=init),
                                              rank=int(cfg["rank"]), init_scale=0.05)
    else:
        guide = AutoNormal(model, init_loc_fn=init_to_value(values=init), init_scale=0.05)
    steps = int(cfg["steps"])
    gamma = (float(cfg["lr_final"]) / float(cfg["lr"])) ** (1.0 / max(steps, 1))
    svi = SVI(model, guide, ClippedAdam({"lr": float(cfg["lr"]), "lrd": gamma, "clip_norm": 10.0}),
              loss=TraceMeanField_ELBO() if cfg.get("elbo", "meanfield") == "meanfield"
              else Trace_ELBO())
    batch = min(int(cfg["batch_size"]), n)
    gen = torch.Generator(device="cpu").manual_seed(int(seed))
    trace, clock = np.empty(steps), np.empty(steps)
    t0 = time.perf_counter()
    for step in tqdm(range(steps), desc=f"SVI {label}", mininterval=5):
        idx = torch.randint(n, (batch,), generator=gen).to(yt.device) if batch < n else None
        zb, yb = (z, yt) if idx is None else (z[idx], yt[idx])
        trace[step] = svi.step(basis.features_z(zb), yb, n) / n
        clock[step] = time.perf_counter() - t0
    ok, rel = converged(trace)
    # the first step (checked every 1 %, from 10 %) at which the criterion held
    at = next((s for s in range(max(steps // 10, 20), steps + 1, max(steps // 100, 1))
               if converged(trace[:s])[0]), None)
    info["converged_at_step"] = at
    info["seconds_to_converge"] = float(clock[at - 1]) if at else None
    noise, t_drift = drift_within_noise(trace)
    info.update({"guide": cfg["guide"], "steps": steps, "batch_size": batch,
                 "elbo_loss_per_pair_final": float(trace[-max(1, steps // 20):].mean()),
                 "elbo_converged": ok, "elbo_relative_change": rel,
                 "elbo_drift_within_noise": noise, "elbo_drift_se": t_drift,
                 "elbo_trace": trace[:: max(1, steps // 400)].tolist()})
    if not ok and noise:
        log.info("SVI %s: relative ELBO change %.2g over the last 10%% of steps is above 1e-3 "
                 "but within minibatch noise (%.1f standard errors): the fit has settled; a "
                 "larger covariates.batch_size makes the trace less noisy", label, rel, t_drift)
    elif not ok:
        log.warning("SVI %s: ELBO not converged (relative change %.2g over the last 10%% of "
                    "steps, %.1f standard errors of the minibatch noise); raise "
                    "covariates.steps", label, rel, t_drift)
    phi1 = basis.features_z(z[:1])
    out: dict[str, list] = {s: [] for s in model_sites(h)}
    with torch.no_grad():
        for _ in range(int(cfg["draws"])):
            sample = guide(phi1, yt[:1], n)
            for s in out:
                out[s].append(sample[s].detach().cpu().double().numpy())
    return {s: np.stack(v) for s, v in out.items()}


def _nuts(z, yt, basis, h, priors, cfg, info) -> dict[str, np.ndarray]:
    phi = basis.features_z(z)
    init = _init_values(yt.cpu().numpy(), h, basis.n_basis)
    # small reference fits: a dense mass matrix adapts to the correlated coefficients of
    # overlapping basis functions (far shorter trajectories than a diagonal one); the
    # potential is traced once (TorchScript) instead of re-run in Python at every step
    kernel = NUTS(lambda: mixture_model(phi, yt, len(yt), h, priors, basis.n_linear),
                  init_strategy=init_to_value(values=init), full_mass=True,
                  jit_compile=True, ignore_jit_warnings=True)
    mcmc = MCMC(kernel, num_samples=int(cfg["draws"]), warmup_steps=int(cfg["warmup"]),
                num_chains=1, disable_progbar=True)
    with warnings.catch_warnings():  # torch marks jit.trace deprecated; pyro still uses it
        warnings.filterwarnings("ignore", category=FutureWarning, module="torch.jit")
        mcmc.run()
    diag = mcmc.diagnostics()
    sites = model_sites(h)
    rhat = [float(np.nanmax(np.asarray(d["r_hat"]))) for s, d in diag.items() if s in sites]
    ess = [float(np.nanmin(np.asarray(d["n_eff"]))) for s, d in diag.items() if s in sites]
    info.update({"warmup": int(cfg["warmup"]), "r_hat_max": max(rhat), "ess_min": min(ess)})
    samples = mcmc.get_samples()
    return {s: samples[s].detach().cpu().double().numpy() for s in sites}
