"""IJB templates (issue 22): the release layout, given-landmark alignment, insightface's
pooling and TAR read-out, streamed scoring, 1:N on templates."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from ijb_support import write_ijb
from PIL import Image
from sklearn.metrics import roc_curve

from facecast.datasets.ijb import read_ijb, read_members, read_one_n_csv, read_template_pairs
from facecast.datasets.manifest import DatasetError, finalize_manifest
from facecast.faces.align import align_arcface
from facecast.faces.config import FacesConfig
from facecast.faces.crops import decode_png
from facecast.faces.decode import read_image
from facecast.faces.given import GIVEN_STATUS, given_row
from facecast.templates.build import build_templates
from facecast.templates.groups import template_group_rates, template_groups
from facecast.templates.identify import identification_table, subject_ranks
from facecast.templates.pooling import image_features, pool_templates
from facecast.templates.scoring import score_pairs
from facecast.templates.verify import (
    INSIGHTFACE_FARS,
    insightface_roc,
    nearest_index,
    tar_table,
    thin_roc,
)


def _insightface_readout(scores, labels, fars):
    """insightface recognition/_evaluation_/ijb/ijb_11.py, its own lines (the ROC flip
    included), with ``label``/``scores[method]``/``x_labels`` bound to the arguments and
    the row's ``'%.2f' % (tpr[min_index] * 100)`` kept as the raw ``tpr[min_index]``."""
    label, x_labels = labels, fars
    fpr, tpr, _ = roc_curve(label, scores)
    fpr = np.flipud(fpr)
    tpr = np.flipud(tpr)  # select largest tpr at same fpr
    tpr_fpr_row = []
    for fpr_iter in np.arange(len(x_labels)):
        _, min_index = min(
            list(zip(abs(fpr - x_labels[fpr_iter]), range(len(fpr)))))  # noqa: B905 - the reference's own line
        tpr_fpr_row.append(tpr[min_index])
    return [float(v) for v in tpr_fpr_row]


def test_release_reader_reads_lines_and_names_file_and_line_of_errors(tmp_path):
    root = write_ijb(tmp_path / "IJB_C")
    members = read_members(root, "ijbc")
    assert len(members) == 21 and members["image_id"].iat[0] == "loose_crop/1.jpg"
    assert members["landmarks"].iat[0].shape == (10,)
    raw = read_ijb(root, "ijbc")
    assert raw["identity"].tolist()[:4] == ["2"] * 4  # subject of templates 1, 2 (1:N CSVs)
    m = finalize_manifest(raw, root, shard_size=50)
    assert (m["status"] == "missing").sum() == 1 and "given_landmarks" in m
    meta = root / "meta"
    lm = meta / "ijbc_name_5pts_score.txt"
    lines = lm.read_text().splitlines()
    lm.write_text("\n".join(lines[:3] + ["4.jpg 1 2 3"] + lines[4:]) + "\n")
    with pytest.raises(DatasetError, match=r"ijbc_name_5pts_score.txt:4: expected"):
        read_members(root, "ijbc")
    lm.write_text("\n".join(lines[:1] + [lines[2], lines[1]] + lines[3:]) + "\n")
    with pytest.raises(DatasetError, match=r"face_tid_mid.txt:2 names '2.jpg' but .*:2 names"):
        read_members(root, "ijbc")
    pairs = meta / "ijbc_template_pair_label.txt"
    pairs.write_text("1 2 0\n1 77 0\n")
    with pytest.raises(DatasetError, match=r"pair_label.txt:2: template 1 or 77 has no image"):
        read_template_pairs(pairs, np.arange(1, 11))
    pairs.write_text("1 2 0\n1 3 2\n")
    with pytest.raises(DatasetError, match=r"pair_label.txt:2: label must be 0 or 1"):
        read_template_pairs(pairs)
    g1 = meta / "ijbc_1N_gallery_G1.csv"
    g1.write_text("TEMPLATE_ID,SUBJECT_ID,FILENAME\n1,2,a.jpg\n1,3,b.jpg\n")
    with pytest.raises(DatasetError, match=r"template 1 has several subjects \(lines \[2, 3\]\)"):
        read_one_n_csv(g1)


def test_given_landmarks_align_like_the_template_without_detection(tmp_path):
    root = write_ijb(tmp_path / "IJB_C", one_n=False)
    assert read_ijb(root, "ijbc")["identity"].iat[2] == "template_2"  # no 1:N CSVs
    path = root / "loose_crop" / "1.jpg"
    lms = np.array([float(v) for v in "130 105 190 105 160 140 137 175 183 175".split()])
    dec = read_image(path, 10**8)
    row = given_row("loose_crop/1.jpg", dec, lms, 0.75, FacesConfig(crops=("arcface", "facenet")))
    assert row["status"] == GIVEN_STATUS and row["det_score"] == pytest.approx(0.75)
    assert "no detection" in row["message"]
    want = align_arcface(np.asarray(Image.open(path).convert("RGB")), lms.reshape(5, 2))
    assert np.array_equal(decode_png(row["crop_arcface"]), want)
    assert decode_png(row["crop_facenet"]).shape == (160, 160, 3)
    none = given_row("x", dec, None, None, FacesConfig())
    assert none["status"] == "no_landmarks" and none["crop_arcface"] is None


def test_pooling_equals_insightface_by_hand():
    # template 7: media 1 = images a, b (mean), media 2 = image c; template 3: image d
    a, b, c, d = (np.array(v, np.float32) for v in
                  ([2, 0, 0], [0, 4, 0], [0, 0, 1], [3, 4, 0]))
    raw = np.vstack([a, b, c, d])
    face = np.array([0.5, 1.0, 2.0, 1.0])
    feats = image_features(raw, face)  # raw x faceness
    assert np.array_equal(feats[1], [0, 4, 0])
    p = pool_templates(feats, np.array([7, 7, 7, 3]), np.array([1, 1, 2, 9]))
    t7 = (np.array([1, 0, 0]) + np.array([0, 4, 0])) / 2 + np.array([0, 0, 2])  # (0.5,2,2)
    assert p.template_ids.tolist() == [3, 7]
    assert np.allclose(p.features[1], t7 / np.linalg.norm(t7), rtol=0, atol=1e-15)
    assert np.allclose(p.features[0], [0.6, 0.8, 0], rtol=0, atol=1e-15)
    assert p.n_images.tolist() == [1, 3] and p.n_media.tolist() == [1, 2]
    # switches: no media pooling = plain sum; norm_score off = unit images first
    s = pool_templates(feats, np.array([7, 7, 7, 3]), np.array([1, 1, 2, 9]),
                       media_pooling=False).features[1]
    assert np.allclose(s, np.array([1, 4, 2]) / np.sqrt(21), atol=1e-15)
    unit = image_features(raw, face, norm_score=False, detector_score=False)
    assert np.allclose(np.linalg.norm(unit, axis=1), 1)


def test_build_counts_dropped_images_and_templates_without_features():
    members = pd.DataFrame({"image_id": ["a", "b", "c", "d"], "template_id": [1, 1, 2, 3],
                            "media_id": [5, 5, 6, 7], "faceness": [1.0, 1.0, 1.0, 1.0]})
    table, pooled = build_templates(members, np.array(["b", "c"]),
                                    np.eye(2, dtype=np.float32), {}, {1: "s1"})
    assert table["n_dropped"].tolist() == [1, 0, 1]
    assert table["status"].tolist() == ["ok", "ok", "no_features"]
    assert table["subject"].tolist() == ["s1", "", ""] and pooled.template_ids.tolist() == [1, 2]


@pytest.mark.parametrize("n_pairs", [300, 30_000])  # sparse (gather) and dense (product)
def test_streamed_scores_equal_row_dot_products(n_pairs):
    rng = np.random.default_rng(1)
    f = rng.normal(size=(200, 16))
    ia, ib = rng.integers(0, 200, n_pairs), rng.integers(0, 200, n_pairs)
    s = score_pairs(f, ia, ib, block=32, max_rows=97)
    assert np.allclose(s, (f[ia] * f[ib]).sum(1), rtol=0, atol=1e-12)


def test_tar_table_equals_the_sklearn_readout_of_insightface():
    rng = np.random.default_rng(3)
    labels = np.r_[np.ones(2000), np.zeros(200_000)].astype(int)
    scores = np.round(rng.normal(size=len(labels)) + 3 * labels, 3)  # ties too
    tab = tar_table(scores, labels)
    assert tab["tar"].tolist() == _insightface_readout(scores, labels, INSIGHTFACE_FARS)
    assert tab["resolvable"].tolist() == [False, True, True, True, True, True]
    assert tab["text"].iat[0] == "n/a (200000 impostors)"
    # a tiny protocol: the ROC point nearest FAR 0.1 is a tie between FAR 0 and FAR 0.2;
    # insightface's flip takes the later one, the top of the step at FAR 0.2: TAR 1.0
    s, y = np.r_[0.95, 0.94, 0.93, 0.92, np.linspace(0.9, 0.5, 40)], np.r_[[1] * 4, [0] * 40]
    s, y = np.r_[s, 0.86], np.r_[y, 1]
    s[4:12] = np.linspace(0.91, 0.87, 8)  # 8 impostors above the fifth genuine pair
    row = tar_table(s, y, [0.1]).iloc[0]
    assert row["tar"] == _insightface_readout(s, y, [0.1])[0] == 1.0
    assert row["far_reached"] == 0.2
    best = tar_table(s, y, [0.1], readout="at_or_below").iloc[0]
    assert best["tar"] == 0.8 and best["far_reached"] <= 0.1
    x, t = thin_roc(insightface_roc(s, y))  # the plot starts with the TAR at FAR 0
    assert x[0] == 1e-6 and t[0] == 0.8 and t[-1] == 1.0


def test_perfect_separation_reads_tar_one_at_every_far():
    """The issue's case: a model that separates the template pairs perfectly. The
    reference reads TAR 1.0 at every FAR (the top of the ROC's vertical step at FAR 0);
    taking the bottom of the step wrote 0.0."""
    rng = np.random.default_rng(0)
    for n_gen, n_imp in ((3, 5), (40, 400), (500, 20_000)):
        y = np.r_[np.ones(n_gen, int), np.zeros(n_imp, int)]
        s = np.r_[rng.uniform(0.6, 0.9, n_gen), rng.uniform(-0.2, 0.5, n_imp)]
        ref = _insightface_readout(s, y, INSIGHTFACE_FARS)
        assert ref == [1.0] * 6
        assert tar_table(s, y)["tar"].tolist() == ref


@pytest.mark.parametrize("case", range(60))
def test_readout_equals_the_reference_lines_on_hostile_rocs(case):
    """Vertical steps (tied genuine scores), ties across labels, float32 scores, values
    equidistant from a FAR, tiny protocols: the literal reference read-out every time."""
    rng = np.random.default_rng(case)
    n_gen = int(rng.integers(1, 30))
    n_imp = int(rng.choice([1, 2, 3, 7, 10, 20, 100, 1000, 5000]))
    y = np.r_[np.ones(n_gen, int), np.zeros(n_imp, int)]
    levels = int(rng.integers(2, 12))           # few distinct values: ties everywhere
    s = rng.integers(0, levels, len(y)) + 0.7 * y * rng.integers(0, 3)
    if case % 3 == 0:
        s = (s / levels).astype(np.float32)      # float32 scores, as ijb_11.py's np.sum
    fars = [1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1, 0.2, 0.25, 0.5, 1 / 3]
    assert tar_table(s, y, fars)["tar"].tolist() == _insightface_readout(s, y, fars)


def test_roc_equals_sklearn_on_hostile_scores():
    rng = np.random.default_rng(7)
    for _ in range(20):
        y = (rng.random(300) < 0.3).astype(int)
        s = rng.integers(0, 6, 300).astype(np.float32) / 5
        fpr, tpr, _ = roc_curve(y, s)
        far, tar, _ = insightface_roc(s, y)
        assert far.tolist() == fpr.tolist() and tar.tolist() == tpr.tolist()


def test_subject_ranks_and_1n_table():
    g = np.eye(3)
    p = np.array([[0.9, 0.1, 0.0], [0.2, 0.8, 0.3], [0.0, 0.0, 1.0], [0.5, 0.4, 0.3]])
    rank, ms, other = subject_ranks(p, np.array(["a", "b", "c", "z"]), g,
                                    np.array(["a", "c", "b"]))
    assert rank.tolist() == [1, 2, 2, 0] and ms[1] == pytest.approx(0.3)
    assert other[3] == pytest.approx(0.5)
    templates = pd.DataFrame({"template_id": [1, 2, 3, 4], "status": ["ok"] * 4})
    proto = {"G1": pd.DataFrame({"template_id": [1, 2], "subject_id": ["a", "b"]}),
             "G2": pd.DataFrame({"template_id": [3], "subject_id": ["c"]}),
             "probe": pd.DataFrame({"template_id": [1, 2, 3, 4],
                                    "subject_id": ["a", "b", "c", "a"]})}
    feats = np.array([[1, 0], [0, 1], [1, 1], [0.9, 0.1]]) / np.array([[1], [1], [2**0.5], [1]])
    t = identification_table(templates, feats, proto, ranks=[1, 2], fpir_targets=[0.5])
    assert set(t["group"]) == {"all"}
    g1 = t[t["gallery"] == "G1"].set_index("metric")
    assert g1.loc["rank_1", "value"] == 1.0 and g1.loc["rank_1", "n_mated"] == 3
    # one non-mated search (probe c) cannot resolve FPIR 0.5: said, not guessed
    assert not g1.loc["tpir@fpir=0.5", "resolvable"]
    assert g1.loc["tpir@fpir=0.5", "text"] == "n/a (1 non-mated searches)"
    closed = t[(t["gallery"] == "G1+G2") & (t["group"] == "all")].set_index("metric")
    assert closed.loc["rank_1", "n_nonmated"] == 0 and closed.loc["rank_1", "value"] == 1.0
    # per probe group: CMC of the group's probes; FPIR thresholds from all non-mated ones
    t = identification_table(templates, feats, proto, ranks=[1], fpir_targets=[0.5],
                             probe_groups={1: "x", 2: "y", 3: "x", 4: "y"})
    g1 = t[t["gallery"] == "G1"].set_index(["group", "metric"])
    assert g1.loc[("x", "rank_1"), "n_mated"] == 1 and g1.loc[("x", "rank_1"), "n_nonmated"] == 1
    assert g1.loc[("y", "rank_1"), "n_probes"] == 2 and g1.loc[("y", "rank_1"), "value"] == 1.0


def test_nearest_index_is_the_flipped_argmin_with_repeats():
    """The last of equally near points: ``len - 1 - argmin`` over the flipped array."""
    fpr = np.array([0.0, 0.0, 0.1, 0.1, 0.1, 0.3, 0.5, 0.5, 1.0])
    flipped = np.flipud(fpr)
    for far in (0.0, 0.05, 0.1, 0.2, 0.4, 0.45, 0.75, 1.0, 2.0, -1.0):
        expected = len(fpr) - 1 - int(np.argmin(np.abs(flipped - far)))
        assert nearest_index(fpr, far) == expected, far
    tie = np.array([0.0, 0.25, 0.25, 0.75, 0.75, 1.0])
    assert nearest_index(tie, 0.5) == 4  # 0.25 and 0.75 equally near: the top of 0.75


def test_template_groups_mean_and_majority_then_rates_per_group():
    members = pd.DataFrame({"image_id": list("abcdef"), "template_id": [1, 1, 1, 2, 2, 3]})
    attrs = pd.DataFrame({"image_id": list("abcde"), "label_age": [20, 30, 70, 60, 64],
                          "label_male": [1, 1, 0, 0, 0]})  # f: no attributes (not ok)
    protected = {"age": {"column": "label_age", "bins": [40], "labels": ["young", "old"]},
                 "gender": {"column": "label_male", "values": {1: "M", 0: "F"}}}
    g = template_groups(members, attrs, protected).set_index("template_id")
    assert g.loc[1, "age"] == "old"  # mean 40 is binned, not the majority "young"
    assert g.loc[1, "gender"] == "M" and g.loc[2, "group"] == "old_F"
    assert pd.isna(g.loc[3, "group"])
    pairs = pd.DataFrame({"template_a": [1, 1, 2, 2], "template_b": [1, 2, 2, 3],
                          "label": [1, 0, 1, 0], "score": [0.9, 0.8, 0.7, 0.1],
                          "status": ["ok"] * 4})
    r = template_group_rates(pairs, g.reset_index(), [0.5])
    assert set(r["group"]) == {"old_M", "old_F"}  # mixed and group-less pairs count nowhere
    assert r["n_impostor"].sum() == 0 and not r["resolvable"].any()


def test_config_check_names_the_key_of_a_release_without_its_files(tmp_path):
    from facecast.datasets.checks import config_errors as dataset_errors
    from facecast.templates.checks import config_errors as template_errors

    root = write_ijb(tmp_path / "IJB_B", one_n=False, variant="ijbb")
    cfg = {"datasets": {"b": {"kind": "ijb", "root": str(root), "variant": "ijbc"}},
           "embed": {"models": {"lbp": {}}},
           "templates": {"models": ["r100"], "fars": [0.5, 2.0]}}
    errs = dataset_errors(cfg)
    assert len(errs) == 3 and all(e.startswith("datasets.b.root: ") for e in errs)
    assert "ijbc_face_tid_mid.txt does not exist (variant ijbc)" in errs[0]
    cfg["datasets"]["b"]["variant"] = "ijbb"
    assert dataset_errors(cfg) == []
    assert template_errors(cfg) == ["templates.models: 'r100' is not an embed model (['lbp'])",
                                    "templates.fars: 2.0 must lie in (0, 1)"]


def test_ijb_faces_enter_benchmark_pools_wherever_ok_does():
    from facecast.analysis.filtering import benchmark_pool

    status = np.array(["ok", "landmarks_given", "aligned_input", "no_face", "landmarks_given"])
    exclude = np.array([False, False, False, False, True])
    assert benchmark_pool(status, exclude).tolist() == [True, True, True, False, False]
    assert benchmark_pool(status, exclude, ["aligned_input"]).tolist() == [
        False, False, True, False, False]


def _insightface_templates(img_feats, templates, medias):
    """ijb_11.py's image2template_feature, as a literal loop (the reference)."""
    from sklearn.preprocessing import normalize

    unique_templates = np.unique(templates)
    template_feats = np.zeros((len(unique_templates), img_feats.shape[1]))
    for count_template, uqt in enumerate(unique_templates):
        (ind_t,) = np.where(templates == uqt)
        face_norm_feats = img_feats[ind_t]
        face_medias = medias[ind_t]
        unique_medias, unique_media_counts = np.unique(face_medias, return_counts=True)
        media_norm_feats = []
        for u, ct in zip(unique_medias, unique_media_counts, strict=True):
            (ind_m,) = np.where(face_medias == u)
            if ct == 1:
                media_norm_feats += [face_norm_feats[ind_m]]
            else:
                media_norm_feats += [np.mean(face_norm_feats[ind_m], axis=0, keepdims=True)]
        template_feats[count_template] = np.sum(np.array(media_norm_feats), axis=0)
    return unique_templates, normalize(template_feats)


def test_layout_pooling_equals_the_reference_loop(tmp_path):
    root = write_ijb(tmp_path / "IJB_C", one_n=False)
    members = read_members(root, "ijbc")
    ids = members["image_id"].to_numpy()[:-1]  # 999.jpg has no feature
    raw = np.random.default_rng(7).normal(size=(len(ids), 8)).astype(np.float32) * 20
    table, pooled = build_templates(members, ids, raw, {})
    face = members["faceness"].to_numpy()[:-1].astype(np.float32)
    ref_t, ref_f = _insightface_templates(raw * face[:, None],
                                          members["template_id"].to_numpy()[:-1],
                                          members["media_id"].to_numpy()[:-1])
    assert np.array_equal(pooled.template_ids, ref_t)
    # equal up to the float32 rounding of the reference's per-media np.mean (ours averages
    # in float64); exact on dyadic features (test_pooling_equals_insightface_by_hand)
    assert np.allclose(pooled.features, ref_f, rtol=0, atol=1e-6)
    assert table.set_index("template_id").loc[1, ["n_images", "n_media", "n_dropped"]].tolist() \
        == [3, 2, 1]
