"""Label audit (issue 14): agreement statistics, rules, metrics, suspects, recovery.

Statistical recovery runs on generated label tables (no images): the audit must find the
noise the demo generator plants.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from labels_support import truth_table, with_features
from sklearn.metrics import cohen_kappa_score, roc_auc_score

from facecast.datasets.label_noise import plant_label_noise
from facecast.io.parquet_io import read_parquet
from facecast.labels.agreement import (
    cohen_kappa,
    fleiss_kappa_by_group,
    krippendorff_alpha_nominal,
    leave_one_out_disagreement,
)
from facecast.labels.audit import group_skew, run_audit
from facecast.labels.checks import config_errors
from facecast.labels.metrics import attribute_metrics, best_f1_threshold
from facecast.labels.rules import CELEBA_RULES, evaluate_rules
from facecast.labels.suspects import identity_suspects, oof_probabilities, rank_suspects

ATTRS = ["male", "beard", "hair_long", "bald", "glasses", "hat"]
INVARIANT = ["male", "beard", "hair_long", "bald"]


def test_fleiss_kappa_hand_example_and_variable_raters():
    # items [3,0], [0,3], [2,1] (ones, zeros): P = 7/9, p1 = 5/9 -> kappa = 22/40
    y = np.array([1, 1, 1, 0, 0, 0, 1, 1, 0], float)
    g = np.repeat(["a", "b", "c"], 3)
    k, items, n = fleiss_kappa_by_group(y, g)
    assert k == pytest.approx(22 / 40) and (items, n) == (3, 9)
    # an identity with one image is no item; NaN labels are no ratings
    k2, items2, _ = fleiss_kappa_by_group(np.r_[y, 1.0, np.nan],
                                           np.concatenate([g, ["d", "c"]]))
    assert k2 == pytest.approx(22 / 40) and items2 == 3


@pytest.mark.parametrize("e", [0.05, 0.1, 0.2])
def test_fleiss_kappa_recovers_flip_rate(e):
    """Balanced invariant attribute flipped with rate e: kappa ~ (1 - 2e)^2 (within 0.03)."""
    t = truth_table(n_ids=1500, per_id=8, seed=2)
    noisy, _ = plant_label_noise(t, {"flip_rate": {"male": e}}, 11)
    k, _, _ = fleiss_kappa_by_group(noisy["label_noisy_male"].to_numpy(),
                                    noisy["identity"].to_numpy())
    assert abs(k - (1 - 2 * e) ** 2) < 0.03


def test_cohen_and_krippendorff():
    a = np.array([1, 1, 0, 0, 1, 0, 1, 1], float)
    b = np.array([1, 0, 0, 0, 1, 1, 1, 1], float)
    assert cohen_kappa(a, b) == pytest.approx(cohen_kappa_score(a, b))
    # two coders [1,1,0,0] / [1,0,0,0]: alpha = 1 - 7 * 2 / (2 * 5 * 3)
    r = np.array([[1, 1], [1, 0], [0, 0], [0, 0]], float)
    assert krippendorff_alpha_nominal(r) == pytest.approx(1 - 14 / 30)
    assert krippendorff_alpha_nominal(np.c_[a, a, a]) == pytest.approx(1.0)
    r_missing = np.array([[1, 1, np.nan], [1, 0, np.nan], [0, 0, np.nan], [0, 0, np.nan],
                          [1, np.nan, np.nan]])
    assert krippendorff_alpha_nominal(r_missing) == pytest.approx(1 - 14 / 30)


def test_leave_one_out_disagreement():
    share, others = leave_one_out_disagreement(np.array([1, 1, 1, 0, 1.0]),
                                               np.array(["a", "a", "a", "a", "b"]))
    np.testing.assert_allclose(share[:4], [1 / 3, 1 / 3, 1 / 3, 1.0])
    assert np.isnan(share[4]) and others.tolist() == [3, 3, 3, 3, 0]


def test_celeba_rules_flag_exactly():
    lab = pd.DataFrame({
        "No_Beard": [1, 1, 0, 1], "Goatee": [1, 0, 1, 0], "Mustache": [0, 0, 0, 0],
        "5_o_Clock_Shadow": [0, 0, 0, 0], "Straight_Hair": [1, 0, 1, 0],
        "Wavy_Hair": [1, 0, 0, 0], "Bald": [0, 0, 1, 0], "Bangs": [0, 0, 0, 0],
        "Receding_Hairline": [0, 0, 0, 0], "Black_Hair": [1, 1, 0, 0],
        "Blond_Hair": [0, 1, 0, 0], "Brown_Hair": [0, 0, 0, 0], "Gray_Hair": [0, 0, 0, 0],
        "Double_Chin": [0, 0, 0, 1], "Chubby": [0, 0, 0, 0]}, dtype=float)
    flags, table = evaluate_rules(lab, CELEBA_RULES)
    assert flags["no_beard_vs_facial_hair"].tolist() == [True, False, False, False]
    assert flags["straight_vs_wavy"].tolist() == [True, False, False, False]
    assert flags["bald_vs_hair"].tolist() == [False, False, True, False]
    assert flags["hair_colours"].tolist() == [False, True, False, False]
    assert flags["double_chin_without_chubby"].tolist() == [False, False, False, True]
    assert flags["any_hard"].tolist() == [True, True, True, False]
    rate = table.set_index("rule")["rate"]
    assert rate["any rule"] == 1.0 and rate["straight_vs_wavy"] == 0.25


def test_rule_on_missing_attribute_is_reported_not_fatal():
    flags, table = evaluate_rules(pd.DataFrame({"Bald": [1.0]}), CELEBA_RULES)
    assert table.set_index("rule").loc["straight_vs_wavy", "status"].startswith("n/a (missing")


def test_metrics_baselines():
    y = np.array([1, 0, 0, 0, 1, 0, 0, 0], float)
    row = attribute_metrics("x", y, None, "baseline")
    assert row["prevalence"] == 0.25 and row["majority_accuracy"] == 0.75
    assert row["all_positive_f1"] == pytest.approx(2 * 0.25 / 1.25)
    row = attribute_metrics("x", y, np.ones(8), "all-positive")
    assert row["f1"] == pytest.approx(2 * 0.25 / 1.25)  # the baseline is what it says
    t, f1 = best_f1_threshold(y, np.array([0.9, 0.1, 0.2, 0.3, 0.8, 0.1, 0.2, 0.4]))
    assert f1 == 1.0 and 0.4 < t < 0.8


def _audited(e: float = 0.05, seed: int = 3):
    t = truth_table(n_ids=300, per_id=8, seed=seed)
    spec = {"flip_rate": dict.fromkeys(ATTRS, e),
            "flipped_identity": {"attribute": "male", "count": 1}}
    noisy, planted = plant_label_noise(t, spec, seed)
    labels = pd.DataFrame({a: noisy[f"label_noisy_{a}"].to_numpy() for a in ATTRS})
    x = with_features(noisy, ATTRS, seed=seed)
    probs = oof_probabilities(x, labels, noisy["identity"].to_numpy(), folds=3, seed=0)
    return noisy, planted, labels, probs


def test_planted_flips_rank_above_clean_labels():
    """AUROC of the suspect score for the planted flips > 0.95 at e = 0.05."""
    noisy, planted, labels, probs = _audited(0.05)
    kappas = {a: fleiss_kappa_by_group(labels[a].to_numpy(), noisy["identity"].to_numpy())[0]
              for a in ATTRS}
    flags, _ = evaluate_rules(labels, {})
    s = rank_suspects(np.arange(len(noisy)).astype(str), noisy["identity"], labels, probs,
                      kappas, INVARIANT, flags, {})
    truth = pd.DataFrame({a: noisy[f"label_{a}"].to_numpy() for a in ATTRS})
    flipped = (truth != labels).to_numpy()
    lookup = s.set_index(["image_id", "attribute"])["score"]
    score = np.stack([lookup.loc[(np.arange(len(noisy)).astype(str), a)].to_numpy()
                      for a in ATTRS], axis=1)
    # whole-identity flips are the identity table's job; image-level flips are scored here
    whole = noisy["identity"].isin(planted["flipped_identities"]).to_numpy()[:, None] & \
        (np.array(ATTRS) == "male")[None, :]
    keep = ~whole
    assert roc_auc_score(flipped[keep], score[keep]) > 0.95
    assert s["rank"].tolist() == list(range(1, len(s) + 1))
    assert set(s.columns) >= {"image_id", "attribute", "label", "score", "reasons", "rank"}


def test_flipped_identity_tops_identity_suspects():
    noisy, planted, labels, probs = _audited(0.05)
    ids = identity_suspects(noisy["identity"], labels, probs, INVARIANT)
    top = ids[ids["attribute"] == "male"].iloc[0]
    assert top["identity"] == planted["flipped_identities"][0] and bool(top["disagree"])


def test_group_specific_noise_shows_as_a_gap():
    t = truth_table(n_ids=300, per_id=8, seed=4)
    spec = {"flip_rate": {"hair_long": 0.03}, "group_noise": {
        "attribute": "hair_long", "group_column": "dark_skin", "group_value": 1.0,
        "rate": 0.2}}
    noisy, _ = plant_label_noise(t, spec, 4)
    lab = pd.DataFrame({"hair_long": noisy["label_noisy_hair_long"].to_numpy()})
    dis = pd.DataFrame({"hair_long": leave_one_out_disagreement(
        lab["hair_long"].to_numpy(), noisy["identity"].to_numpy())[0]})
    groups = pd.DataFrame({"skin": np.where(noisy["label_dark_skin"] == 1, "dark", "light")})
    skew = group_skew(groups, lab, None, dis).set_index("group")["disagree_identity"]
    assert skew["dark"] - skew["light"] > 0.12


def test_contradiction_rate_is_exact():
    t = truth_table(n_ids=250, per_id=8, seed=5)
    spec = {"contradiction": {"attributes": ["bald", "hair_long"], "rate": 0.037}}
    noisy, planted = plant_label_noise(t, spec, 5)
    lab = pd.DataFrame({a: noisy[f"label_noisy_{a}"] for a in ("bald", "hair_long")})
    rules = {"bald_vs_long_hair": {"kind": "exclusive", "attributes": ["bald", "hair_long"]}}
    _, table = evaluate_rules(lab, rules)
    got = table.set_index("rule").loc["bald_vs_long_hair"]
    assert got["violations"] == planted["planted_contradictions"] == round(0.037 * len(t))
    assert got["rate"] == planted["planted_contradictions"] / len(t)


def test_run_audit_end_to_end_on_a_table(tmp_path):
    t = truth_table(n_ids=60, per_id=6, seed=6)
    spec = {"flip_rate": dict.fromkeys(ATTRS, 0.05),
            "contradiction": {"attributes": ["bald", "hair_long"], "rate": 0.02}}
    noisy, planted = plant_label_noise(t, spec, 6)
    noisy.insert(0, "image_id", [f"img{i}" for i in range(len(noisy))])
    noisy["split"] = "test"
    x = with_features(noisy, ATTRS)
    for j in range(x.shape[1]):
        noisy[f"feat_{j}"] = x[:, j]
    noisy["label_skin_tone"] = noisy["label_dark_skin"]
    path = tmp_path / "attributes.parquet"
    noisy.to_parquet(path)
    second = noisy[["image_id"] + [f"label_{a}" for a in ATTRS]].rename(
        columns={f"label_{a}": a for a in ATTRS})
    second.to_csv(tmp_path / "second.csv", index=False)
    cfg = {"second_source": str(tmp_path / "second.csv"),
           "label_prefix": "label_noisy_", "truth_prefix": "label_", "invariant": INVARIANT,
           "rule_set": "demo", "model": {"columns": [f"feat_{j}" for j in range(x.shape[1])]},
           "predictions": {"male": "no_such_column"}}
    protected = {"gender": {"column": "label_male", "bins": [0.5], "labels": ["f", "m"]},
                 "skin": {"column": "label_skin_tone", "bins": [0.5], "labels": ["l", "d"]}}
    run_audit(path, tmp_path / "audit", cfg, protected=protected, seed=1)
    out = tmp_path / "audit"
    metrics = pd.read_csv(out / "metrics.csv")
    assert list(metrics.columns[:5]) == ["attribute", "source", "n", "prevalence", "f1"]
    assert "macro average" in set(metrics["attribute"])
    rules = pd.read_csv(out / "rules.csv").set_index("rule")
    both = ((noisy["label_noisy_bald"] == 1) & (noisy["label_noisy_hair_long"] == 1)).mean()
    assert rules.loc["bald_vs_long_hair", "rate"] == pytest.approx(both, abs=1e-6)
    rec = pd.read_csv(out / "recovery.csv").set_index("attribute")
    assert (rec["suspect_auroc"] > 0.8).all()
    kappa = pd.read_csv(out / "kappa.csv").set_index("attribute")
    for a in ATTRS:  # second source = the clean labels: Cohen's kappa ~ 1 - flips
        y = noisy[f"label_noisy_{a}"].to_numpy()
        expect = cohen_kappa_score(y, noisy[f"label_{a}"].to_numpy())
        assert kappa.loc[a, "cohen_second_source"] == pytest.approx(expect, abs=1e-4)
        assert np.isfinite(kappa.loc[a, "krippendorff_alpha"])
    assert (kappa["n_sources"] == 3).all()
    s = read_parquet(out / "suspects.parquet")
    assert len(s) == len(noisy) * len(ATTRS)
    skew = pd.read_csv(out / "group_skew.csv")
    assert set(skew["grouping"]) == {"gender", "skin", "group"}
    assert "no_such_column" in (out / "summary.md").read_text()
    assert (out / "suspects_grid.png").stat().st_size > 0


def test_config_errors_name_the_key():
    cfg = {"audit": {"rule_set": "imdb", "rules": {"r": {"kind": "maybe"}},
                     "model": {"embedding": "arc"}},
           "embed": {"models": {"lbp": {}}},
           "features": {"low": 0.9, "high": 0.1},
           "describe": {"enabled": True, "source": "audit", "drop_rate": 1.5},
           "datasets": {"demo": {"synthetic": {"label_noise": {"flip_rate": {"x": 0.9}}}}}}
    errs = "\n".join(config_errors(cfg))
    for key in ("audit.rule_set", "audit.rules.r.kind",
                "features.low/high", "describe.source", "describe.drop_rate",
                "datasets.demo.synthetic.label_noise.flip_rate.x"):
        assert key in errs, key
    assert "audit.model.embedding" not in errs  # the audit is off: its model is not used
    cfg["audit"]["enabled"] = True
    assert "audit.model.embedding: 'arc'" in "\n".join(config_errors(cfg))
    import yaml
    from conftest import REPO
    with open(REPO / "config.yaml") as fh:
        assert config_errors(yaml.safe_load(fh)) == []


def test_flags_mark_disagreement_with_the_identity_majority(tmp_path):
    t = pd.DataFrame({"image_id": [f"i{k}" for k in range(6)],
                      "identity": ["a", "a", "a", "b", "b", "b"],
                      "label_male": [1, 1, 0, 0, 0, 0.0]})
    t.to_parquet(tmp_path / "attributes.parquet")
    run_audit(tmp_path / "attributes.parquet", tmp_path / "out", {"invariant": ["male"]})
    flags = read_parquet(tmp_path / "out" / "flags.parquet")
    assert flags["identity_disagree_male"].tolist() == [False, False, True, False, False, False]
    kappa = pd.read_csv(tmp_path / "out" / "kappa.csv").set_index("attribute")
    # P = (1/3 + 1) / 2, p1 = 1/3 -> kappa = (2/3 - 5/9) / (4/9) = 0.25 < min_kappa 0.3
    assert kappa.loc["male", "fleiss_kappa"] == pytest.approx(0.25)
    assert not kappa.loc["male", "reliable"]
