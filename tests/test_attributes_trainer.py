"""The attribute-head trainer: metrics by hand, overfitting a tiny labelled set."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch
from sklearn.metrics import (
    accuracy_score,
    balanced_accuracy_score,
    f1_score,
    precision_score,
    recall_score,
)

from facecast.attributes.heads import MultiLabelHead
from facecast.attributes.inputs import faces_table
from facecast.attributes.pose import project_face
from facecast.attributes.trainer import (
    augment,
    binary_label_columns,
    evaluation_table,
    train_attribute_model,
)
from facecast.datasets.manifest import write_manifest
from facecast.io.parquet_io import read_parquet, write_parquet


def test_evaluation_table_matches_hand_computation():
    y = np.array([[1, 0], [1, 1], [0, np.nan], [0, 0], [1, 0]], float)
    p = np.array([[0.9, 0.2], [0.4, 0.7], [0.6, 0.9], [0.1, 0.6], [0.8, 0.1]])
    t = evaluation_table(y, p, ["a", "b"]).set_index("attribute")
    # attribute a: tp=2 (rows 0,4), fn=1 (row 1), fp=1 (row 2), tn=1 (row 3)
    assert t.loc["a", "precision"] == pytest.approx(2 / 3)
    assert t.loc["a", "recall"] == pytest.approx(2 / 3)
    assert t.loc["a", "f1"] == pytest.approx(2 / 3)
    assert t.loc["a", "accuracy"] == pytest.approx(3 / 5)
    assert t.loc["a", "balanced_accuracy"] == pytest.approx(0.5 * (2 / 3 + 1 / 2))
    assert t.loc["a", "pct_positive"] == pytest.approx(60.0)
    # attribute b ignores the NaN row: truth [0,1,0,0], predicted [0,1,1,0]
    assert t.loc["b", "n_eval"] == 4
    for col, fn in [("f1", f1_score), ("precision", precision_score), ("recall", recall_score),
                    ("accuracy", accuracy_score), ("balanced_accuracy", balanced_accuracy_score)]:
        assert t.loc["b", col] == pytest.approx(fn([0, 1, 0, 0], [0, 1, 1, 0])), col
    assert list(t.columns[:1]) == ["f1"]  # F1 reported first


def test_binary_label_columns():
    df = pd.DataFrame({"label_a": [0, 1, np.nan], "label_b": [0.2, 1, 0], "label_c": [True, False, True],
                       "other": [0, 1, 0]})
    assert binary_label_columns(df) == ["label_a", "label_c"]
    assert binary_label_columns(df, ["a"]) == ["label_a"]
    with pytest.raises(ValueError, match="not binary"):
        binary_label_columns(df, ["b"])


def test_augment_keeps_shape_and_is_seeded():
    x = torch.rand(4, 3, 32, 32)
    a = augment(x, torch.Generator().manual_seed(3))
    b = augment(x, torch.Generator().manual_seed(3))
    assert a.shape == x.shape and torch.equal(a, b)
    assert not torch.equal(a, x)


def _tiny_dataset(tmp_path, n=24, split=None):
    """Crops whose two labels are visible: a bright top half (label_bright) and a red
    tint (label_red); each image its own identity; 2/3 train, 1/3 test."""
    rng = np.random.default_rng(0)
    crops, bright, red = [], [], []
    for i in range(n):
        b, r = i % 2, (i // 2) % 2
        img = rng.integers(40, 90, (112, 112, 3)).astype(np.uint8)
        if b:
            img[:56] += 120
        if r:
            img[..., 0] = np.clip(img[..., 0].astype(int) + 100, 0, 255)
        crops.append(img)
        bright.append(b)
        red.append(r)
    ids = [f"img{i:02d}.jpg" for i in range(n)]
    lm = np.stack([project_face(centre=(56, 70))] * n)
    faces = write_parquet(faces_table(ids, crops, lm, np.array([[0, 0, 112, 112.0]] * n)),
                          tmp_path / "faces" / "00000.parquet")
    manifest = pd.DataFrame({
        "image_id": ids, "path": ids, "identity": ids, "shard": ["00000"] * n,
        "split": split or ["train" if i % 3 else "test" for i in range(n)], "exclude": [False] * n,
        "status": ["ok"] * n, "message": [""] * n, "single_image": [True] * n,
        "label_bright": np.array(bright, float), "label_red": np.array(red, float),
        "label_age": rng.uniform(20, 60, n),
    })
    return write_manifest(manifest, tmp_path / "manifest.parquet", shard_size=n), faces


def test_trainer_overfits_a_tiny_set_and_writes_a_loadable_checkpoint(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch"))  # no ImageNet start here
    n = 16
    manifest, faces = _tiny_dataset(tmp_path, n=n, split=["train"] * n)
    # 20 epochs: with 10, whether the red tint is learnt depended on the CPU's float paths
    # (f1 0.67-1.0 across thread counts and machines); 20 learn both labels everywhere
    cfg = {"input_size": 32, "epochs": 20, "batch_size": 4, "lr": 0.02}
    out = tmp_path / "model"
    table = train_attribute_model(manifest, [str(faces)], out / "checkpoint.pt",
                                  out / "evaluation.parquet", out / "evaluation.md", cfg,
                                  seed=7)
    assert table["attribute"].tolist() == ["bright", "red"]  # label_age is not binary
    assert table["f1"].mean() > 0.9, table.to_string()
    stored = read_parquet(out / "evaluation.parquet")
    pd.testing.assert_frame_equal(stored, table)
    md = (out / "evaluation.md").read_text()
    assert md.index("Mean per-attribute F1") < md.index("| attribute |")
    assert "evaluated on the training set" in md
    head = MultiLabelHead(out / "checkpoint.pt")
    assert head.columns == ["bright", "red"]
    from facecast.attributes.inputs import read_faces

    probs = head.predict(read_faces(faces).crops)
    truth = (np.arange(n) % 2).astype(bool)
    assert ((probs["bright"] > 0.5) == truth).mean() > 0.9


def test_trainer_is_deterministic_and_evaluates_held_out_rows(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch"))
    manifest, faces = _tiny_dataset(tmp_path, n=9)
    cfg = {"input_size": 32, "epochs": 1, "batch_size": 4}
    tables = [train_attribute_model(manifest, [str(faces)], tmp_path / f"c{k}.pt",
                                    tmp_path / f"e{k}.parquet", tmp_path / f"e{k}.md", cfg,
                                    seed=3) for k in (1, 2)]
    pd.testing.assert_frame_equal(tables[0], tables[1])
    assert (tables[0]["n_eval"] == 3).all() and (tables[0]["n_train"] == 6).all()
    sd1 = torch.load(tmp_path / "c1.pt", weights_only=True)["state_dict"]
    sd2 = torch.load(tmp_path / "c2.pt", weights_only=True)["state_dict"]
    assert all(torch.equal(sd1[k], sd2[k]) for k in sd1)


def test_trainer_requires_a_train_split(tmp_path):
    manifest, faces = _tiny_dataset(tmp_path, n=6)
    m = read_parquet(manifest)
    m["split"] = "test"
    mpath = write_manifest(m, tmp_path / "m2.parquet", shard_size=6)
    with pytest.raises(ValueError, match="split == 'train'"):
        train_attribute_model(mpath, [str(faces)], tmp_path / "c.pt", tmp_path / "e.parquet",
                              tmp_path / "e.md", {"epochs": 1}, seed=1)
