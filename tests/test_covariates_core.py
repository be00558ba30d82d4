"""Covariate stage: numerical core, pair building, config checks (fast, no fitting)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy.stats import norm

from facecast.covariates.basis import build_basis
from facecast.covariates.checks import config_errors
from facecast.covariates.derive import binned_tar
from facecast.covariates.mixture import (
    destandardise,
    mixture_cdf,
    mixture_quantile,
    mixture_sf,
    tar_at_fmr,
)
from facecast.covariates.model import ClassFit
from facecast.covariates.pairs import build_pairs


def test_mixture_quantile_inverts_cdf():
    w = np.array([0.2, 0.5, 0.3])
    mu = np.array([-1.0, 0.3, 2.0])
    sd = np.array([0.4, 1.1, 0.2])
    p = np.geomspace(1e-6, 0.5, 400)
    t = mixture_quantile(p, w, mu, sd)
    assert np.max(np.abs(mixture_cdf(t, w, mu, sd) - p)) < 1e-9
    # the upper tail is solved on the survival function, exact for small FMRs
    ts = mixture_quantile(p, w, mu, sd, upper=True)
    assert np.max(np.abs(mixture_sf(ts, w, mu, sd) - p) / p) < 1e-9


def _constant_fit(mu: float, sd: float, center: float = 0.0, scale: float = 1.0) -> ClassFit:
    """One component, zero basis coefficients: no covariate effect (two draws)."""
    x = np.linspace(0, 1, 50)[:, None]
    basis = build_basis(x, 3, 1.0)
    k = basis.n_basis
    draws = {"w_intercept": np.zeros((2, 1)), "w_coef": np.full((2, k, 1), 0.3),
             "mu_intercept": np.full((2, 1), mu), "mu_coef": np.zeros((2, k, 1)),
             "sigma": np.full((2, 1), sd)}
    return ClassFit(1, basis, center, scale, draws)


def test_one_component_roc_is_binormal():
    match, nonmatch = _constant_fit(1.3, 0.7), _constant_fit(-0.2, 1.2)
    x = np.array([[0.1], [0.5], [0.9]])
    fpr = np.geomspace(1e-5, 0.5, 60)
    tar, _ = tar_at_fmr(fpr[:, None, None], match.mixture_at(x), nonmatch.mixture_at(x))
    closed = norm.cdf((1.3 - (-0.2) - 1.2 * norm.isf(fpr)) / 0.7)
    assert np.max(np.abs(tar - closed[:, None, None])) < 1e-6


def test_convergence_checks_tell_drift_from_minibatch_noise():
    from facecast.covariates.infer import converged, drift_within_noise

    rng = np.random.default_rng(0)
    flat = 1.0 + rng.normal(0, 0.03, 2000)            # settled, noisy minibatch ELBOs
    ok, rel = converged(flat)
    assert drift_within_noise(flat)[0]
    trending = 1.0 + np.linspace(0.5, 0.0, 2000) + rng.normal(0, 0.03, 2000)
    assert not drift_within_noise(trending)[0]
    assert not converged(trending)[0]
    smooth = 1.0 + np.exp(-np.arange(2000) / 100)     # noiseless and settled
    assert converged(smooth)[0]                        # (no noise: the strict check decides)
    assert rel >= 0


def test_destandardisation_exact():
    center, scale = 0.37, 0.081
    fit = _constant_fit(0.5, 0.6, center, scale)
    std = _constant_fit(0.5, 0.6)
    x = np.array([[0.3]])
    t = np.linspace(0.0, 0.8, 9)
    in_scores = mixture_cdf(t[:, None, None], *fit.mixture_at(x))
    in_std = mixture_cdf(((t - center) / scale)[:, None, None], *std.mixture_at(x))
    assert np.max(np.abs(in_scores - in_std)) < 1e-14
    mu, sd = destandardise(np.array([0.5]), np.array([0.6]), center, scale)
    assert mu[0] == center + scale * 0.5 and sd[0] == scale * 0.6


def _tables():
    attr = pd.DataFrame({"image_id": ["a", "b", "c", "d"], "blur": [0.0, 1.0, 2.0, np.nan],
                         "age": [20.0, 30.0, 60.0, 40.0]})
    scores = pd.DataFrame({
        "image_a": ["a", "b", "a", "a", "c", "a", "b", "a"],
        "image_b": ["b", "a", "c", "b", "a", "a", "c", "d"],
        "label": [1, 1, 0, 1, 0, 1, 0, 0],
        "score": [0.9, 0.8, 0.1, 0.7, 0.2, 1.0, 0.3, 0.4],
        "status": ["ok", "ok", "ok", "ok", "ok", "ok", "no_face", "ok"]})
    return scores, attr


def test_pairs_each_unordered_pair_once():
    scores, attr = _tables()
    ps = build_pairs(scores, attr, ["blur"], ["absdiff:age"])
    assert list(zip(ps.pairs["image_a"], ps.pairs["image_b"], strict=True)) == [("a", "b"), ("a", "c")]
    assert ps.y.tolist() == [0.9, 0.1]          # the first occurrence of each pair is kept
    c = ps.counts
    # the no_face pair is a pair without a feature (evaluate.failed), not a bad status:
    # no fit sees it, the empirical rates may count it (PairSet.failed)
    assert (c["duplicate"], c["self_pair"], c["not_ok"], c["missing_covariate"],
            c["failed"]) == (3, 1, 0, 1, 1)
    assert c["input"] == sum(c[k] for k in ("duplicate", "self_pair", "not_ok",
                                            "missing_covariate", "used", "failed"))
    assert ps.failed[["image_a", "image_b", "label", "blur_a", "blur_b", "age_a",
                      "age_b"]].values.tolist() == [["b", "c", 0, 1.0, 2.0, 30.0, 60.0]]
    assert ps.names == ["blur_a", "blur_b", "absdiff:age"]
    assert ps.x.tolist() == [[0.0, 1.0, 10.0], [0.0, 2.0, 40.0]]
    doubled = build_pairs(pd.concat([scores, scores.rename(columns={
        "image_a": "image_b", "image_b": "image_a"})]), attr, ["blur"], ["absdiff:age"])
    assert np.array_equal(doubled.x, ps.x) and np.array_equal(doubled.y, ps.y)


def test_pairs_unknown_column_is_an_error():
    scores, attr = _tables()
    with pytest.raises(ValueError, match="label_yaw"):
        build_pairs(scores, attr, ["label_yaw"])


def test_basis_prunes_centres_away_from_data():
    rng = np.random.default_rng(0)
    # data on two clusters: the grid's middle centres are far from every point
    x = np.concatenate([rng.normal(0, 0.05, (200, 2)), rng.normal(10, 0.05, (200, 2))])
    basis = build_basis(x, 6, 1.0)
    z = basis.zscore(x)
    dist = np.min(np.linalg.norm(basis.centres[:, None] - z[None], axis=-1), axis=1)
    assert len(basis.centres) < 36 and np.all(dist <= 1.0)


def test_binned_tar_reports_thin_bins():
    rng = np.random.default_rng(1)
    s = np.concatenate([rng.normal(2, 1, 300), rng.normal(0, 1, 3000)])
    lab = np.r_[np.ones(300), np.zeros(3000)]
    v = rng.uniform(0, 1, len(s))
    v[:150] = 0.2
    rows = binned_tar(s, lab, v, [0.0, 0.5, 0.999, 1.0], 0.01, 50, 0)
    assert 0 < rows[0]["tar"] < 1 and rows[0]["tar_low"] <= rows[0]["tar"] <= rows[0]["tar_high"]
    assert np.isnan(rows[2]["tar"]) and rows[2]["note"].startswith("n/a")


def _config(**cov):
    return {"embed": {"models": {"lbp": {}, "dlib": {}}},
            "evaluate": {"benchmarks": ["fair_pool", "random"]},
            "covariates": {"enabled": True, "models": ["lbp"], "protocols": ["fair_pool"],
                           "covariates": ["label_blur"], **cov}}


def test_config_errors_name_the_key():
    assert config_errors(_config()) == []
    assert config_errors({"covariates": {"enabled": False, "models": ["nope"]}}) == []
    errs = config_errors(_config(models=["arcface"], protocols=["nope"],
                                 pair_features=["diff:label_age"], covariates=[]))
    assert any(e.startswith("covariates.models") and "arcface" in e for e in errs)
    assert any(e.startswith("covariates.protocols") and "nope" in e for e in errs)
    assert any(e.startswith("covariates.pair_features") for e in errs)
    assert len(errs) == 3
    # no covariate at all: not a mistake but a skipped stage, said in the run plan
    from facecast.covariates.checks import fill_defaults
    from facecast.covariates.targets import targets

    empty = _config(covariates=[])
    assert config_errors(empty) == []
    assert targets(empty, "demo", ["demo"]) == []
    (line,) = fill_defaults(empty, set())
    assert line.startswith("covariates: skipped - no covariate column")
    assert "covariates.covariates" in line


def test_config_errors_unknown_covariate_column():
    import yaml

    from facecast.covariates.targets import enabled, targets

    cfg = yaml.safe_load((Path(__file__).resolve().parents[1] / "config.yaml").read_text())
    assert config_errors(cfg) == []
    assert enabled(cfg) and targets(cfg, "demo", ["demo"]) == [
        "results/demo/covariates/dlib/fair_pool/fit.json"]
    cfg["covariates"]["covariates"] = ["label_blurr"]
    errs = config_errors(cfg)
    assert len(errs) == 1 and errs[0].startswith("covariates.covariates") and "label_blurr" in errs[0]


def test_one_component_model_samples_no_weights():
    """With H = 1 the weight sites are not in the model (weight 1 whatever they are); a fit
    still carries them, as zero draws, and its likelihood is the one normal's."""
    import pyro
    import torch

    from facecast.covariates.model import (
        SITES,
        Priors,
        complete_draws,
        mixture_model,
        model_sites,
    )

    phi = torch.rand(30, 4)
    y = torch.randn(30)
    sampled = {}
    for h in (1, 2):
        tr = pyro.poutine.trace(mixture_model).get_trace(phi, y, 30, h, Priors())
        sampled[h] = {n for n, s in tr.nodes.items()
                      if s["type"] == "sample" and not s["is_observed"]} - {"data"}
        assert sampled[h] == set(model_sites(h))
    assert sampled[2] == set(SITES)
    assert sampled[1] == set(SITES) - {"w_intercept", "w_coef"}
    cond = {"mu_intercept": torch.tensor([0.3]), "mu_coef": torch.full((4, 1), 0.1),
            "sigma": torch.tensor([0.8])}
    tr = pyro.poutine.trace(pyro.poutine.condition(mixture_model, cond)).get_trace(
        phi, y, 30, 1, Priors())
    mu = 0.3 + phi.sum(1) * 0.1
    expected = torch.distributions.Normal(mu, 0.8).log_prob(y).sum()
    assert float(tr.nodes["y"]["fn"].log_prob(y).sum()) == pytest.approx(float(expected))

    draws = complete_draws({"mu_intercept": np.zeros((3, 1)), "mu_coef": np.zeros((3, 4, 1)),
                            "sigma": np.ones((3, 1))}, 1, 4)
    assert set(draws) == set(SITES)
    assert draws["w_coef"].shape == (3, 4, 1) and not draws["w_intercept"].any()
    basis = build_basis(np.linspace(0, 1, 50)[:, None], 4, 1.0)
    w, _, _ = ClassFit(1, basis, 0.0, 1.0, draws).mixture_at(np.array([[0.2], [0.9]]))
    assert np.all(w == 1.0)


@pytest.mark.parametrize("where", ["score", "covariate"])
def test_a_non_finite_pair_stops_the_fit_naming_the_count(where):
    """The fit runs without Pyro's argument checks (a fifth of every SVI step): a NaN or an
    infinity would otherwise turn the ELBO into NaN silently, so the fit refuses it."""
    from facecast.covariates.infer import fit_class

    x = np.linspace(0, 1, 40)[:, None]
    y = np.sin(x[:, 0])
    if where == "score":
        y[[3, 7]] = [np.nan, np.inf]
    else:
        x = x.copy()
        x[[3, 7], 0] = np.nan
    basis = build_basis(np.linspace(0, 1, 40)[:, None], 3, 1.0)
    with pytest.raises(ValueError, match=r"covariate fit match: 2 of 40 pairs have a "
                                         r"non-finite score or covariate"):
        fit_class(x, y, n_components=1, basis=basis, cfg={"steps": 5}, seed=0, label="match")


def test_fits_run_without_argument_checks_and_restore_them(monkeypatch):
    """Same draws with the checks off as with them on; Pyro's global setting is back
    afterwards."""
    import pyro
    from pyro.infer.util import is_validation_enabled

    from facecast.covariates.infer import fit_class

    rng = np.random.default_rng(0)
    x = rng.uniform(0, 1, (60, 1))
    y = 1.0 - x[:, 0] + rng.normal(0, 0.3, 60)
    basis = build_basis(x, 3, 1.0)
    cfg = {"steps": 30, "draws": 5, "batch_size": 60}
    seen = []
    real = pyro.validation_enabled

    def spy(flag):
        seen.append(flag)
        return real(flag)

    monkeypatch.setattr(pyro, "validation_enabled", spy)
    before = is_validation_enabled()
    fast, _ = fit_class(x, y, n_components=1, basis=basis, cfg=cfg, seed=3)
    assert seen == [False] and is_validation_enabled() == before
    monkeypatch.setattr(pyro, "validation_enabled", lambda flag: real(True))
    checked, _ = fit_class(x, y, n_components=1, basis=basis, cfg=cfg, seed=3)
    for site in fast.draws:
        np.testing.assert_array_equal(fast.draws[site], checked.draws[site])
    assert fast.draws["mu_coef"].std() > 0
