"""Planted annotation noise of the synthetic demo (issue 14)."""

from __future__ import annotations

import pandas as pd
import pytest
from labels_support import truth_table

from facecast.datasets.label_noise import DEMO_LABEL_NOISE, plant_label_noise
from facecast.datasets.synthetic.generate import generate_dataset


def test_noise_is_deterministic_and_leaves_truth_alone():
    t = truth_table()
    a, sa = plant_label_noise(t, DEMO_LABEL_NOISE, 5)
    b, sb = plant_label_noise(t, DEMO_LABEL_NOISE, 5)
    c, _ = plant_label_noise(t, DEMO_LABEL_NOISE, 6)
    pd.testing.assert_frame_equal(a, b)
    assert sa == sb
    assert not a.equals(c)
    pd.testing.assert_frame_equal(a[t.columns], t)  # clean columns untouched
    assert {f"label_noisy_{x}" for x in ("male", "beard", "hair_long", "bald", "glasses",
                                         "hat")} <= set(a.columns)


def test_each_kind_of_noise_is_planted():
    t = truth_table()
    spec = {"flip_rate": {"male": 0.1}, "group_noise": {"attribute": "glasses",
            "group_column": "dark_skin", "group_value": 1.0, "rate": 0.3},
            "contradiction": {"attributes": ["bald", "hair_long"], "rate": 0.05},
            "flipped_identity": {"attribute": "beard", "count": 1}}
    a, s = plant_label_noise(t, spec, 1)
    flips = a["label_noisy_male"] != a["label_male"]
    assert abs(flips.mean() - 0.1) < 0.02
    g = a["label_noisy_glasses"] != a["label_glasses"]
    assert g[a["label_dark_skin"] == 0].sum() == 0
    assert abs(g[a["label_dark_skin"] == 1].mean() - 0.3) < 0.04
    both = (a["label_noisy_bald"] == 1) & (a["label_noisy_hair_long"] == 1)
    assert both.sum() == round(0.05 * len(a)) == s["planted_contradictions"]
    (ident,) = s["flipped_identities"]
    sel = a["identity"] == ident
    assert (a.loc[sel, "label_noisy_beard"] != a.loc[sel, "label_beard"]).all()
    assert (a.loc[~sel, "label_noisy_beard"] == a.loc[~sel, "label_beard"]).all()


def test_bad_spec_is_an_error_naming_the_key():
    with pytest.raises(ValueError, match="flip_rate.male"):
        plant_label_noise(truth_table(4, 2), {"flip_rate": {"male": 0.7}}, 0)
    with pytest.raises(ValueError, match="label_nose"):
        plant_label_noise(truth_table(4, 2), {"flip_rate": {"nose": 0.1}}, 0)


def test_generator_images_unchanged_by_label_noise(tmp_path):
    kw = {"seed": 3, "n_identities": 3, "images_per_identity": 2, "image_size": 64}
    plain = generate_dataset(tmp_path / "a", **kw)
    noisy = generate_dataset(tmp_path / "b", label_noise=DEMO_LABEL_NOISE, **kw)
    for rel in plain["path"]:
        assert (tmp_path / "a" / rel).read_bytes() == (tmp_path / "b" / rel).read_bytes()
    pd.testing.assert_frame_equal(noisy[plain.columns], plain)
    extra = sorted(set(noisy.columns) - set(plain.columns))
    assert extra and all(c.startswith("label_noisy_") for c in extra)
