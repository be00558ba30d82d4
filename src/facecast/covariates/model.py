"""The Pyro model of one class's scores given covariates (McCurrie et al., arXiv 2009.09583).

p(y | x) = sum_h pi_h(x) N(y | mu_h(x), sigma_h), on scores standardised per class:
pi(x) = softmax(a + phi(x) B), mu(x) = m + phi(x) C, sigma constant, with phi the local RBF
basis (:mod:`facecast.covariates.basis`). Priors are weakly informative on the standardised
scale: a ~ N(0, 1), m ~ N(0, 2), sigma ~ LogNormal(log 0.5, 1), and the basis coefficients
B ~ N(0, s_w), C ~ N(0, s_mu), where s_w, s_mu are the smoothness setting (smaller = smoother
surfaces); the coefficients of the linear z columns of the design (see
:mod:`facecast.covariates.basis`) have N(0, 1) priors.

With one component (H = 1) the mixture weight is 1 whatever a and B are, so the model
leaves those sites out (:func:`model_sites`): they would only carry draws from their
priors and cost the sampler dimensions (NUTS ran about three times as long with them).
Their draws are then zeros (:func:`complete_draws`), which give the same weight 1.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyro
import pyro.distributions as dist
import torch
from scipy.special import log_softmax, ndtr

from facecast.covariates.basis import RBFBasis
from facecast.covariates.mixture import destandardise

SITES = ("w_intercept", "w_coef", "mu_intercept", "mu_coef", "sigma")
#: the mixture-weight sites, left out of a one-component model
WEIGHT_SITES = ("w_intercept", "w_coef")


def model_sites(n_components: int) -> tuple[str, ...]:
    """The sites :func:`mixture_model` samples with ``n_components`` components."""
    return SITES if n_components > 1 else tuple(s for s in SITES if s not in WEIGHT_SITES)


def complete_draws(draws: dict[str, np.ndarray], n_components: int, n_basis: int
                   ) -> dict[str, np.ndarray]:
    """``draws`` of the sampled sites plus zero draws of the sites a one-component model
    leaves out (weight 1 either way), so every fit has all of :data:`SITES`."""
    s = len(next(iter(draws.values())))
    shapes = {"w_intercept": (s, n_components), "w_coef": (s, n_basis, n_components)}
    return {site: draws[site] if site in draws else np.zeros(shapes[site]) for site in SITES}


@dataclass
class Priors:
    """Prior scales of the basis coefficients (the smoothness setting)."""

    weight_scale: float = 1.0
    loc_scale: float = 0.5
    linear_scale: float = 1.0


def mixture_model(phi: torch.Tensor, y: torch.Tensor | None, n_total: int, n_components: int,
                  priors: Priors, n_linear: int = 0) -> None:
    """Pyro model: ``phi`` (B, K) basis rows of a minibatch, ``y`` (B,) standardised scores.

    ``n_total`` is the size of the whole data set (the likelihood is scaled by n_total / B).
    """
    k, h = phi.shape[1], n_components
    zh, zkh = phi.new_zeros(h), phi.new_zeros((k, h))
    lin = torch.arange(k, device=phi.device)[:, None] < n_linear      # (k, 1)
    sw = torch.where(lin, priors.linear_scale, priors.weight_scale).to(phi.dtype).expand(k, h)
    sm = torch.where(lin, priors.linear_scale, priors.loc_scale).to(phi.dtype).expand(k, h)
    if h > 1:
        a = pyro.sample("w_intercept", dist.Normal(zh, 1.0).to_event(1))
        b = pyro.sample("w_coef", dist.Normal(zkh, sw).to_event(2))
    m = pyro.sample("mu_intercept", dist.Normal(zh, 2.0).to_event(1))
    c = pyro.sample("mu_coef", dist.Normal(zkh, sm).to_event(2))
    sigma = pyro.sample("sigma", dist.LogNormal(zh + float(np.log(0.5)), 1.0).to_event(1))
    with pyro.plate("data", n_total, subsample=torch.arange(phi.shape[0], device=phi.device)):
        mu = m + phi @ c
        if h == 1:     # weight 1: the mixture is its one normal component
            pyro.sample("y", dist.Normal(mu[:, 0], sigma[0]), obs=y)
        else:
            pyro.sample("y", dist.MixtureSameFamily(dist.Categorical(logits=a + phi @ b),
                                                    dist.Normal(mu, sigma)), obs=y)


@dataclass
class ClassFit:
    """Posterior draws of one class's model plus what maps them to score units."""

    n_components: int
    basis: RBFBasis
    center: float
    scale: float
    draws: dict[str, np.ndarray]      # site -> (S, ...) constrained draws

    @property
    def n_draws(self) -> int:
        return int(next(iter(self.draws.values())).shape[0])

    def mixture_at(self, x: np.ndarray, draws: slice | None = None
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(w, mu, sd), each (S, P, H), at raw covariate rows ``x`` (P, d), in score units."""
        phi = self.basis.features(np.asarray(x, float)).double().numpy()
        d = {k: v[draws] if draws is not None else v for k, v in self.draws.items()}
        logits = d["w_intercept"][:, None, :] + np.einsum("pk,skh->sph", phi, d["w_coef"])
        w = np.exp(log_softmax(logits, axis=-1))
        mu_std = d["mu_intercept"][:, None, :] + np.einsum("pk,skh->sph", phi, d["mu_coef"])
        sd_std = np.broadcast_to(d["sigma"][:, None, :], mu_std.shape)
        mu, sd = destandardise(mu_std, sd_std, self.center, self.scale)
        return w, mu, sd

    def log_predictive(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        """log mean_s p(y_i | x_i, theta_s) per point (score units)."""
        w, mu, sd = self.mixture_at(x)
        z = (np.asarray(y, float)[None, :, None] - mu) / sd
        comp = np.log(w) - 0.5 * z ** 2 - np.log(sd) - 0.5 * np.log(2 * np.pi)
        per_draw = np.logaddexp.reduce(comp, axis=-1)              # (S, P)
        return np.logaddexp.reduce(per_draw, axis=0) - np.log(per_draw.shape[0])

    def pit(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        """Posterior predictive CDF at the observed scores (uniform if the model is right)."""
        w, mu, sd = self.mixture_at(x)
        return np.mean(np.sum(w * ndtr((np.asarray(y, float)[None, :, None] - mu) / sd), -1), 0)
