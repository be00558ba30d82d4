"""Issue 51: the paired comparison of two models (facecast.compare.paired), its numbers
pinned against independent brute-force computations (weighted AUC and TAR by pair loops,
the replicates re-weighted by hand), and the options ``align`` reads from the accuracy
settings (``failed``, ``n_folds``, ``seed``, ``include_val``) each changed, so a mutant of
``make mutate MODULES=compare.paired`` that ignores one fails here."""

from __future__ import annotations

import logging
import warnings

import numpy as np
import pandas as pd
import pytest

from facecast.compare.inference import clustered_test
from facecast.compare.paired import (
    Paired,
    _metrics,
    _weighted_auc,
    _weighted_rates,
    align,
    bootstrap_differences,
    compare_pair,
    fold_correct,
    lower_is_better,
    metric_names,
    metric_target,
    read_scores,
)
from facecast.evaluate.folds import evaluation_folds
from facecast.evaluate.metrics import kfold_accuracy
from facecast.evaluate.resample import identity_weights


def frame(n_ids: int = 6, per_id: int = 3, seed: int = 0, folds: bool = False
          ) -> pd.DataFrame:
    """Every genuine pair of ``n_ids`` identities of ``per_id`` images and every impostor
    pair between consecutive identities; distinct scores."""
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n_ids):
        imgs = [f"p{i}_{k}" for k in range(per_id)]
        rows += [(imgs[a], imgs[b], str(i), str(i), 1)
                 for a in range(per_id) for b in range(a + 1, per_id)]
        j = (i + 1) % n_ids
        rows += [(f"p{i}_{a}", f"p{j}_{b}", str(i), str(j), 0)
                 for a in range(per_id) for b in range(per_id)]
    df = pd.DataFrame(rows, columns=["image_a", "image_b", "identity_a", "identity_b", "label"])
    df["score"] = np.where(df["label"] == 1, 0.5, 0.2) + rng.normal(0, 0.15, len(df))
    if folds:
        df["fold"] = (np.arange(len(df)) % 3).astype(str)
    return df


# ----------------------------------------------------------------- brute-force references

def brute_auc(s: np.ndarray, y: np.ndarray, w: np.ndarray) -> float:
    """Weighted Mann-Whitney: every genuine x impostor pair, ties one half."""
    num = den = 0.0
    for i in np.flatnonzero(y == 1):
        for j in np.flatnonzero(y == 0):
            num += w[i] * w[j] * (1.0 if s[i] > s[j] else 0.5 if s[i] == s[j] else 0.0)
            den += w[i] * w[j]
    return num / den if den else float("nan")


def brute_tar(s: np.ndarray, y: np.ndarray, w: np.ndarray, target: float) -> float:
    """Weighted TAR at the lowest threshold whose weighted FMR (impostors at or above it)
    is <= target: accept the genuine pairs strictly above the highest impostor score whose
    FMR exceeds the target (all of them from the lowest impostor on when none does)."""
    imp, gen = s[y == 0], s[y == 1]
    wi, wg = w[y == 0], w[y == 1]
    total = wi.sum()
    if total <= 0:
        return float("nan")
    over = [t for t in imp if wi[imp >= t].sum() > target * total]
    accept = gen > max(over) if over else gen >= imp.min()
    return float((wg * accept).sum() / wg.sum())


def brute_metrics(s, y, correct, w, fars, fmr) -> np.ndarray:
    ok = np.isfinite(correct)
    acc = (w[ok] * correct[ok]).sum() / w[ok].sum()
    return np.array([acc, brute_auc(s, y, w), *[brute_tar(s, y, w, f) for f in fars],
                     1.0 - brute_tar(s, y, w, fmr)])


# ------------------------------------------------------------------------ small helpers

def test_metric_names_targets_and_direction():
    """Names in order, the target read after the first '=', NaN without one; only FNMR is
    lower-is-better."""
    assert metric_names([1e-3, 0.01], 1e-4) == [
        "accuracy", "auc", "tar@far=0.001", "tar@far=0.01", "fnmr@fmr=0.0001"]
    assert metric_target("tar@far=0.001") == 0.001
    assert metric_target("fnmr@fmr=1e-05") == 1e-5
    assert np.isnan(metric_target("accuracy")) and np.isnan(metric_target("auc"))
    with pytest.raises(ValueError):
        metric_target("x=0.5=2")   # only the first '=' splits: "0.5=2" is no number
    assert lower_is_better("fnmr@fmr=0.01") and not lower_is_better("tar@far=0.01")
    assert not lower_is_better("accuracy")


def test_read_scores_names_missing_columns_and_warns_without_identities(tmp_path, caplog):
    """The frame comes back as given; missing columns are named in NEEDED's order; a file
    without identity columns is named in the warning; one with both does not warn."""
    df = frame()
    assert read_scores(df) is df
    with pytest.raises(ValueError) as err:
        read_scores(df.drop(columns=["label", "image_a"]))
    assert str(err.value).startswith("scores lacks column(s) ['image_a', 'label']; scored "
                                     "pairs need ['image_a', 'image_b', 'label', 'score']")
    path = tmp_path / "m.parquet"
    df.drop(columns=["identity_b"]).to_parquet(path)
    with caplog.at_level(logging.WARNING, logger="facecast.compare.paired"):
        back = read_scores(path)
    assert list(back.columns) == [c for c in df.columns if c != "identity_b"]
    assert len(back) == len(df)
    assert [r.getMessage() for r in caplog.records] == [
        f"{path} has no identity_a/identity_b: unless the other model's file has them, the "
        "bootstrap treats each image as its own identity (dependence between images of one "
        "person is ignored)"]
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="facecast.compare.paired"):
        read_scores(df)
    assert caplog.text == ""
    with pytest.raises(ValueError, match=str(path)):
        df.drop(columns=["score"]).to_parquet(path)
        read_scores(path)


# ---------------------------------------------------------------------------------- align

def test_align_orients_by_a_and_matches_on_the_unordered_pair_and_label():
    """A's pairs in A's order and orientation; B's file swapped and shuffled, with one
    duplicate, one pair A lacks, one label that is neither 0 nor 1 and a label that differs
    from A's; identities follow A's orientation."""
    a = frame(folds=True)
    b = a.rename(columns={"image_a": "image_b", "image_b": "image_a",
                          "identity_a": "identity_b", "identity_b": "identity_a"})
    b = b.assign(score=a["score"] - 0.1).iloc[::-1]
    b = pd.concat([b, b.iloc[[0]].assign(score=9.0),      # duplicate: the first one counts
                   pd.DataFrame({"image_a": ["zz"], "image_b": ["yy"], "identity_a": ["0"],
                                 "identity_b": ["1"], "label": [0], "score": [0.3]})])
    a.loc[0, "label"] = 2                                   # not a comparison: left out
    b.loc[b["image_b"].eq(a.loc[1, "image_a"]) & b["image_a"].eq(a.loc[1, "image_b"]),
          "label"] = 1 - a.loc[1, "label"]                  # label differs: no partner
    p = align(a, b)
    keep = a.index >= 2
    np.testing.assert_array_equal(p.label, a.loc[keep, "label"].to_numpy())
    assert p.label.dtype.kind == "i"
    np.testing.assert_array_equal(p.score_a, a.loc[keep, "score"].to_numpy())
    np.testing.assert_allclose(p.score_b, a.loc[keep, "score"].to_numpy() - 0.1)
    np.testing.assert_array_equal(p.fold, a.loc[keep, "fold"].to_numpy())
    np.testing.assert_array_equal(p.identity_a, a.loc[keep, "identity_a"].to_numpy())
    np.testing.assert_array_equal(p.identity_b, a.loc[keep, "identity_b"].to_numpy())
    assert not p.failed_a.any() and not p.failed_b.any()
    assert p.failed_a.dtype == bool and p.failed_b.dtype == bool


def test_align_identities_from_b_when_a_has_none_oriented_as_a():
    """A without identities, B's pairs swapped: B's identities, in A's orientation."""
    base = frame()
    a = base.drop(columns=["identity_a", "identity_b"])
    b = base.rename(columns={"image_a": "image_b", "image_b": "image_a",
                             "identity_a": "identity_b", "identity_b": "identity_a"})
    p = align(a, b)
    np.testing.assert_array_equal(p.identity_a, base["identity_a"].to_numpy())
    np.testing.assert_array_equal(p.identity_b, base["identity_b"].to_numpy())
    q = align(a, a)   # neither: each image its own identity
    np.testing.assert_array_equal(q.identity_a, base["image_a"].to_numpy())
    np.testing.assert_array_equal(q.identity_b, base["image_b"].to_numpy())
    assert q.n_identities == 18


def test_align_logs_pairs_without_partner(caplog):
    """The warning counts A's and B's unmatched pairs and the common ones."""
    a = frame(folds=True)
    b = a.iloc[3:].copy()
    with caplog.at_level(logging.WARNING, logger="facecast.compare.paired"):
        align(a, b)
    n = len(a)
    assert (f"3 of {n} pairs of A and 0 of {n - 3} of B have no partner in the other "
            f"file; compared on the {n - 3} common pairs") in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="facecast.compare.paired"):
        align(b, a)
    assert f"0 of {n - 3} pairs of A and 3 of {n} of B" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="facecast.compare.paired"):
        align(a, a)
    assert caplog.text == ""


def test_align_failure_rule_nonmatch_keeps_failed_pairs_at_minus_inf_drop_leaves_them():
    """A failed pair (status not ok, or no score): under the default ``nonmatch`` it stays,
    at -inf for the model that failed it; under ``drop`` it leaves when either failed. A
    score of +inf is no comparison; a NaN score is a failure."""
    a = frame(folds=True).assign(status="ok")
    b = a.copy()
    a.loc[[2, 5], "status"] = "no_face"
    b.loc[7, "score"] = np.nan
    b.loc[9, "score"] = np.inf
    n = len(a)
    p = align(a, b)
    keep = np.arange(n) != 9
    assert len(p.label) == n - 1
    np.testing.assert_array_equal(np.flatnonzero(np.isneginf(p.score_a)), [2, 5])
    np.testing.assert_array_equal(np.flatnonzero(np.isneginf(p.score_b)), [7])
    np.testing.assert_array_equal(np.flatnonzero(p.failed_a), [2, 5])
    np.testing.assert_array_equal(np.flatnonzero(p.failed_b), [7])
    np.testing.assert_array_equal(p.fold, a["fold"].to_numpy()[keep])
    assert align(a, b, {"failed": "nonmatch"}).score_a.tolist() == p.score_a.tolist()
    d = align(a, b, {"failed": "drop"})
    kept = ~np.isin(np.arange(n), [2, 5, 7, 9])
    np.testing.assert_array_equal(d.score_a, a["score"].to_numpy()[kept])
    np.testing.assert_array_equal(d.score_b, b["score"].to_numpy()[kept])
    assert not d.failed_a.any() and not d.failed_b.any()
    with pytest.raises(ValueError, match="evaluate.failed"):
        align(a, b, {"failed": "ignore"})


def test_align_reads_integer_scores_and_text_in_number_columns():
    """Integer scores with a failed pair (the -inf / NaN of the rule must fit: float64), a
    score and a label that are text (coerced: a failure, and no comparison)."""
    a = frame(folds=True).assign(status="ok")
    a["score"] = (a["label"] * 2 - 1).astype(np.int64)
    a.loc[3, "status"] = "no_face"
    for rule, n in (("nonmatch", len(a)), ("drop", len(a) - 1)):
        p = align(a, a, {"failed": rule})
        assert len(p.label) == n and p.score_a.dtype == np.float64
    assert np.isneginf(align(a, a).score_a[3])
    t = frame(folds=True)
    t = t.assign(score=t["score"].astype(object), label=t["label"].astype(object))
    t.loc[4, "score"] = "n/a"
    t.loc[6, "label"] = "bad"
    p = align(t, t)
    assert len(p.label) == len(t) - 1 and np.isneginf(p.score_a[4])
    assert p.failed_a.tolist() == [i == 4 for i in range(len(t)) if i != 6]


def test_align_folds_follow_n_folds_seed_and_include_val():
    """Without the protocol's folds the pairs are dealt by the accuracy settings' n_folds
    and seed (defaults 10 and 0); held-out pairs are left out unless include_val."""
    a = frame(n_ids=8)
    for acc, kw in (({}, {}), ({"n_folds": 3}, {"n_folds": 3}),
                    ({"seed": 5}, {"seed": 5}), ({"n_folds": "4", "seed": "2"},
                                                 {"n_folds": 4, "seed": 2})):
        want = evaluation_folds(a, **kw)[0]
        np.testing.assert_array_equal(align(a, a, acc).fold, want)
    assert sorted(set(align(a, a, {"n_folds": 3}).fold)) == ["0", "1", "2"]
    assert sorted(set(align(a, a).fold), key=int) == [str(k) for k in range(10)]
    assert (align(a, a, {"seed": 5}).fold != align(a, a).fold).any()
    v = a.assign(fold=np.where(np.arange(len(a)) % 4 == 0, "val", "x"))
    assert len(align(v, v).label) == int((np.arange(len(a)) % 4 != 0).sum())
    assert len(align(v, v, {"include_val": True}).label) == len(a)
    assert len(align(v, v, {"include_val": False}).label) < len(a)
    np.testing.assert_array_equal(align(v, v, {"include_val": True, "n_folds": 3}).fold,
                                  evaluation_folds(v, n_folds=3, include_val=True)[0])


# --------------------------------------------------------------- weighted AUC and rates

def test_weighted_auc_and_rates_match_pair_loops_with_ties_and_zero_weights():
    """Per weight row (integer draws, zeros included, scores on a coarse grid so genuine and
    impostor scores tie): the AUC and the TAR at several FMRs of the brute-force loops."""
    rng = np.random.default_rng(3)
    s = np.round(rng.uniform(0, 1, 40), 1)
    y = np.r_[1, 0, rng.integers(0, 2, 38)]
    imp = np.flatnonzero(y == 0)
    s[imp] = np.linspace(0.05, 0.95, imp.size)     # distinct impostor scores
    s[imp[3]] = 0.3                                 # one ties with genuine scores
    w = rng.integers(0, 4, (6, 40)).astype(float)
    w[0] = 1.0
    targets = [0.0, 0.05, 0.1, 0.3, 0.5]
    auc = _weighted_auc(s, y, w)
    rates = _weighted_rates(s, y, w, targets)
    assert auc.shape == (6,) and rates.shape == (6, 5)
    for r in range(6):
        assert auc[r] == pytest.approx(brute_auc(s, y, w[r]), abs=1e-12)
        for j, t in enumerate(targets):
            assert rates[r, j] == pytest.approx(brute_tar(s, y, w[r], t), abs=1e-12), (r, t)


def test_weighted_rates_without_impostor_weight_are_nan():
    """A row whose impostors all weigh 0 (or no impostors at all) gives NaN rates."""
    s = np.array([0.9, 0.8, 0.2, 0.1])
    y = np.array([1, 1, 0, 0])
    w = np.array([[1.0, 1.0, 0.0, 0.0], [1.0, 2.0, 1.0, 0.0]])
    out = _weighted_rates(s, y, w, [0.1, 1.0])
    assert np.isnan(out[0]).all()
    assert out[1].tolist() == [1.0, 1.0]
    assert np.isnan(_weighted_rates(s[:2], y[:2], w[:, :2], [0.1])).all()
    # only the lowest impostor weighs: a target of 0.5 lets none through, TAR over 0.1
    # is both genuine pairs; one impostor pair alone works the same
    assert _weighted_rates(s, y, np.array([[1.0, 1.0, 0.0, 2.0]]), [0.5]).tolist() == [[1.0]]
    assert _weighted_rates(s[:3], y[:3], np.ones((1, 3)), [0.5]).tolist() == [[1.0]]
    assert _weighted_rates(np.array([0.9, 0.5, 0.6]), np.array([1, 1, 0]), np.ones((1, 3)),
                           [0.5]).tolist() == [[0.5]]


def test_weighted_rates_with_fractional_weights():
    """Weights need not be counts: genuine weights 0.25 and 0.5 (sum below 1) give the
    weighted share 0.25 / 0.75 of the genuine pair above the threshold."""
    s = np.array([0.9, 0.3, 0.5, 0.1])
    y = np.array([1, 1, 0, 0])
    w = np.array([[0.25, 0.5, 0.1, 0.1]])
    assert _weighted_rates(s, y, w, [0.4])[0, 0] == pytest.approx(1 / 3)
    assert brute_tar(s, y, w[0], 0.4) == pytest.approx(1 / 3)


def test_weighted_auc_and_metrics_of_a_row_without_weight_are_nan_silently():
    """A replicate that draws no genuine (or no impostor) pair: AUC and accuracy NaN
    without a RuntimeWarning (0 / 0 is expected there)."""
    s = np.array([0.9, 0.3, 0.5, 0.1])
    y = np.array([1, 1, 0, 0])
    w = np.array([[0.0, 0.0, 1.0, 2.0], [1.0, 1.0, 0.0, 0.0], [1.0, 0.0, 0.0, 1.0]])
    p = Paired(y, s, s, np.array(["0", "1", "0", "1"]), np.array(["a", "b", "c", "d"]),
               np.array(["a", "b", "c", "d"]))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        auc = _weighted_auc(s, y, w)
        m = _metrics(p, s, np.array([1.0, 0.0, 1.0, np.nan]), np.zeros((1, 4)), [0.5], 0.5)
    assert np.isnan(auc[:2]).all() and auc[2] == 1.0
    assert np.isnan(m).all()


def test_weighted_rate_all_impostors_allowed_accepts_from_the_lowest_impostor():
    """A target of 1 allows every impostor: the threshold is the lowest impostor score,
    so a genuine pair below it is rejected (TAR 2/3, weighted 3/4)."""
    s = np.array([0.9, 0.5, 0.05, 0.4, 0.1])
    y = np.array([1, 1, 1, 0, 0])
    w = np.array([[1.0, 1.0, 1.0, 1.0, 1.0], [2.0, 1.0, 1.0, 1.0, 1.0]])
    out = _weighted_rates(s, y, w, [1.0, 0.5])
    assert out[:, 0].tolist() == pytest.approx([2 / 3, 3 / 4])
    assert out[:, 1].tolist() == pytest.approx([2 / 3, 3 / 4])   # above 0.1: 0.9, 0.5


# ------------------------------------------------------------------------ fold decisions

def test_fold_correct_uses_the_grid_and_marks_pairs_outside_the_test():
    """Per pair: kfold_accuracy's decision with the given grid; NaN outside the test
    (fold ""), and all NaN with one fold or one label."""
    s = np.array([0.61, 0.59, 0.605, 0.595, 0.7, 0.4, 0.615, 0.585])
    y = np.array([1, 0, 1, 0, 1, 0, 0, 1])
    f = np.array(["0", "0", "1", "1", "0", "1", "", "1"])
    keep = f != ""
    for grid in ("insightface", "exact"):
        acc = kfold_accuracy(s[keep], y[keep], f[keep], grid)
        want = acc.correct(s[keep], y[keep], f[keep]).astype(float)
        out = fold_correct(s, y, f, grid)
        np.testing.assert_array_equal(out[keep], want)
        assert np.isnan(out[~keep]).all()
    np.testing.assert_array_equal(fold_correct(s, y, f), fold_correct(s, y, f, "insightface"))
    assert np.isnan(fold_correct(s, y, np.full(8, "0"))).all()
    assert np.isnan(fold_correct(s, np.ones(8, int), f)).all()
    # a fold holds one label only in one place: still two labels over the test
    assert np.isfinite(fold_correct(s, y, np.r_[["0"] * 4, ["1"] * 4])).all()


def _grid_sensitive() -> Paired:
    """Pairs whose 10-fold accuracy differs between the insightface grid and the exact one
    (scores 0.001 apart, below the grid's step)."""
    rng = np.random.default_rng(11)
    n = 60
    y = np.r_[np.ones(n // 2, int), np.zeros(n // 2, int)]
    sa = np.where(y == 1, 0.6005, 0.6) + rng.normal(0, 0.0004, n)
    sb = np.where(y == 1, 0.6004, 0.6) + rng.normal(0, 0.0006, n)
    ids = (np.arange(n) % 10).astype(str)
    return Paired(y, sa, sb, (np.arange(n) % 5).astype(str), ids, ids)


def test_grid_sensitive_pairs_are_grid_sensitive():
    p = _grid_sensitive()
    assert (kfold_accuracy(p.score_a, p.label, p.fold, "exact").mean
            != kfold_accuracy(p.score_a, p.label, p.fold, "insightface").mean)


# -------------------------------------------------------------------- the bootstrap itself

def _paired(seed: int = 0) -> Paired:
    a = frame(n_ids=6, seed=seed, folds=True)
    b = a.assign(score=a["score"] + np.random.default_rng(seed + 1).normal(0, 0.2, len(a)))
    return align(a, b)


@pytest.mark.parametrize("grid", ["insightface", "exact"])
def test_bootstrap_differences_are_the_metrics_reweighted_by_hand(grid):
    """A and B: the 10-fold mean, the AUC, TAR per FAR and FNMR of the loops (unit weights);
    each replicate: the same loops at that replicate's identity weights (the generator of
    ``seed``, drawn one replicate at a time), A minus B."""
    p = _paired()
    fars, fmr = [0.05, 0.2], 0.1
    ma, mb, d = bootstrap_differences(p, fars=fars, fmr=fmr, n_boot=20, seed=4,
                                      thresholds=grid)
    ca, cb = (fold_correct(s, p.label, p.fold, grid) for s in (p.score_a, p.score_b))
    ones = np.ones(len(p.label))
    for m, s, c in ((ma, p.score_a, ca), (mb, p.score_b, cb)):
        want = brute_metrics(s, p.label, c, ones, fars, fmr)
        want[0] = kfold_accuracy(s, p.label, p.fold, grid).mean
        np.testing.assert_allclose(m, want, rtol=0, atol=1e-12)
    weights = np.vstack(list(identity_weights(p.identity_a, p.identity_b, 20,
                                              np.random.default_rng(4), chunk=1)))
    assert d.shape == (20, 5)
    for r in range(20):
        want = (brute_metrics(p.score_a, p.label, ca, weights[r], fars, fmr)
                - brute_metrics(p.score_b, p.label, cb, weights[r], fars, fmr))
        np.testing.assert_allclose(d[r], want, rtol=0, atol=1e-12, err_msg=str(r))


def test_bootstrap_accuracy_follows_the_threshold_grid():
    """The point accuracy and the replicates' decisions use the grid passed in."""
    p = _grid_sensitive()
    for grid in ("insightface", "exact"):
        ma, mb, d = bootstrap_differences(p, fars=[], fmr=0.1, n_boot=5, seed=0,
                                          thresholds=grid)
        assert ma[0] == kfold_accuracy(p.score_a, p.label, p.fold, grid).mean
        assert mb[0] == kfold_accuracy(p.score_b, p.label, p.fold, grid).mean
    d_if = bootstrap_differences(p, fars=[], fmr=0.1, n_boot=5, seed=0)[2]
    d_ex = bootstrap_differences(p, fars=[], fmr=0.1, n_boot=5, seed=0, thresholds="exact")[2]
    assert not np.allclose(d_if[:, 0], d_ex[:, 0])
    w = np.vstack(list(identity_weights(p.identity_a, p.identity_b, 5,
                                        np.random.default_rng(0), chunk=1)))
    for grid, d in (("insightface", d_if), ("exact", d_ex)):
        ca = fold_correct(p.score_a, p.label, p.fold, grid)
        cb = fold_correct(p.score_b, p.label, p.fold, grid)
        np.testing.assert_allclose(d[:, 0], (w @ ca - w @ cb) / w.sum(1), rtol=0, atol=1e-12)
    # compare_pair passes the grid on: its accuracy row is the grid's
    for grid in ("insightface", "exact"):
        row = compare_pair(p, fars=[], fmr=0.1, n_boot=3, seed=0, thresholds=grid)[0].iloc[0]
        assert row["value_a"] == kfold_accuracy(p.score_a, p.label, p.fold, grid).mean
    np.testing.assert_array_equal(
        d_if, bootstrap_differences(p, fars=[], fmr=0.1, n_boot=5, seed=0,
                                    thresholds="insightface")[2])


def test_bootstrap_point_accuracy_is_the_fold_mean_not_the_pooled_share():
    """Folds of unequal size: the 10-fold mean differs from the pooled share of correct
    decisions; the point value is the mean, and without two folds or two labels it stays
    the pooled share (NaN here: no fold decisions)."""
    p = _paired()
    keep = np.arange(len(p.label)) % 7 != 0
    q = Paired(p.label, p.score_a, p.score_b,
               np.where(keep, p.fold, np.where(p.label == 1, "0", "1")), p.identity_a,
               p.identity_b)
    q.fold[:5] = ""
    ma, mb, _ = bootstrap_differences(q, fars=[], fmr=0.1, n_boot=2, seed=0)
    inside = q.fold != ""
    acc = kfold_accuracy(q.score_a[inside], q.label[inside], q.fold[inside])
    assert ma[0] == acc.mean
    pooled = np.nanmean(fold_correct(q.score_a, q.label, q.fold))
    assert ma[0] != pytest.approx(pooled)
    one = Paired(p.label, p.score_a, p.score_b, np.full(len(p.label), "0"), p.identity_a,
                 p.identity_b)
    assert np.isnan(bootstrap_differences(one, fars=[], fmr=0.1, n_boot=2, seed=0)[0][0])
    # two folds of unequal size (a third and two thirds): the mean of the two, too
    two = Paired(p.label, p.score_a, p.score_b,
                 np.where(np.arange(len(p.label)) % 3 == 0, "0", "1"), p.identity_a,
                 p.identity_b)
    acc = kfold_accuracy(two.score_a, two.label, two.fold)
    ma = bootstrap_differences(two, fars=[], fmr=0.1, n_boot=2, seed=0)[0]
    assert ma[0] == acc.mean
    assert acc.mean != pytest.approx(np.mean(fold_correct(two.score_a, two.label, two.fold)))


def test_bootstrap_seed_and_no_replicates():
    """Another seed draws other replicates, the same seed the same; n_boot 0: an empty
    (0, metrics) array."""
    p = _paired()
    d1 = bootstrap_differences(p, fars=[0.1], fmr=0.1, n_boot=4, seed=1)[2]
    d2 = bootstrap_differences(p, fars=[0.1], fmr=0.1, n_boot=4, seed=2)[2]
    assert not np.allclose(d1, d2)
    np.testing.assert_array_equal(
        d1, bootstrap_differences(p, fars=[0.1], fmr=0.1, n_boot=4, seed=1)[2])
    ma, mb, d0 = bootstrap_differences(p, fars=[0.1], fmr=0.1, n_boot=0, seed=1)
    assert d0.shape == (0, 4) and d0.dtype == np.float64 and len(ma) == len(mb) == 4


# ------------------------------------------------------------------------ compare_pair

def test_compare_pair_rows_are_the_clustered_tests_of_the_replicates():
    """Per metric: values, difference, and the clustered test at the given confidence of
    that metric's replicates (same seed, n_boot, grid); counts of pairs, impostors,
    identities and failures."""
    p = _paired()
    p.failed_a = np.zeros(len(p.label), bool)
    p.failed_a[[1, 4, 6]] = True
    p.failed_b = np.zeros(len(p.label), bool)
    p.failed_b[2] = True
    fars, fmr = [0.05, 0.001], 0.1
    table, counts = compare_pair(p, fars=fars, fmr=fmr, n_boot=30, seed=3, confidence=0.8,
                                 thresholds="exact")
    ma, mb, d = bootstrap_differences(p, fars=fars, fmr=fmr, n_boot=30, seed=3,
                                      thresholds="exact")
    n_imp = int((p.label == 0).sum())
    assert counts == {"n_pairs": len(p.label), "n_impostors": n_imp, "n_identities": 6,
                      "n_failed_a": 3, "n_failed_b": 1}
    assert table["metric"].tolist() == metric_names(fars, fmr)
    np.testing.assert_array_equal(table["value_a"], ma)
    np.testing.assert_array_equal(table["value_b"], mb)
    np.testing.assert_array_equal(table["difference"], ma - mb)
    assert n_imp < 1000        # 0.001 cannot be resolved: no test there
    for j, row in table.iterrows():
        want = clustered_test(ma[j] - mb[j], d[:, j], 6, 0.8)
        if row["metric"] == "tar@far=0.001":
            assert row["note"] == f"n/a ({n_imp} impostors)"
            assert np.isnan([row["p"], row["ci_lo"], row["ci_hi"]]).all()
            assert not row["fmr_resolvable"]
            continue
        assert row["note"] == want["note"] == ""
        assert row["ci_lo"] == want["ci_lo"] and row["ci_hi"] == want["ci_hi"]
        assert row["p"] == want["p"] and row["n_boot"] == want["n_boot"] == 30
        assert row["test"] == want["test"]
    assert str(table["fmr_resolvable"].dtype) == "boolean"
    assert table["fmr_resolvable"].isna().tolist() == [True, True, False, False, False]
    assert table["fmr_resolvable"].tolist()[2:] == [True, False, True]
    # the default confidence is 0.95: a wider interval
    wide = compare_pair(p, fars=fars, fmr=fmr, n_boot=30, seed=3, thresholds="exact")[0]
    assert wide.loc[1, "ci_hi"] - wide.loc[1, "ci_lo"] > table.loc[1, "ci_hi"] - table.loc[
        1, "ci_lo"]
    assert wide.loc[1, "ci_lo"] == clustered_test(ma[1] - mb[1], d[:, 1], 6, 0.95)["ci_lo"]
    # the default grid is insightface's
    grid = compare_pair(p, fars=fars, fmr=fmr, n_boot=30, seed=3)[0]
    ins = bootstrap_differences(p, fars=fars, fmr=fmr, n_boot=30, seed=3)
    assert grid.loc[0, "value_a"] == ins[0][0]
    assert grid.loc[0, "ci_lo"] == clustered_test(ins[0][0] - ins[1][0], ins[2][:, 0], 6)[
        "ci_lo"]


def test_compare_pair_without_failure_arrays_counts_none():
    p = _paired()
    p.failed_a = p.failed_b = None
    counts = compare_pair(p, fars=[], fmr=0.1, n_boot=3, seed=0)[1]
    assert counts["n_failed_a"] == 0 and counts["n_failed_b"] == 0
    assert counts["n_pairs"] == len(p.label)
