"""IJB templates (issue 22): the release layout, given-landmark alignment, insightface's
pooling and TAR read-out, streamed scoring, 1:N on templates.

insightface's read-out and pooling are compared with what its
``recognition/_evaluation_/ijb/ijb_11.py`` returned on the same inputs, recorded from a
checkout by ``tests/reference/insightface_recorder.py``
(``tests/data/reference/insightface/ijb_*.json``; the inputs: ``tests/reference/
ijb_inputs.py``). No insightface code is in this repository."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from ijb_support import write_ijb
from PIL import Image
from reference import ijb_inputs
from reference.common import read_record
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


def _readout(case: str) -> dict:
    return read_record("insightface", "ijb_readout")["outputs"]["cases"][case]


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
    # and exactly what insightface's image2template_feature made of the same images
    ref = read_record("insightface", "ijb_pooling")["outputs"]["by_hand"]
    case = ijb_inputs.pooling_case("by_hand")
    assert np.array_equal(image_features(case["raw"], case["faceness"]), case["img_feats"])
    assert p.template_ids.tolist() == ref["templates"]
    assert np.array_equal(p.features, np.asarray(ref["features"]))


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


def test_reference_fars_are_insightfaces():
    assert list(INSIGHTFACE_FARS) == read_record("insightface", "ijb_readout")["outputs"][
        "x_labels"] == ijb_inputs.IJB_FARS


def test_tar_table_equals_insightfaces_readout():
    scores, labels = ijb_inputs.large()  # 2,000 genuine, 200,000 impostor, ties
    tab = tar_table(scores, labels)
    ref = _readout("large")
    assert tab["tar"].tolist() == ref["tar"]
    assert tab["far_reached"].tolist() == ref["far_reached"]
    assert [f"{t * 100:.2f}" for t in tab["tar"]] == ref["row"]  # the printed row
    assert tab["resolvable"].tolist() == [False, True, True, True, True, True]
    assert tab["text"].iat[0] == "n/a (200000 impostors)"
    # a tiny protocol: the ROC point nearest FAR 0.1 is a tie between FAR 0 and FAR 0.2;
    # insightface's flip takes the later one, the top of the step at FAR 0.2: TAR 1.0
    s, y = ijb_inputs.tiny_step()
    row = tar_table(s, y, [0.1]).iloc[0]
    assert [row["tar"]] == _readout("tiny_step")["tar"] == [1.0]
    assert [row["far_reached"]] == _readout("tiny_step")["far_reached"] == [0.2]
    best = tar_table(s, y, [0.1], readout="at_or_below").iloc[0]
    assert best["tar"] == 0.8 and best["far_reached"] <= 0.1
    x, t = thin_roc(insightface_roc(s, y))  # the plot starts with the TAR at FAR 0
    assert x[0] == 1e-6 and t[0] == 0.8 and t[-1] == 1.0


@pytest.mark.parametrize("k", range(len(ijb_inputs.PERFECT)))
def test_perfect_separation_reads_tar_one_at_every_far(k):
    """The issue's case: a model that separates the template pairs perfectly. The
    reference reads TAR 1.0 at every FAR (the top of the ROC's vertical step at FAR 0);
    taking the bottom of the step wrote 0.0."""
    s, y = ijb_inputs.perfect(k)
    ref = _readout(f"perfect_{k}")
    assert ref["tar"] == [1.0] * 6
    assert tar_table(s, y)["tar"].tolist() == ref["tar"]


def test_readout_equals_insightfaces_on_hostile_rocs():
    """Vertical steps (tied genuine scores), ties across labels, float32 scores, values
    equidistant from a FAR, tiny protocols: insightface's read-out every time, the TAR
    and the FAR of the point it took."""
    for case in range(ijb_inputs.N_HOSTILE):
        s, y = ijb_inputs.hostile(case)
        tab = tar_table(s, y, ijb_inputs.HOSTILE_FARS)
        ref = _readout(f"hostile_{case}")
        assert tab["tar"].tolist() == ref["tar"], case
        assert tab["far_reached"].tolist() == ref["far_reached"], case


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


def test_nearest_index_is_the_last_of_the_nearest_points():
    """Of the points nearest the FAR, the last one (by a full scan, with repeats)."""
    fpr = np.array([0.0, 0.0, 0.1, 0.1, 0.1, 0.3, 0.5, 0.5, 1.0])
    for far in (0.0, 0.05, 0.1, 0.2, 0.4, 0.45, 0.75, 1.0, 2.0, -1.0):
        gap = np.abs(fpr - far)
        expected = int(np.flatnonzero(gap == gap.min())[-1])
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


@pytest.mark.parametrize("name", ["small", "wide"])
def test_pooling_equals_insightfaces_image2template_feature(name):
    """Templates of one or many media, media of one or many images, ids with gaps,
    members in no order: facecast's pooled templates are the reference's, up to the
    float32 rounding of its per-media np.mean (facecast averages in float64)."""
    case = ijb_inputs.pooling_case(name)
    ref = read_record("insightface", "ijb_pooling")["outputs"][name]
    ids = np.array([f"i{k}" for k in range(len(case["raw"]))])
    members = pd.DataFrame({"image_id": ids, "template_id": case["template_id"],
                            "media_id": case["media_id"], "faceness": case["faceness"]})
    table, pooled = build_templates(members, ids, case["raw"], {})
    assert pooled.template_ids.tolist() == ref["templates"]
    want = np.asarray(ref["features"])
    assert np.allclose(pooled.features, want, rtol=0, atol=1e-6)
    assert not np.allclose(pooled.features[:, ::-1], want, rtol=0, atol=1e-6)
    assert (table["status"] == "ok").all() and table["n_images"].sum() == len(ids)
