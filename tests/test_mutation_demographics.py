"""Issue 51: `facecast.fairness.demographics` (rule ``demographics``) pinned - the global
thresholds counted by hand, the counts of pairs and failures, the intended FMRs, every
setting reaching the table it feeds (each table recomputed here by the function the
stage calls, on the same pairs), the tables' page text, the log, and what the two band
figures draw. Each test runs the code itself (mutmut credits a function only to the
tests during which it ran), so a mutant of `make mutate MODULES=fairness.demographics`
fails here. Pairs from tests/test_demographics.py's BFW-like protocol."""

from __future__ import annotations

import logging

import numpy as np
import pandas as pd
import pytest
from matplotlib.colors import to_rgb
from scipy.special import ndtri
from test_demographics import SUB, _bfw_like, _write_bfw_like

from facecast.evaluate.bands import group_rate_band_table, roc_band_table
from facecast.fairness import demographics as demo
from facecast.fairness.cross_matrix import cross_matrices
from facecast.fairness.demographics import (
    annotated_pairs,
    demographics_targets,
    global_thresholds,
    plot_rate_bands,
    plot_roc_bands,
    run_demographics,
)
from facecast.fairness.group_thresholds import group_threshold_table
from facecast.io.parquet_io import read_provenance

IMP = np.array([0.1, 0.2, 0.3, 0.4, 0.5])


def test_global_thresholds_by_hand():
    """Five impostors 0.1..0.5 (and two genuines, never fitted on): at FMR 0.2, k = 1
    false match: just above 0.4; at 0.5, k = 2: just above 0.3 (text '0.3'); at 0.1 k = 0
    (just above 0.5), but 5 impostors cannot resolve 1/10: n/a. Accept iff score >= t."""
    s = np.r_[IMP, [0.9, 0.35]]
    y = np.r_[np.zeros(5, bool), [True, True]]
    t = global_thresholds(s, y, [0.2, 0.5, 0.1])
    assert t.columns.tolist() == ["name", "target_fmr", "global_pairs", "threshold",
                                  "n_impostor", "false_matches", "resolvable", "text"]
    assert t["name"].tolist() == ["fmr=0.2", "fmr=0.5", "fmr=0.1"]
    assert t["target_fmr"].tolist() == [0.2, 0.5, 0.1]
    assert t["global_pairs"].tolist() == ["all"] * 3
    assert t["threshold"].tolist() == [np.nextafter(0.4, 1), np.nextafter(0.3, 1),
                                       np.nextafter(0.5, 1)]
    assert t["n_impostor"].tolist() == [5, 5, 5]
    assert t["false_matches"].tolist() == [1, 2, 0]
    assert t["resolvable"].tolist() == [True, True, False]
    assert t["text"].tolist() == ["0.4", "0.3", "n/a (5 impostors)"]
    assert global_thresholds(s, y, [0.4])["false_matches"].iat[0] == 2


def test_global_thresholds_on_the_fit_mask_and_without_impostors():
    """``fit`` keeps the impostors 0.1..0.4 (0.5 and a genuine left out): four impostors,
    FMR 0.25 -> k = 1: just above 0.3; the rule's name is carried. No impostor at all:
    false matches 0, n/a (0 impostors)."""
    s = np.r_[IMP, [0.9]]
    y = np.r_[np.zeros(5, bool), [True]]
    fit = [1, 1, 1, 1, 0, 0]            # 0/1 as a mask, not as indices
    t = global_thresholds(s, y, [0.25], fit, "same_group")
    assert (t["n_impostor"].iat[0], t["threshold"].iat[0]) == (4, np.nextafter(0.3, 1))
    assert t["false_matches"].iat[0] == 1 and t["global_pairs"].iat[0] == "same_group"
    assert t["text"].iat[0] == "0.3" and bool(t["resolvable"].iat[0])
    none = global_thresholds(np.array([0.9, 0.8]), np.array([True, True]), [0.1])
    assert none["n_impostor"].iat[0] == 0 and none["false_matches"].iat[0] == 0
    assert not none["resolvable"].iat[0] and none["text"].iat[0] == "n/a (0 impostors)"


def test_intended_fmrs_come_from_demographics_then_fairness_then_the_default():
    assert demographics_targets({"fmr_targets": ["0.1", 1]}, {}) == [0.1, 1.0]
    fair = {"thresholds": {"fmr_targets": [0.01]}}
    assert demographics_targets({"fmr_targets": [0.2]}, fair) == [0.2]
    assert demographics_targets({}, fair) == [0.01]
    assert demographics_targets({"fmr_targets": []}, {"thresholds": None}) == [1e-3, 1e-4]
    assert demographics_targets({}, {}) == [1e-3, 1e-4]


def test_annotated_pairs_counts_before_either_rule(tmp_path, caplog):
    """The BFW-like protocol (20 pairs) and two pairs without a feature (an X genuine, a Y
    impostor). Counted: 22 pairs, 2 failed; per group X 5 + 2 + 1 = 8 pairs, Y 5 + 3 + 1
    = 9 (the 5 across groups belong to none), one failure each. ``nonmatch`` keeps the
    failures at -inf; ``drop`` leaves them out; ``exclude`` drops the 5 mixed pairs."""
    root = _write_bfw_like(tmp_path, failures=True)
    # and two X pairs counted nowhere: a label of 2 (bad_label), one outside evaluate's
    # test (eval_fold "": held_out)
    pairs = pd.read_parquet(root / "pairs.parquet")
    extra = pairs.iloc[[15, 16]].assign(label=[2, 1], image_a=["X98/1", "X99/1"],
                                        image_b=["X98/2", "X99/2"])
    pairs = pd.concat([pairs, extra], ignore_index=True)
    pairs["eval_fold"] = ["1"] * 23 + [""]
    pairs.to_parquet(root / "pairs.parquet")
    attrs = pd.read_parquet(root / "attributes.parquet")
    new = pd.DataFrame({"image_id": ["X98/1", "X98/2", "X99/1", "X99/2"],
                        "identity": ["X98"] * 2 + ["X99"] * 2, "label_sub": ["X"] * 4})
    pd.concat([attrs, new], ignore_index=True).to_parquet(root / "attributes.parquet")
    want = {"n_pairs": 22, "n_failed": 2, "group_pairs": {"Y": 9, "X": 8},
            "group_failed": {"X": 1, "Y": 1}, "n_mixed_excluded": 0}
    with caplog.at_level(logging.INFO, logger="facecast.fairness.demographics"):
        ann, counts = annotated_pairs(root / "pairs.parquet", root / "attributes.parquet", SUB,
                                      "nonmatch")
    assert counts == want and list(counts["group_pairs"]) == ["Y", "X"]
    assert len(ann) == 22 and ann["failed"].sum() == 2
    assert np.isneginf(ann.loc[ann["failed"], "score"]).all()
    assert ann.index.tolist() == list(range(22))
    assert caplog.records[-1].getMessage() == (
        "24 pairs, statuses {'ok': 17, 'mixed': 5, 'bad_label': 1, 'held_out': 1}")
    ann, counts = annotated_pairs(root / "pairs.parquet", root / "attributes.parquet", SUB,
                                  "drop")
    assert counts == want and len(ann) == 20 and not ann["failed"].any()
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="facecast.fairness.demographics"):
        ann, counts = annotated_pairs(root / "pairs.parquet", root / "attributes.parquet",
                                      {**SUB, "mixed_pairs": "exclude"}, "nonmatch")
    assert counts == {**want, "n_mixed_excluded": 5}
    assert len(ann) == 17 and ann.index.tolist() == list(range(17))
    assert "index" not in ann.columns
    assert (ann["status"] != "mixed").all()
    assert caplog.records[-1].getMessage() == (
        "fairness.mixed_pairs: exclude - 5 pairs across groups left out of the thresholds, "
        "matrices and bands")
    with pytest.raises(ValueError, match="evaluate.failed"):
        annotated_pairs(root / "pairs.parquet", root / "attributes.parquet", SUB, "skip")


def _with_folds(root):
    """The protocol with a ``fold`` column (pairs alternate between folds "f1" and
    "f2")."""
    pairs = pd.read_parquet(root / "pairs.parquet")
    pairs["fold"] = np.where(np.arange(len(pairs)) % 2 == 0, "f1", "f2")
    pairs.to_parquet(root / "pairs.parquet")
    return root


CFG = {"n_boot": 7, "band_points": 6, "band_min_far": 0.05, "fmr_targets": [0.2, 0.05],
       "global_pairs": "same_group", "failed": "nonmatch"}
FAIR = {**SUB, "confidence": 0.9, "interval": "clopper-pearson"}


@pytest.fixture
def no_figures(monkeypatch):
    """The four figures not drawn (a second each; what they draw is tested below)."""
    for name in ("plot_matrices", "plot_deviation", "plot_roc_bands", "plot_rate_bands"):
        monkeypatch.setattr(demo, name, lambda *a: None)


def _run(tmp_path, cfg=CFG, fairness=FAIR, **kw):
    (tmp_path / "in").mkdir(parents=True)
    root = _with_folds(_write_bfw_like(tmp_path / "in", failures=True))
    out = tmp_path / "out"
    summary = run_demographics(root / "pairs.parquet", root / "attributes.parquet", out, cfg,
                               fairness, model="m1", protocol="p1", seed=kw.get("seed", 11),
                               provenance={"config_hash": "h"})
    return root, out, summary


def test_every_table_is_the_function_it_promises_with_every_setting(no_figures, tmp_path):
    """Each table equals the function the stage calls on the same annotated pairs, given
    this run's settings (7 replicates, seed 11, 90 % Clopper-Pearson, folds, the failures
    and BFW's same-group rule); a second seed moves the bands (the seed is used)."""
    root, out, summary = _run(tmp_path)
    ann, counts = annotated_pairs(root / "pairs.parquet", root / "attributes.parquet", FAIR,
                                  "nonmatch")
    s = ann["score"].to_numpy(np.float64)
    y = ann["label"].to_numpy().astype(bool)
    failed = ann["failed"].to_numpy(bool)
    group = np.where(ann["status"] == "mixed", None, ann["group"].to_numpy(object))
    same = pd.notna(group)
    ida, idb = ann["identity_a"].to_numpy(), ann["identity_b"].to_numpy()
    thr = pd.read_parquet(out / "thresholds.parquet")
    want_thr = global_thresholds(s, y, [0.2, 0.05], same & ~failed, "same_group")
    want_thr["n_failed"] = 2
    pd.testing.assert_frame_equal(thr, want_thr)
    # same-group scored impostors: X 0.1..0.5, Y 0.6..1.0 (the failed Y impostor not
    # fitted on): 10, k = 2 at 0.2 -> just above 0.8
    assert thr["n_impostor"].tolist() == [10, 10]
    assert thr["threshold"].iat[0] == np.nextafter(0.8, 1)
    gt = pd.read_parquet(out / "group_thresholds.parquet")
    raw = group_threshold_table(s, y, group, [0.2, 0.05],
                                folds=ann["fold"].astype(str).to_numpy(), identity_a=ida,
                                identity_b=idb, n_boot=7, seed=11, confidence=0.9,
                                global_mask=same, failed=failed)
    want_gt = demo._labelled(raw, "same_group", counts)
    pd.testing.assert_frame_equal(gt, want_gt)
    assert gt["deviation_global_cv"].notna().any() and gt["deviation_global_lo"].notna().any()
    matrix = pd.read_parquet(out / "cross_fmr.parquet")
    # every attribute: the joined protected groups, then each protected one
    want_m = cross_matrices(ann, ["group", "sub"], thr, {"group": ["X", "Y"],
                                                        "sub": ["X", "Y"]},
                            confidence=0.9, method="clopper-pearson")
    pd.testing.assert_frame_equal(matrix, want_m)
    fars = np.logspace(np.log10(0.05), 0, 6)
    roc = pd.read_parquet(out / "roc_bands.parquet")
    pd.testing.assert_frame_equal(roc, roc_band_table(s, y, ida, idb, fars=fars, n_boot=7,
                                                      seed=11, confidence=0.9))
    grid = np.unique(np.quantile(s[np.isfinite(s)], np.linspace(0, 1, 6)))
    rates = pd.read_parquet(out / "rate_bands.parquet")
    pd.testing.assert_frame_equal(rates, group_rate_band_table(
        s, y, group, ida, idb, thresholds=grid, n_boot=7, seed=11, confidence=0.9))
    assert rates["threshold"].min() == 0.0 and rates["threshold"].max() == 1.0
    assert summary == {"model": "m1", "protocol": "p1", "n_pairs": 22,
                       "n_matrix_cells": len(matrix), "n_groups": 2}
    assert len(matrix) == 2 * 2 * 4          # attributes x thresholds x cells
    _, out2, _ = _run(tmp_path / "seed", seed=12)
    assert not pd.read_parquet(out2 / "roc_bands.parquet").equals(roc)


def test_outputs_carry_provenance_and_csv_twins(tmp_path):
    _, out, _ = _run(tmp_path)
    for stem in ("thresholds", "cross_fmr", "group_thresholds", "roc_bands", "rate_bands"):
        prov = read_provenance(out / f"{stem}.parquet")
        assert {k: prov[k] for k in ("stage", "model", "protocol", "global_pairs", "failed",
                                     "config_hash")} == {
            "stage": "demographics", "model": "m1", "protocol": "p1",
            "global_pairs": "same_group", "failed": "nonmatch", "config_hash": "h"}, stem
    for stem in ("cross_fmr", "group_thresholds", "roc_bands"):
        twin = pd.read_csv(out / f"{stem}.csv")
        assert twin.columns.tolist() == pd.read_parquet(out / f"{stem}.parquet").columns.tolist()
        assert len(twin) == len(pd.read_parquet(out / f"{stem}.parquet"))
    assert not (out / "thresholds.csv").exists() and not (out / "rate_bands.csv").exists()
    for png in ("cross_fmr", "group_thresholds", "roc_bands", "rate_bands"):
        assert (out / f"{png}.png").stat().st_size > 1000


def test_defaults_every_impostor_fifty_replicates_41_points_wilson(no_figures, tmp_path, caplog):
    """An empty section: global_pairs all (15 scored impostors: FMR 1e-3 and 1e-4 need
    1000 and 10000: n/a, logged), nonmatch, 50 replicates, seed as given, 41 band points
    from FAR 1e-4, 95 % Wilson intervals."""
    with caplog.at_level(logging.INFO, logger="facecast.fairness.demographics"):
        root, out, summary = _run(tmp_path, cfg={}, fairness=SUB)
    thr = pd.read_parquet(out / "thresholds.parquet")
    assert thr["target_fmr"].tolist() == [1e-3, 1e-4] and thr["n_impostor"].tolist() == [15, 15]
    assert thr["global_pairs"].tolist() == ["all", "all"]
    assert thr["text"].tolist() == ["n/a (15 impostors)"] * 2
    messages = [(r.levelname, r.getMessage()) for r in caplog.records]
    assert ("WARNING", "global threshold at FMR 0.001: n/a (15 impostors)") in messages
    assert ("WARNING", "global threshold at FMR 0.0001: n/a (15 impostors)") in messages
    assert ("INFO", "global thresholds fitted on every impostor pair, across groups too "
                    "(NIST's convention): 15 impostors") in messages
    assert any(m.startswith("m1/p1: {'n_pairs': 22, 'n_failed': 2") for _, m in messages)
    roc = pd.read_parquet(out / "roc_bands.parquet")
    assert len(roc) == 41 and roc["far"].iat[0] == pytest.approx(1e-4, rel=1e-12)
    assert roc["far"].iat[-1] == 1.0 and (roc["n_boot"] == 50).all()
    ann, _ = annotated_pairs(root / "pairs.parquet", root / "attributes.parquet", SUB,
                             "nonmatch")
    s = ann["score"].to_numpy(np.float64)
    y = ann["label"].to_numpy().astype(bool)
    want = roc_band_table(s, y, ann["identity_a"].to_numpy(), ann["identity_b"].to_numpy(),
                          fars=np.logspace(-4, 0, 41), n_boot=50, seed=11)
    pd.testing.assert_frame_equal(roc, want)
    gt = pd.read_parquet(out / "group_thresholds.parquet")
    assert gt["global_pairs"].eq("all").all()
    matrix = pd.read_parquet(out / "cross_fmr.parquet")
    thr_all = global_thresholds(s, y, [1e-3, 1e-4], ~ann["failed"].to_numpy(bool))
    thr_all["n_failed"] = 2
    pd.testing.assert_frame_equal(matrix, cross_matrices(
        ann, ["group", "sub"], thr_all, {"group": ["X", "Y"], "sub": ["X", "Y"]}))
    assert summary["n_pairs"] == 22


def test_matrix_attributes_and_value_order_from_the_config(no_figures, tmp_path):
    """``matrix_attributes`` names which attributes get a matrix; the values follow the
    protected spec's labels (Y before X here; without them, sorted)."""
    fair = {"protected": {"sub": {"column": "label_sub", "labels": ["Y", "X"]}},
            "sync": "majority"}
    cfg = {**CFG, "matrix_attributes": ["sub"], "n_boot": 0}
    _, out, _ = _run(tmp_path, cfg=cfg, fairness=fair)
    m = pd.read_parquet(out / "cross_fmr.parquet")
    assert m["attribute"].unique().tolist() == ["sub"]
    assert m["value_i"].tolist()[:4] == ["Y", "Y", "X", "X"]


def test_a_wrong_global_pairs_is_named(tmp_path):
    with pytest.raises(ValueError, match=r"demographics.global_pairs must be one of "
                                         r"\['all', 'same_group'\], got 'some'"):
        _run(tmp_path, cfg={"global_pairs": "some"})
    assert not (tmp_path / "out" / "thresholds.parquet").exists()


def test_labelled_group_table():
    """global_pairs inserted third; failures per group from the counts (a group without
    counted pairs: rate NaN); the text: the deviation to 3 significant digits with its
    sign, or n/a with the impostor count."""
    gt = pd.DataFrame({"target_fmr": [0.1] * 4, "group": ["X", "Y", "Z", "W"],
                       "deviation_group": [0.51234, -0.25, 0.0, 1.0],
                       "resolvable": [True, True, False, True],
                       "n_impostor": [40, 30, 4, 10]})
    counts = {"group_pairs": {"X": 8, "Y": 9, "W": 1}, "group_failed": {"X": 2, "W": 1}}
    out = demo._labelled(gt, "all", counts)
    assert out.columns.tolist() == ["target_fmr", "group", "global_pairs", "deviation_group",
                                    "resolvable", "n_impostor", "n_failed", "failed_rate",
                                    "text"]
    assert out["n_failed"].tolist() == [2, 0, 0, 1] and out["n_failed"].dtype == np.int64
    assert out["failed_rate"].iloc[[0, 1, 3]].tolist() == [0.25, 0.0, 1.0]
    assert np.isnan(out["failed_rate"].iat[2])              # Z: no counted pair
    assert out["text"].tolist() == ["+0.512", "-0.25", "n/a (4 impostors)", "+1"]
    assert "global_pairs" not in gt.columns                      # a copy
    empty = gt.iloc[:0]
    assert demo._labelled(empty, "all", counts) is empty


def test_the_page_states_the_rules_then_the_tables(no_figures, tmp_path):
    _, out, _ = _run(tmp_path, cfg={**CFG, "n_boot": 0})
    page = (out / "tables.html").read_text()
    assert "<title>Demographics: m1 on p1</title>" in page
    assert ("<p>Accept iff score &gt;= threshold. Global thresholds "
            "(demographics.global_pairs: same_group) from the impostor pairs whose two "
            "images share a group (BFW&#x27;s own code: a1 == a2); n/a where they are fewer "
            "than 1/FMR. 2 pair(s) without a feature: pairs without a feature count as "
            "non-matches") in page
    assert page.count("<p>") == page.count("</p>") and "ISO/IEC 19795-1 generalized " \
        "FMR/FNMR): a false non-match when genuine, a correct reject when impostor.</p>" in page
    captions = ["global thresholds", "per-group thresholds: deviation (FMR_s - f*)/f* under "
                "the global and the per-group threshold, TAR, cross-validated (_cv), "
                "bootstrap interval (_lo/_hi); n_failed / failed_rate: the group&#x27;s "
                "pairs without a feature",
                "cross-demographic impostor FMR (false matches / impostors)",
                "TAR at FAR with pointwise 95 % bootstrap bands"]
    at = [page.index(f"<caption>{c}</caption>") for c in captions]
    assert at == sorted(at) and at[0] > page.index("Accept iff")
    # the matrix shown with its eight columns only
    table = page[at[2]:at[3]]
    for col in ("attribute", "threshold_name", "value_i", "value_j", "fmr", "fmr_lo",
                "fmr_hi", "fmr_text"):
        assert f"<th>{col}</th>" in table
    assert "<th>false_matches</th>" not in table and "<th>n_impostor</th>" not in table


def _capture(monkeypatch):
    figs = []
    monkeypatch.setattr(demo, "save_figure", lambda fig, path: figs.append((fig, path)))
    return figs


ROC = pd.DataFrame({"far": [0.01, 0.1, 0.5, 0.9], "tar": [0.2, 0.5, 0.8, 1.0],
                    "tar_lo": [0.1, 0.4, 0.7, 0.9], "tar_hi": [0.3, 0.6, 0.9, 1.0],
                    "frr": [0.8, 0.5, 0.2, 0.0], "frr_lo": [0.7, 0.4, 0.1, 0.0],
                    "frr_hi": [0.9, 0.6, 0.3, 0.1], "n_impostor": [50] * 4,
                    "resolvable": [False, True, True, True]})


def test_roc_figure_draws_tar_bands_and_the_det(monkeypatch, tmp_path):
    """Left: the band (alpha 0.25), TAR at resolvable FARs, grey at the others, log FAR;
    right: probit FRR against probit FAR below FAR 0.9, ticks from 0.01 (the smallest FAR)."""
    figs = _capture(monkeypatch)
    plot_roc_bands(ROC, tmp_path / "r.png", "M on P")
    (fig, path), = figs
    assert path == tmp_path / "r.png"
    assert tuple(fig.get_size_inches()) == (10.0, 4.0)
    assert type(fig.get_layout_engine()).__name__ == "ConstrainedLayoutEngine"
    roc_ax, det_ax = fig.axes
    assert roc_ax.get_title() == "M on P: ROC" and det_ax.get_title() == "M on P: DET"
    assert roc_ax.title.get_fontsize() == det_ax.title.get_fontsize() == 9
    assert roc_ax.get_xscale() == "log" and roc_ax.get_yscale() == "linear"
    assert (roc_ax.get_xlabel(), roc_ax.get_ylabel()) == ("FAR", "TAR")
    band, = roc_ax.collections
    assert band.get_alpha() == 0.25
    assert band.get_label() == "95 % band (identity bootstrap)"
    # the band: a step polygon from (0.01, 0.1) .. (0.9, 1.0) along tar_lo and tar_hi,
    # each value held until the next FAR (step "post": a vertex at (0.1, 0.3))
    verts = band.get_paths()[0].vertices
    assert verts[:, 1].min() == 0.1 and verts[:, 1].max() == 1.0
    assert [0.1, 0.3] in verts.tolist() and [0.5, 0.6] in verts.tolist()
    assert roc_ax.get_subplotspec().get_geometry() == (1, 2, 0, 0)
    assert det_ax.get_subplotspec().get_geometry() == (1, 2, 1, 1)
    assert roc_ax.xaxis.get_minor_ticks()[0].gridline.get_visible()
    tar, grey = roc_ax.lines
    assert tar.get_xdata().tolist() == [0.1, 0.5, 0.9]
    assert tar.get_ydata().tolist() == [0.5, 0.8, 1.0]
    assert tar.get_drawstyle() == grey.get_drawstyle() == "steps-post"
    assert grey.get_xdata().tolist() == [0.01] and grey.get_ydata().tolist() == [0.2]
    assert grey.get_color() == "grey" and tar.get_label() == "TAR"
    legend = roc_ax.get_legend()
    assert [t.get_text() for t in legend.get_texts()] == [
        "95 % band (identity bootstrap)", "TAR", "FAR < 1/50: not resolvable"]
    assert legend.get_texts()[0].get_fontsize() == 7
    assert roc_ax.xaxis.get_gridlines()[0].get_alpha() == 0.3
    assert det_ax.get_legend() is None
    det_band, = det_ax.collections
    assert det_band.get_alpha() == 0.25
    det, = det_ax.lines
    np.testing.assert_allclose(det.get_xdata(), ndtri([0.01, 0.1, 0.5]))
    # FRR 0.0 at FAR 0.9 is cut (FAR >= 0.9); the others at their probit
    np.testing.assert_allclose(det.get_ydata(), ndtri([0.8, 0.5, 0.2]))
    assert det.get_drawstyle() == "steps-post"
    dverts = det_band.get_paths()[0].vertices
    np.testing.assert_allclose([dverts[:, 1].min(), dverts[:, 1].max()],
                               ndtri([0.1, 0.9]))
    # step "post": FRR_hi 0.9 at FAR 0.01 held until FAR 0.1
    assert any(np.allclose(v, ndtri([0.1, 0.9])) for v in dverts)
    np.testing.assert_allclose(det_ax.get_xticks(), ndtri([0.01, 0.1, 0.5]))
    np.testing.assert_allclose(det_ax.get_yticks(), ndtri([0.01, 0.1, 0.5]))
    assert [t.get_text() for t in det_ax.get_xticklabels()] == ["0.01", "0.1", "0.5"]
    assert [t.get_text() for t in det_ax.get_yticklabels()] == ["0.01", "0.1", "0.5"]
    assert det_ax.get_xlabel() == "FAR (probit scale)"
    assert det_ax.get_ylabel() == "FRR (probit scale)"
    assert det_ax.xaxis.get_gridlines()[0].get_alpha() == 0.3


def test_roc_figure_clips_a_zero_frr_to_one_in_a_million(monkeypatch, tmp_path):
    """FRR 0 and 1, and a FAR of 0, are drawn at probit(1e-6) and probit(1 - 1e-6); a
    ROC of one point names its impostors."""
    figs = _capture(monkeypatch)
    roc = ROC.assign(far=[0.0, 1e-3, 0.2, 0.5], frr=[1.0, 0.5, 0.2, 0.0],
                     frr_lo=[1.0, 0.5, 0.2, 0.0], frr_hi=[1.0, 0.5, 0.2, 0.0])
    plot_roc_bands(roc, tmp_path / "r.png", "T")
    det = figs[0][0].axes[1].lines[0]
    np.testing.assert_allclose(det.get_xdata(), ndtri([1e-6, 1e-3, 0.2, 0.5]))
    np.testing.assert_allclose(det.get_ydata(), ndtri([1 - 1e-6, 0.5, 0.2, 1e-6]))
    ticks = figs[0][0].axes[1].get_xticks()
    np.testing.assert_allclose(ticks, ndtri([1e-5, 1e-4, 1e-3, 1e-2, 0.1, 0.5]))
    plot_roc_bands(ROC.iloc[:1].assign(n_impostor=7), tmp_path / "one.png", "T")
    texts = [t.get_text() for t in figs[1][0].axes[0].get_legend().get_texts()]
    assert texts[-1] == "FAR < 1/7: not resolvable"


def test_rate_figure_draws_each_group_and_the_global_thresholds(monkeypatch, tmp_path):
    """Per group (sorted) FMR(t) left and FNMR(t) right with bands in the line's colour
    (alpha 0.2); a grey dashed line at each finite global threshold; FMR on a symlog axis
    from 0; the legend on the right only."""
    figs = _capture(monkeypatch)
    rates = pd.DataFrame({"group": ["Y", "Y", "X", "X"], "threshold": [0.2, 0.6, 0.2, 0.6],
                          "fmr": [0.5, 0.1, 0.4, 0.05], "fmr_lo": [0.4, 0.05, 0.3, 0.01],
                          "fmr_hi": [0.6, 0.2, 0.5, 0.1], "fnmr": [0.05, 0.3, 0.1, 0.6],
                          "fnmr_lo": [0.01, 0.2, 0.05, 0.5], "fnmr_hi": [0.1, 0.4, 0.2, 0.7]})
    thr = pd.DataFrame({"threshold": [0.5, np.nan, 0.3]})
    plot_rate_bands(rates, thr, tmp_path / "g.png", "M on P")
    (fig, path), = figs
    assert path == tmp_path / "g.png" and tuple(fig.get_size_inches()) == (11.0, 4.0)
    assert type(fig.get_layout_engine()).__name__ == "ConstrainedLayoutEngine"
    assert fig._suptitle.get_text() == "M on P: error rates per group (95 % pointwise bands)"
    assert fig._suptitle.get_fontsize() == 9
    fmr_ax, fnmr_ax = fig.axes
    assert fmr_ax.get_subplotspec().get_geometry() == (1, 2, 0, 0)
    for ax, key in ((fmr_ax, "fmr"), (fnmr_ax, "fnmr")):
        x_line, y_line = ax.lines[:2]
        assert (x_line.get_label(), y_line.get_label()) == ("X", "Y")
        assert x_line.get_xdata().tolist() == [0.2, 0.6]
        assert x_line.get_ydata().tolist() == rates[key].iloc[2:].tolist()
        assert y_line.get_ydata().tolist() == rates[key].iloc[:2].tolist()
        bands = ax.collections
        assert len(bands) == 2 and all(b.get_alpha() == 0.2 for b in bands)
        for band, line, grp in zip(bands, (x_line, y_line), ("X", "Y"), strict=True):
            np.testing.assert_allclose(band.get_facecolor()[0][:3],
                                       to_rgb(line.get_color()))
            sub = rates[rates["group"] == grp]
            verts = band.get_paths()[0].vertices
            v = verts[:, 1]
            assert v.min() == sub[f"{key}_lo"].min() and v.max() == sub[f"{key}_hi"].max()
            assert set(verts[:, 0].tolist()) == {0.2, 0.6}          # over the thresholds
        marks = ax.lines[2:]
        assert [m.get_xdata()[0] for m in marks] == [0.5, 0.3]
        assert all(m.get_color() == "grey" and m.get_linewidth() == 0.8
                   and m.get_linestyle() == "--" for m in marks)
        assert ax.get_xlabel() == "threshold (accept iff score >= t)"
        assert ax.get_ylabel() == key.upper()
        assert ax.xaxis.get_gridlines()[0].get_alpha() == 0.3
    assert fmr_ax.get_yscale() == "symlog" and fnmr_ax.get_yscale() == "linear"
    assert fmr_ax.yaxis.get_transform().linthresh == 1e-4
    assert fmr_ax.get_ylim()[0] == 0
    assert fmr_ax.get_legend() is None
    legend = fnmr_ax.get_legend()
    assert [t.get_text() for t in legend.get_texts()] == ["X", "Y"]
    assert legend.get_texts()[0].get_fontsize() == 7


def test_demographics_writes_the_figures_with_titles(monkeypatch, tmp_path):
    """The four figures of a run, each with the model and protocol in its title."""
    calls = {}
    monkeypatch.setattr(demo, "plot_matrices", lambda m, p, t: calls.update(matrix=(p, t)))
    monkeypatch.setattr(demo, "plot_deviation", lambda g, p, t: calls.update(dev=(p, t)))
    monkeypatch.setattr(demo, "plot_roc_bands", lambda r, p, t: calls.update(roc=(p, t)))
    monkeypatch.setattr(demo, "plot_rate_bands",
                        lambda r, th, p, t: calls.update(rates=(p, t, len(th))))
    _, out, _ = _run(tmp_path, cfg={**CFG, "n_boot": 0})
    assert calls == {"matrix": (out / "cross_fmr.png", "m1 on p1: impostor FMR"),
                     "dev": (out / "group_thresholds.png",
                             "m1 on p1: deviation from the intended FMR"),
                     "roc": (out / "roc_bands.png", "m1 on p1"),
                     "rates": (out / "rate_bands.png", "m1 on p1", 2)}


def test_all_scores_failed_gives_a_grid_at_zero(no_figures, tmp_path):
    """Every pair without a feature (score -inf under nonmatch): the rate grid falls back
    to the single threshold 0.0 instead of failing on an empty quantile."""
    root = tmp_path / "in"
    root.mkdir()
    _write_bfw_like(root)
    pairs = pd.read_parquet(root / "pairs.parquet")
    pairs["score"] = np.nan
    pairs["status"] = "no_face"
    pairs.to_parquet(root / "pairs.parquet")
    run_demographics(root / "pairs.parquet", root / "attributes.parquet", tmp_path / "o",
                     {"n_boot": 0, "band_points": 5, "fmr_targets": [0.2]}, SUB, model="m",
                     protocol="p", seed=0)
    rates = pd.read_parquet(tmp_path / "o" / "rate_bands.parquet")
    assert rates["threshold"].unique().tolist() == [0.0]


def test_a_rerun_into_a_new_nested_folder_and_into_the_same_one(no_figures, tmp_path):
    """The output folder is made with its parents, and a second run into it (a rerun of
    one target) replaces the outputs."""
    (tmp_path / "in").mkdir()
    root = _write_bfw_like(tmp_path / "in")
    out = tmp_path / "a" / "b" / "c"
    for _ in range(2):
        summary = run_demographics(root / "pairs.parquet", root / "attributes.parquet", out,
                                   {"n_boot": 0, "band_points": 5, "fmr_targets": [0.2]},
                                   SUB, model="m", protocol="p", seed=0)
        assert summary["n_pairs"] == 20
    assert (out / "thresholds.parquet").exists()


def test_the_rate_grid_defaults_to_41_quantiles_of_the_scores(no_figures, tmp_path):
    """Without band_points: the per-group rate curves at the unique 41-point quantiles of
    the scores (20 scores, some equal: fewer than 41 thresholds)."""
    (tmp_path / "in").mkdir()
    root = _write_bfw_like(tmp_path / "in")
    run_demographics(root / "pairs.parquet", root / "attributes.parquet", tmp_path / "o",
                     {"n_boot": 0, "fmr_targets": [0.2]}, SUB, model="m", protocol="p",
                     seed=0)
    s, _, _ = _bfw_like()
    grid = np.unique(np.quantile(s, np.linspace(0, 1, 41)))
    rates = pd.read_parquet(tmp_path / "o" / "rate_bands.parquet")
    assert rates["threshold"].unique().tolist() == grid.tolist()
    assert len(grid) < 41 and len(np.unique(np.quantile(s, np.linspace(0, 1, 42)))) != \
        len(grid)


def test_a_protocol_without_a_labelled_image_has_no_group(no_figures, tmp_path):
    """No image carries the protected attribute: the tables have no group and no matrix
    cell, and the summary says 0 of each (the global thresholds are still fitted)."""
    (tmp_path / "in").mkdir()
    root = _write_bfw_like(tmp_path / "in")
    attrs = pd.read_parquet(root / "attributes.parquet")
    attrs["label_sub"] = None
    attrs.to_parquet(root / "attributes.parquet")
    summary = run_demographics(root / "pairs.parquet", root / "attributes.parquet",
                               tmp_path / "o", {"n_boot": 0, "band_points": 5,
                                                "fmr_targets": [0.2]}, SUB, model="m",
                               protocol="p", seed=0)
    assert summary == {"model": "m", "protocol": "p", "n_pairs": 20, "n_matrix_cells": 0,
                       "n_groups": 0}
    thr = pd.read_parquet(tmp_path / "o" / "thresholds.parquet")
    assert thr["n_impostor"].tolist() == [15]
