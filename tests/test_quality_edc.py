"""EDC (ISO/IEC 29794-1:2024, Schlett et al. 2023) against hand-worked small cases."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from facecast.quality.checks import config_errors
from facecast.quality.columns import orient, random_control, select_columns
from facecast.quality.edc import (
    edc_curve,
    errors,
    pair_quality,
    pauc,
    refit_edc,
    theoretical_best,
    threshold_from_fmr,
    threshold_from_fnmr,
    weighted_edc_on_grid,
)

# six mated comparisons, tau = 0.5, already in ascending pair-quality order with two ties
Q = np.array([0.1, 0.2, 0.2, 0.3, 0.5, 0.5])
S = np.array([0.3, 0.4, 0.9, 0.2, 0.8, 0.6])


def test_edc_six_comparisons_with_ties_by_hand():
    err = errors(S, np.ones(6, bool), 0.5)
    assert err.tolist() == [True, True, False, True, False, False]
    # shuffle the input: the curve must not depend on row order
    perm = np.array([4, 0, 5, 2, 3, 1])
    c = edc_curve(Q[perm], err[perm])
    # ties (0.2, 0.2) and (0.5, 0.5) are discarded together: 0, 1, 3, 4 discarded, then 6
    assert c.counts.tolist() == [0, 1, 3, 4, 6]
    np.testing.assert_allclose(c.discard, [0, 1 / 6, 3 / 6, 4 / 6, 1])
    np.testing.assert_allclose(c.error, [3 / 6, 2 / 5, 1 / 3, 0, 0])
    assert c.start_error == 0.5
    # stepwise pAUC to L = 0.5: 0.5 * 1/6 + 0.4 * (0.5 - 1/6)
    assert pauc(c.discard, c.error, 0.5) == pytest.approx(0.5 / 6 + 0.4 * (0.5 - 1 / 6))
    # L = 0.3: 0.5/6 + 0.4 * (0.3 - 1/6); best = 0.5^2/2 - (0.5 - 0.3)^2/2 = 0.105
    assert pauc(c.discard, c.error, 0.3) == pytest.approx(0.5 / 6 + 0.4 * (0.3 - 1 / 6))
    assert theoretical_best(0.5, 0.3) == pytest.approx(0.105)
    assert theoretical_best(0.5, 0.5) == pytest.approx(0.125)


def test_fm_edc_errors_are_accepts_of_nonmated():
    err = errors(np.array([0.5, 0.49, 0.7]), np.zeros(3, bool), 0.5)
    assert err.tolist() == [True, False, True]  # accept iff score >= tau


def test_last_point_is_one_zero_even_when_the_last_block_has_errors():
    c = edc_curve(np.array([1.0, 1.0]), np.array([1, 1]))
    np.testing.assert_allclose(c.discard, [0, 1])
    np.testing.assert_allclose(c.error, [1, 0])


def test_pair_quality_modes():
    a, b = np.array([0.2, np.nan]), np.array([0.6, 0.5])
    assert pair_quality(a, b, "min")[0] == 0.2
    assert pair_quality(a, b, "mean")[0] == pytest.approx(0.4)
    assert pair_quality(a, b, "product")[0] == pytest.approx(0.12)
    assert np.isnan(pair_quality(a, b, "min")[1])
    with pytest.raises(ValueError, match="pair quality"):
        pair_quality(a, b, "max")


def test_thresholds_fixed_once():
    nonmated = np.array([0.1, 0.2, 0.3, 0.4, 0.9])
    t = threshold_from_fmr(nonmated, 0.2)  # one of five may be accepted
    assert (nonmated >= t).sum() == 1 and t > 0.4
    mated = np.array([0.1, 0.5, 0.6, 0.7])
    t = threshold_from_fnmr(mated, 0.25)  # one of four may be rejected
    assert (mated < t).sum() == 1


def test_weighted_edc_with_unit_weights_matches_the_curve():
    err = errors(S, np.ones(6, bool), 0.5)
    c = edc_curve(Q, err)
    grid = np.array([0.0, 0.1, 1 / 6, 0.4, 0.5, 0.7, 1.0])
    e, a = weighted_edc_on_grid(Q, err, np.ones((1, 6)), grid, 0.5)
    np.testing.assert_allclose(e[0], [0.5, 0.5, 0.4, 0.4, 1 / 3, 0, 0])
    assert a[0] == pytest.approx(pauc(c.discard, c.error, 0.5))
    # weight 2 on the first comparison = duplicating it
    q2, e2 = np.r_[Q[0], Q], np.r_[err[0], err]
    c2 = edc_curve(q2, e2)
    _, a2 = weighted_edc_on_grid(Q, err, np.array([[2, 1, 1, 1, 1, 1.0]]), grid, 0.5)
    assert a2[0] == pytest.approx(pauc(c2.discard, c2.error, 0.5))


def test_refit_variant_is_labelled_and_differs():
    rng = np.random.default_rng(0)
    q = rng.random(400)
    y = np.arange(400) % 2 == 0
    s = np.where(y, 0.6 + 0.3 * q, 0.3) + 0.1 * rng.standard_normal(400)
    d, f = refit_edc(q, s, y, target_fmr=0.05, steps=[0.0, 0.1, 0.2])
    assert d[0] == 0.0 and len(d) == 3 and np.all(np.isfinite(f))


def test_columns_directions_and_control():
    avail = ["blur_effect", "sharpness_laplacian", "yaw", "embed_norm_lbp", "iqa_piqe",
             "label_age", "identity"]
    cols = select_columns(avail, {})
    assert cols == {"blur_effect": "lower", "sharpness_laplacian": "higher",
                    "yaw": "abs_lower", "embed_norm_lbp": "higher", "iqa_piqe": "lower"}
    assert select_columns(avail, {"columns": ["embed_norm_*"]}) == {"embed_norm_lbp": "higher"}
    assert select_columns(avail, {}, {"piqe": False})["iqa_piqe"] == "higher"
    with pytest.raises(KeyError, match="nope"):
        select_columns(avail, {"columns": ["nope"]})
    np.testing.assert_allclose(orient(np.array([-20.0, 5.0]), "abs_lower"), [-20, -5])
    r1 = random_control(["b", "a", "c"], 3)
    r2 = random_control(["c", "a", "b"], 3)
    assert r1[0] == r2[2] and r1[1] == r2[1]


def test_config_errors_name_the_key():
    errs = config_errors({"quality": {"enabled": True, "pair_quality": "max",
                                      "discard_limit": 1.5, "protocols": ["nope"],
                                      "directions": {"x": "up"}},
                          "benchmarks": {"fair_pool": {}}, "evaluate": {}})
    text = "\n".join(errs)
    assert "quality.pair_quality" in text and "quality.discard_limit" in text
    assert "quality.protocols" in text and "quality.directions.x" in text
    assert config_errors({"quality": {"enabled": False, "pair_quality": "max"}}) == []


def test_edc_ranks_informative_quality_above_random():
    """A quality that drives the errors must beat the seeded random control."""
    rng = np.random.default_rng(1)
    n = 4000
    q = rng.random(n)
    scores = 0.2 + 0.8 * q + 0.15 * rng.standard_normal(n)  # mated: low quality -> low score
    err = errors(scores, np.ones(n, bool), 0.5)
    good = pauc(*(lambda c: (c.discard, c.error))(edc_curve(q, err)), 0.2)
    ctrl = random_control([str(i) for i in range(n)], 7)
    bad = pauc(*(lambda c: (c.discard, c.error))(edc_curve(ctrl, err)), 0.2)
    assert good < bad
    assert pd.notna(good)


def test_level_counting_sort_equals_the_sorted_edc():
    from facecast.quality.edc import edc_from_levels, image_levels

    rng = np.random.default_rng(4)
    q_img = np.round(rng.random(50), 1)
    q_img[3] = np.nan
    ia, ib = rng.integers(0, 50, 300), rng.integers(0, 50, 300)
    err = rng.random(300) < 0.3
    lv, k = image_levels(q_img)
    pl = np.minimum(lv[ia], lv[ib])
    pqv = pair_quality(q_img[ia], q_img[ib], "min")
    ok = pl >= 0
    assert (ok == np.isfinite(pqv)).all()
    a, b = edc_from_levels(pl[ok], err[ok], k), edc_curve(pqv[ok], err[ok])
    for f in ("discard", "error", "counts", "kept_errors"):
        np.testing.assert_allclose(getattr(a, f), getattr(b, f))
    c = edc_from_levels(np.array([0, 1, 1, 2, 3, 3]), errors(S, np.ones(6, bool), 0.5), 4)
    np.testing.assert_allclose(c.error, [3 / 6, 2 / 5, 1 / 3, 0, 0])


def test_config_errors_unknown_quality_column_and_groups():
    import yaml

    from facecast.fairness.checks import demographics_errors
    from facecast.fairness.targets import demographics_targets
    from facecast.identification.checks import config_errors as identification_errors
    from facecast.identification.targets import targets as identification_targets
    from facecast.quality.targets import targets as quality_targets

    def section_errors(c):  # the quality, demographics and identification sections
        return config_errors(c) + demographics_errors(c) + identification_errors(c)

    def targets(c, ds):
        return [*quality_targets(c, ds), *demographics_targets(c, ds),
                *identification_targets(c, ds)]

    with open(__import__("pathlib").Path(__file__).resolve().parents[1] / "config.yaml") as fh:
        cfg = yaml.safe_load(fh)
    assert section_errors(cfg) == []
    assert "results/demo/quality/lbp/fair_pool/ranking.csv" in targets(cfg, "demo")
    assert "results/demo/identification/dlib/cmc.csv" in targets(cfg, "demo")
    bad = dict(cfg, quality=dict(cfg["quality"], columns=["iqa_brisque"]),
               demographics=dict(cfg["demographics"], matrix_attributes=["ethnicity"]),
               identification=dict(cfg["identification"], pool="nope"))
    text = "\n".join(section_errors(bad))
    assert "quality.columns: 'iqa_brisque'" in text
    assert "demographics.matrix_attributes: 'ethnicity'" in text
    assert "identification.pool: 'nope'" in text
    off = dict(cfg, quality={"enabled": False}, demographics={"enabled": False},
               identification={"enabled": False})
    assert targets(off, "demo") == []
