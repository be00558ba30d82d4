"""The procedural synthetic face dataset: determinism, table contract, planted effects,
and that a real detector (facenet-pytorch MTCNN) finds its faces."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from facenet_pytorch import MTCNN
from PIL import Image

from facecast.datasets.stage import read_raw_rows
from facecast.datasets.synthetic.effects import glasses_probability
from facecast.datasets.synthetic.generate import generate_dataset
from facecast.datasets.synthetic.sampling import sample_covariates, sample_identity
from facecast.datasets.synthetic.truth import identity_name
from facecast.io.parquet_io import read_parquet, read_provenance

N_ID, N_IMG, SIZE = 8, 3, 128
IDENTITY_LABELS = ["skin_tone", "male", "age", "eye_spacing", "nose_width", "mouth_width",
                   "face_aspect", "hair_grey", "wrinkles", "beard", "hair_long", "bald",
                   "dark_skin", "low_contrast_group"]
IMAGE_LABELS = ["yaw", "roll", "scale", "blur", "noise", "illumination", "light_direction",
                "jpeg_quality", "glasses", "hat", "smile"]


@pytest.fixture(scope="module")
def small_dataset(tmp_path_factory):
    """The same tiny dataset generated twice (1 and 2 processes) and once with another seed."""
    root = tmp_path_factory.mktemp("synthetic")
    a = generate_dataset(root / "a", seed=5, n_jobs=1, n_identities=N_ID,
                         images_per_identity=N_IMG, image_size=SIZE,
                         provenance={"config_hash": "abc"})
    b = generate_dataset(root / "b", seed=5, n_jobs=2, n_identities=N_ID,
                         images_per_identity=N_IMG, image_size=SIZE)
    c = generate_dataset(root / "c", seed=6, n_jobs=1, n_identities=N_ID,
                         images_per_identity=N_IMG, image_size=SIZE)
    return root, a, b, c


def test_same_seed_gives_identical_table_and_image_bytes(small_dataset):
    root, a, b, _ = small_dataset
    pd.testing.assert_frame_equal(a, b)
    pd.testing.assert_frame_equal(read_parquet(root / "a" / "truth.parquet"),
                                  read_parquet(root / "b" / "truth.parquet"))
    for rel in a["path"]:
        assert (root / "a" / rel).read_bytes() == (root / "b" / rel).read_bytes(), rel


def test_another_seed_gives_other_people_and_images(small_dataset):
    root, a, _, c = small_dataset
    assert not np.allclose(a["label_age"], c["label_age"])
    differing = sum((root / "a" / p).read_bytes() != (root / "c" / p).read_bytes()
                    for p in a["path"])
    assert differing == len(a)


def test_truth_table_contract(small_dataset):
    root, a, _, _ = small_dataset
    on_disk = read_parquet(root / "a" / "truth.parquet")
    pd.testing.assert_frame_equal(on_disk, a)
    assert len(a) == N_ID * N_IMG
    assert list(a.columns[:4]) == ["path", "identity", "split", "exclude"]
    expected = {f"label_{n}" for n in IDENTITY_LABELS + IMAGE_LABELS}
    assert set(a.columns[4:]) == expected
    for col in expected:
        assert a[col].dtype == np.float64, col
        assert a[col].notna().all(), col
    assert a["exclude"].dtype == bool
    assert a["identity"].tolist() == [identity_name(i) for i in range(N_ID) for _ in range(N_IMG)]
    assert a["path"].tolist() == [f"images/{identity_name(i)}/{k}.jpg"
                                  for i in range(N_ID) for k in range(N_IMG)]
    for rel in a["path"]:
        with Image.open(root / "a" / rel) as im:
            assert im.format == "JPEG" and im.mode == "RGB" and im.size == (SIZE, SIZE)
    # identity traits are constant within an identity, covariates vary
    per_id = a.groupby("identity")
    for col in IDENTITY_LABELS:
        assert (per_id[f"label_{col}"].nunique() == 1).all(), col
    assert (per_id["label_yaw"].nunique() == N_IMG).all()
    # one identity in four is train + excluded, decided per identity
    split = per_id["split"].first()
    assert (split == "train").sum() == N_ID // 4
    assert set(split) == {"train", "test"}
    assert (a["exclude"] == (a["split"] == "train")).all()
    assert read_provenance(root / "a" / "truth.parquet")["stage"] == "synthetic_dataset"
    assert read_provenance(root / "a" / "truth.parquet")["config_hash"] == "abc"


def test_manifest_adapter_reads_truth(small_dataset):
    root, a, _, _ = small_dataset
    raw = read_raw_rows({"kind": "synthetic"}, root / "a")
    assert raw["path"].tolist() == a["path"].tolist()
    assert {f"label_{n}" for n in IMAGE_LABELS} <= set(raw.columns)


def test_bad_sizes_are_refused(tmp_path):
    with pytest.raises(ValueError, match="n_identities"):
        generate_dataset(tmp_path, seed=1, n_identities=0)
    with pytest.raises(ValueError, match="image_size"):
        generate_dataset(tmp_path, seed=1, n_identities=2, image_size=8)
    assert not (tmp_path / "truth.parquet").exists()


def _sample_labels(n: int, seed: int = 3) -> pd.DataFrame:
    """Traits and covariates drawn exactly as the generator draws them (no rendering)."""
    rows = []
    for i in range(n):
        rng = np.random.default_rng([seed, i])
        t = sample_identity(rng)
        c = sample_covariates(rng, t)
        rows.append({"age": t.age, "male": t.male, "glasses": c.glasses, "hat": c.hat,
                     "noise": c.noise, "illumination": c.illumination, "blur": c.blur,
                     "group": t.low_contrast_group, "skin": t.skin_tone})
    return pd.DataFrame(rows)


def test_planted_label_effects():
    df = _sample_labels(2000)
    assert df["age"].corr(df["glasses"]) > 0.45  # effect 1: glasses rise with age
    assert df.loc[df.age > 65, "glasses"].mean() > 0.8
    assert df.loc[df.age < 30, "glasses"].mean() < 0.1
    assert glasses_probability(50.0) == pytest.approx(0.5)
    strong = df["blur"] >= 1.5  # effect 2: a strongly blurred share
    assert 0.25 < strong.mean() < 0.35
    assert df["illumination"].corr(df["noise"]) < -0.8  # effect 4: low light, more noise
    assert df.loc[df.male == 1, "hat"].mean() > 2 * df.loc[df.male == 0, "hat"].mean()
    group = (df["male"] == 0) & (df["skin"] >= 0.5)  # effect 3: the protected group
    assert (df["group"] == group).all()
    assert 0.18 < group.mean() < 0.32


@pytest.fixture(scope="module")
def contrast_dataset(tmp_path_factory):
    """Enough identities at full size to compare the planted group with the others."""
    root = tmp_path_factory.mktemp("contrast")
    table = generate_dataset(root, seed=11, n_jobs=2, n_identities=24,
                             images_per_identity=2, image_size=160)
    return root, table


def _face_rms_contrast(path) -> float:
    """RMS contrast (std of grey levels in [0, 1]) of the central face box."""
    with Image.open(path) as im:
        grey = np.asarray(im.convert("L"), dtype=np.float64) / 255.0
    s = grey.shape[0]
    # the face centre is at (0.5, 0.46) x size +- 5 %, its half-width >= 0.176 x size
    box = grey[int(0.36 * s):int(0.58 * s), int(0.4 * s):int(0.6 * s)]
    return float(box.std())


def test_low_contrast_group_has_lower_face_contrast(contrast_dataset):
    root, table = contrast_dataset
    table = table.assign(rms=[_face_rms_contrast(root / p) for p in table["path"]])
    group = table["label_low_contrast_group"] == 1
    dark_men = (table["label_dark_skin"] == 1) & (table["label_male"] == 1)
    assert group.sum() >= 4 and dark_men.sum() >= 4
    assert table.loc[group, "rms"].median() < 0.8 * table.loc[~group, "rms"].median()
    assert table.loc[group, "rms"].median() < 0.85 * table.loc[dark_men, "rms"].median()


def test_mtcnn_finds_the_faces(contrast_dataset):
    root, table = contrast_dataset
    mtcnn = MTCNN(min_face_size=20, device="cpu")
    sample = table.iloc[::3].head(16)
    imgs = np.stack([np.asarray(Image.open(root / p).convert("RGB")) for p in sample["path"]])
    boxes, _ = mtcnn.detect(imgs)
    found = np.array([b is not None for b in boxes])
    assert found.mean() >= 0.8, f"MTCNN found {found.sum()} of {len(found)} faces"
    # the boxes sit on the face: centred near the rendered face centre
    for b in boxes:
        if b is not None:
            cx, cy = (b[0][0] + b[0][2]) / 2 / 160, (b[0][1] + b[0][3]) / 2 / 160
            assert 0.35 < cx < 0.65 and 0.3 < cy < 0.7
