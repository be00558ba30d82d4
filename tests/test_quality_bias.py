"""Quality bias per protected group (issue 36, rule quality_bias): the statistics on built
examples, the embedded demo's dlib fair_pool (tests/data/slices) and the session demo run."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import yaml
from conftest import REPO, TEST_DATA

from facecast.quality.bias import bh_adjust, bias_table, rejection_table

CONTRAST = ("luminance_var", "dynamic_range")


def test_bh_adjust_matches_the_step_up_rule():
    p = np.array([0.01, 0.04, 0.03, np.nan, 0.5])
    # m = 4 tests: sorted 0.01, 0.03, 0.04, 0.5 -> 0.04, 0.053, 0.053, 0.5 (monotone)
    np.testing.assert_allclose(bh_adjust(p), [0.04, 0.04 * 4 / 3, 0.04 * 4 / 3, np.nan, 0.5])


def _images(seed: int = 0) -> pd.DataFrame:
    """12 identities x 10 images: group A (6 ids) 1 sd lower on q, B normal, C 2 ids."""
    rng = np.random.default_rng(seed)
    groups = ["A"] * 6 + ["B"] * 4 + ["C"] * 2
    rows = []
    for k, g in enumerate(groups):
        for j in range(10):
            rows.append({"image_id": f"i{k}_{j}", "identity": f"id{k}", "group": g,
                         "q": rng.normal(-1.0 if g == "A" else 0.0, 1.0),
                         "noise": rng.normal()})
    return pd.DataFrame(rows).set_index("image_id")


def test_bias_table_finds_the_lower_group_and_refuses_tiny_ones():
    img = _images()
    t = bias_table(img, ["group"], {"q": "higher", "noise": "higher"}, n_boot=300,
                   min_ids=3, conf=0.95, seed=1).set_index(["measure", "group"])
    a = t.loc[("q", "A")]
    assert a["difference"] < -0.6 and a["ci_hi"] < 0 and a["significant"]
    assert a["n_images"] == 60 and a["n_identities"] == 6
    assert a["median"] == pytest.approx(np.median(img.loc[img["group"] == "A", "q"]))
    c = t.loc[("q", "C")]
    assert c["status"] == "too_few_identities" and c["text"] == "n/a (2 identities)"
    assert np.isnan(c["difference"]) and not c["significant"]
    assert not t.loc[("noise", "B"), "significant"]
    # "lower" turns the sign: a lower-is-better measure that is high in A is worse in A
    flipped = bias_table(img.assign(q=-img["q"]), ["group"], {"q": "lower"}, 0, 3, 0.95, 1)
    assert flipped.set_index("group").loc["A", "difference"] == pytest.approx(a["difference"])


def test_rejection_table_by_hand():
    img = pd.DataFrame({"identity": ["a", "a", "b", "b", "c", "c"],
                        "group": ["G", "G", "H", "H", "H", "H"],
                        "q": [0.0, 5.0, 1.0, 6.0, 7.0, 8.0]},
                       index=pd.Index(["a0", "a1", "b0", "b1", "c0", "c1"], name="image_id"))
    ann = pd.DataFrame({"image_a": ["a0", "b0", "c0", "a0"], "image_b": ["a1", "b1", "c1", "b0"],
                        "label": [1, 1, 1, 0], "group": ["G", "H", "H", "mixed"]})
    err = np.array([True, False, True, False])  # FNM of G's pair and of c's pair
    t = rejection_table(ann, err, img, ["group"], {"q": "higher"}, [0.2], min_ids=1)
    t = t.set_index("group")
    # the lowest 20 % of 6 images: floor(1.2) = 1 image below the value at position 1
    # (1.0) -> a0 goes
    assert t.loc["all", "discarded_share"] == pytest.approx(1 / 6)
    assert t.loc["G", "discarded_share"] == 0.5 and t.loc["H", "discarded_share"] == 0.0
    assert t.loc["G", "fnmr_before"] == 1.0 and np.isnan(t.loc["G", "fnmr_after"])
    assert t.loc["H", "fnmr_before"] == 0.5 and t.loc["H", "fnmr_after"] == 0.5
    assert t.loc["all", "n_mated_before"] == 3 and t.loc["all", "n_mated_after"] == 2
    small = rejection_table(ann, err, img, ["group"], {"q": "higher"}, [0.2], min_ids=2)
    assert small.set_index("group").loc["G", "text"] == "n/a (1 identities)"


@pytest.fixture(scope="module")
def demo_bias(tmp_path_factory):
    """run_bias on the embedded demo's dlib fair_pool (240 identities x 8 images)."""
    from facecast.quality.stage import run_bias

    cfg = yaml.safe_load((REPO / "config.yaml").read_text())
    out = tmp_path_factory.mktemp("bias")
    bias = run_bias(TEST_DATA / "slices/dlib_fair_pool.parquet",
                    TEST_DATA / "slices/attributes.parquet", out, cfg["quality"],
                    cfg["fairness"], model="dlib", protocol="fair_pool", seed=cfg["seed"])
    return bias, out


def test_planted_low_contrast_group_has_lower_contrast(demo_bias):
    bias, out = demo_bias
    for name in ("bias.parquet", "bias.csv", "rejection.parquet", "rejection.csv",
                 "bias.png", "bias.html"):
        assert (out / name).stat().st_size > 0, name
    g = bias[(bias["attribute"] == "group")].set_index(["measure", "group"])
    for m in CONTRAST:
        row = g.loc[(m, "female_dark")]
        assert row["significant"] and row["difference"] < -0.3 and row["ci_hi"] < 0, m
    assert set(bias["attribute"]) == {"group", "gender", "skin"}
    assert bias["p_adjusted"].dropna().between(0, 1).all()
    html = (out / "bias.html").read_text()
    assert "female_dark: significantly LOWER quality than the rest" in html
    bullet = html.split("female_dark:")[1].split("</li>")[0]
    low = g.xs("female_dark", level="group")
    low = low[low["significant"] & (low["difference"] < 0)].sort_values("difference")
    assert f"on {len(low)} measure(s)" in bullet          # the count, from the table
    assert all(m in bullet for m in low.index[:3])        # the three lowest, by name
    if len(low) > 3:
        assert f"and {len(low) - 3} more" in bullet


def test_rejection_discards_the_low_contrast_group_more(demo_bias):
    _, out = demo_bias
    r = pd.read_parquet(out / "rejection.parquet")
    r = r[(r["measure"] == "luminance_var") & r["attribute"].isin(["all", "group"])]
    for q in (0.05, 0.1, 0.2):
        at = r[r["reject"] == q].set_index("group")
        assert at.loc["all", "discarded_share"] == pytest.approx(q, abs=0.01)
        assert at.loc["female_dark", "discarded_share"] > 2 * at.loc["male_light",
                                                                     "discarded_share"]
        assert at.loc["all", "fnmr_after"] <= at.loc["all", "fnmr_before"]


def test_demo_run_bias_with_ofiq_columns(demo_run):
    """The session demo (64 identities: only 6 of them dark-skinned women in fair_pool):
    the planted group's fine-detail contrast is significantly lower, and every contrast
    measure, OFIQ's included, points the same way."""
    work, cfg = demo_run
    attrs = pd.read_parquet(work / "results/demo/attributes.parquet")
    assert {"ofiq_DynamicRange", "ofiq_LuminanceVariance_native"} <= set(attrs.columns)
    for model in cfg["evaluate"]["models"]:
        out = work / "results/demo/quality" / model / "fair_pool"
        bias = pd.read_csv(out / "bias.csv")
        assert "ofiq_DynamicRange" in set(bias["measure"])
        assert not any(m.endswith("_native") for m in bias["measure"])
        g = bias[bias["attribute"] == "group"].set_index(["measure", "group"])
        assert g.loc[("sharpness_laplacian", "female_dark"), "significant"]
        for m in ("sharpness_laplacian", *CONTRAST, "ofiq_DynamicRange",
                  "ofiq_LuminanceVariance"):
            assert g.loc[(m, "female_dark"), "difference"] < 0, (model, m)
        assert (g.loc[("ofiq_SingleFacePresent", "female_dark"), "text"]
                == "n/a (no variation)")  # one face in every demo image
        line = (out / "bias.html").read_text().split("female_dark: ")[1].split("</li>")[0]
        assert line.startswith("significantly LOWER") and "sharpness_laplacian" in line
