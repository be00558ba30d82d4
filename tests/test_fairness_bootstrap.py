"""Identity-clustered bootstrap: weights, unit-weight consistency, coverage, shrinkage."""

import numpy as np
import pandas as pd
import pytest

from facecast.evaluate.resample import identity_weights
from facecast.fairness.bias import fairface_bias
from facecast.fairness.bootstrap import bootstrap, weighted_thresholds
from facecast.fairness.groups import annotate_pairs, image_labels, parse_specs
from facecast.fairness.simulate import simulate
from facecast.fairness.threshold import thresholds_at_fmr

PROTECTED = parse_specs({
    "gender": {"column": "label_male", "bins": [0.5], "labels": ["female", "male"]},
    "skin": {"column": "label_skin_tone", "bins": [0.5], "labels": ["light", "dark"]}})
LEGIT = parse_specs({"glasses": {"column": "label_glasses", "bins": [0.5]},
                     "pose": {"column": "label_yaw", "abs": True, "bins": [15]}})
KW = dict(targets=[1e-2], alpha=0.5, min_pairs=3, min_groups=2)


def _annotated(n_ids, seed=0, legit=LEGIT):
    attrs, pairs = simulate(n_ids, 5, seed=seed)
    lab = image_labels(attrs, PROTECTED, legit)
    return annotate_pairs(pairs, lab, PROTECTED, legit)


def test_identity_weights_resample_identities():
    ida = np.array(["a", "b", "c", "a", "b", "a"])
    idb = np.array(["a", "b", "c", "b", "c", "c"])
    (w,) = list(identity_weights(ida, idb, 6, np.random.default_rng(0), chunk=8))
    assert w.shape == (6, 6)
    counts = w[:, :3]  # genuine pairs carry their identity's count
    assert (counts.sum(axis=1) == 3).all()  # 3 identities drawn with replacement
    np.testing.assert_array_equal(w[:, 3], counts[:, 0] * counts[:, 1])
    np.testing.assert_array_equal(w[:, 4], counts[:, 1] * counts[:, 2])
    np.testing.assert_array_equal(w[:, 5], counts[:, 0] * counts[:, 2])
    assert len(np.unique(counts, axis=0)) > 1


def test_weighted_thresholds_match_unweighted():
    rng = np.random.default_rng(1)
    scores = np.round(rng.normal(size=500), 2)
    labels = rng.integers(0, 2, 500)
    targets = [0.1, 0.01, 0.001]
    got = weighted_thresholds(scores, labels, np.ones((1, 500)), targets)[0]
    np.testing.assert_allclose(got, thresholds_at_fmr(scores[labels == 0], targets))


def test_point_estimate_equals_unweighted_metrics():
    ann = _annotated(40)
    reps, summ = bootstrap(ann, n_boot=4, seed=1, **KW)
    s = summ.set_index("metric")["estimate"]
    r = fairface_bias(ann["score"], ann["label"], ann["group"], ann["combo"],
                      ann["in_cells"], ann["in_reference"], min_pairs=3, min_groups=2)
    assert s["bias_pos"] == pytest.approx(r.bias_pos)
    assert s["bias_neg"] == pytest.approx(r.bias_neg)
    assert s["accuracy"] == pytest.approx(r.accuracy)
    imp = ann.loc[ann["label"] == 0, "score"].to_numpy()
    t = thresholds_at_fmr(imp, [1e-2])[0]
    assert s["threshold@fmr=0.01"] == pytest.approx(t)
    gen = ann.loc[ann["label"] == 1, "score"].to_numpy()
    assert s["tar@fmr=0.01"] == pytest.approx((gen >= t).mean())
    assert len(reps) == 4 and set(summ["metric"]) >= {"fdr@fmr=0.01", "garbe@fmr=0.01"}


def test_intervals_cover_estimate_and_shrink_with_more_identities():
    widths = {}
    pose_only = LEGIT[1:]  # 3 combinations, all populated at both sizes: same statistic
    for n_ids in (40, 320):
        _, summ = bootstrap(_annotated(n_ids, seed=2, legit=pose_only), n_boot=40, seed=3,
                            **KW)
        summ = summ.set_index("metric")
        for m in ("accuracy", "tar@fmr=0.01", "bias_pos"):
            assert summ.loc[m, "lo"] <= summ.loc[m, "estimate"] <= summ.loc[m, "hi"], (n_ids, m)
        widths[n_ids] = (summ["hi"] - summ["lo"])[["accuracy", "tar@fmr=0.01", "bias_pos"]]
    assert (widths[320] < widths[40]).all(), widths


def test_same_seed_same_replicates():
    ann = _annotated(30)
    a, _ = bootstrap(ann, n_boot=5, seed=7, **KW)
    b, _ = bootstrap(ann, n_boot=5, seed=7, **KW)
    c, _ = bootstrap(ann, n_boot=5, seed=8, **KW)
    pd.testing.assert_frame_equal(a, b)
    assert not a.equals(c)


def test_fixed_thresholds_stay_fixed():
    ann = _annotated(30)
    reps, _ = bootstrap(ann, n_boot=3, seed=1, targets=[], fixed_thresholds=[0.3], alpha=0.5)
    assert (reps["threshold@t=0.3"] == 0.3).all()
