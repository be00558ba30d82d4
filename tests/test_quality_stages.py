"""The three stage functions on a small synthetic table (no pipeline): every output written,
every input row accounted for, options (refit EDC, mean pair quality) honoured."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from facecast.fairness.demographics import run_demographics
from facecast.identification.stage import run_identification
from facecast.quality.stage import run_edc

FAIRNESS = {
    "protected": {"gender": {"column": "label_male", "bins": [0.5],
                             "labels": ["female", "male"]}},
    "legitimate": {"age": {"column": "label_age", "bins": [40], "labels": ["A0", "A1"]}},
    "sync": "majority", "thresholds": {"fmr_targets": [0.01, 1e-5]},
}


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    rng = np.random.default_rng(0)
    root = tmp_path_factory.mktemp("q")
    n_id, per = 40, 5
    ident = np.repeat([f"id{i:02d}" for i in range(n_id)], per)
    image = np.array([f"{p}/{k}" for p, k in zip(ident, np.tile(np.arange(per), n_id),
                                                 strict=True)])
    blur = rng.random(len(image))
    attrs = pd.DataFrame({"image_id": image, "identity": ident,
                          "label_male": np.repeat(rng.integers(0, 2, n_id), per).astype(float),
                          "label_age": rng.uniform(20, 60, len(image)),
                          "sharpness_laplacian": 1 - blur + 0.05 * rng.random(len(image)),
                          "blur_effect": blur, "yaw": rng.normal(0, 20, len(image))})
    attrs.loc[3, "blur_effect"] = np.nan  # an image without this quality value
    attrs.to_parquet(root / "attributes.parquet")
    centres = rng.standard_normal((n_id, 16))
    emb = centres[np.repeat(np.arange(n_id), per)] + (0.3 + blur[:, None]) * \
        rng.standard_normal((len(image), 16))
    emb /= np.linalg.norm(emb, axis=1, keepdims=True)
    pq.write_table(pa.table({"image_id": image, "embedding": [list(map(float, e))
                                                              for e in emb]}),
                   root / "00000.parquet")
    ia, ib = np.triu_indices(len(image), 1)
    pairs = pd.DataFrame({"image_a": image[ia], "image_b": image[ib],
                          "identity_a": ident[ia], "identity_b": ident[ib]})
    pairs["label"] = (pairs["identity_a"] == pairs["identity_b"]).astype(int)
    pairs["score"] = np.einsum("ij,ij->i", emb[ia], emb[ib])
    pairs["fold"] = (np.arange(len(pairs)) % 5).astype(str)
    pairs.loc[0, "score"] = np.nan  # a pair without a score keeps nothing from working
    pairs.to_parquet(root / "pairs.parquet")
    pd.DataFrame({"image_id": image, "identity": ident}).to_parquet(root / "pool.parquet")
    return root


def test_run_edc_writes_every_output_and_ranks_blur_first(data, tmp_path):
    cfg = {"threshold": {"mode": "fnmr", "value": 0.1}, "n_boot": 5, "refit_threshold": True,
           "discard_limit": 0.3}
    rk = run_edc(data / "pairs.parquet", data / "attributes.parquet", tmp_path, cfg, FAIRNESS,
                 model="m", protocol="p", seed=3)
    for name in ("edc.parquet", "ranking.parquet", "ranking.csv", "ranking.html",
                 "bands.parquet", "threshold.parquet", "refit.parquet", "edc_fnm.png",
                 "edc_fm.png"):
        assert (tmp_path / name).exists(), name
    fnm = rk[(rk["error_type"] == "fnm") & (rk["group"] == "all")].set_index("column")
    assert set(fnm.index) == {"sharpness_laplacian", "blur_effect", "yaw", "random_control"}
    assert fnm.loc["blur_effect", "rank"] < fnm.loc["random_control", "rank"]
    assert fnm.loc["sharpness_laplacian", "rank"] < fnm.loc["random_control", "rank"]
    assert fnm.loc["blur_effect", "n_without_quality"] == 4  # the image with no value
    assert set(rk["group"]) == {"all", "female", "male"}
    refit = pd.read_parquet(tmp_path / "refit.parquet")
    assert refit["variant"].str.contains("NOT the standard").all()
    rk2 = run_edc(data / "pairs.parquet", data / "attributes.parquet", tmp_path / "mean",
                  dict(cfg, pair_quality="mean", n_boot=0), FAIRNESS, model="m",
                  protocol="p", seed=3)
    assert (rk2["pair_quality"] == "mean").all()
    again = run_edc(data / "pairs.parquet", data / "attributes.parquet", tmp_path / "again",
                    cfg, FAIRNESS, model="m", protocol="p", seed=3)
    pd.testing.assert_frame_equal(rk, again)  # same config, same numbers


def test_run_demographics_and_identification(data, tmp_path):
    s = run_demographics(data / "pairs.parquet", data / "attributes.parquet", tmp_path / "d",
                         {"n_boot": 5, "band_points": 11}, FAIRNESS, model="m", protocol="p",
                         seed=1)
    assert s["n_groups"] == 2
    thr = pd.read_parquet(tmp_path / "d/thresholds.parquet")
    assert thr["resolvable"].tolist() == [True, False]
    assert thr["text"].iloc[1].startswith("n/a (")
    cross = pd.read_parquet(tmp_path / "d/cross_fmr.parquet")
    assert set(cross["attribute"]) == {"group", "gender", "age"}
    gt = pd.read_parquet(tmp_path / "d/group_thresholds.parquet")
    assert {"deviation_group_cv", "deviation_global_lo"} <= set(gt.columns)
    summary = run_identification(data / "pool.parquet", [data / "00000.parquet"],
                                 data / "attributes.parquet", tmp_path / "i",
                                 {"ranks": [1, 5], "fpir_targets": [0.1, 0.01],
                                  "device": "cpu"}, FAIRNESS, model="m", seed=2)
    assert summary["n_gallery"] == 32 and summary["n_nonmated"] == 40
    fn = pd.read_parquet(tmp_path / "i/fnir.parquet")
    assert fn.loc[fn["target_fpir"] == 0.01, "text"].str.startswith("n/a").all()
    proto = pd.read_parquet(tmp_path / "i/protocol.parquet")
    assert len(proto) == 200
