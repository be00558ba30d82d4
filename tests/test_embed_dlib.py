"""Embedders on real face photos (tests/data photos, skimage astronaut, matplotlib grace_hopper).

Crops come from the faces stage's own functions (MTCNN detection + ArcFace alignment).
A "second photo" of a person is the photo rescaled to 80 % and brightened, aligned again
from its (rescaled) landmarks jittered by up to 2 px (new geometry, new resampling); a
mirror image is a third view.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from matplotlib import cbook
from PIL import Image, ImageEnhance
from skimage.data import astronaut

from facecast.embed.dlib_resnet import (
    DLIB_CHIP_SIZE,
    DlibEmbedder,
    arcface_to_dlib_chips,
    default_dlib_weights,
)
from facecast.embed.lbp import lbp_features
from facecast.faces.align import align_arcface
from facecast.faces.detect import FaceDetector

MAX_SIDE = 360  # portraits: faces stay well above 112 px, detection stays fast


def _small(im: Image.Image) -> np.ndarray:
    im = im.convert("RGB")
    im.thumbnail((MAX_SIDE, MAX_SIDE), Image.Resampling.LANCZOS)
    return np.asarray(im)


def _photos(shared: Path) -> dict[str, np.ndarray]:
    out = {p.parent.name: _small(Image.open(p)) for p in sorted((shared / "faces").glob("*/1.jpg"))}
    out["astronaut"] = _small(Image.fromarray(astronaut()))
    with cbook.get_sample_data("grace_hopper.jpg") as fh:
        out["grace_hopper"] = _small(Image.open(fh))
    return out


def _variant(img: np.ndarray) -> np.ndarray:
    im = Image.fromarray(img)
    im = im.resize((int(im.width * 0.8), int(im.height * 0.8)), Image.Resampling.BICUBIC)
    return np.asarray(ImageEnhance.Brightness(im).enhance(1.25))


@pytest.fixture(scope="module")
def real_faces(shared_fixtures):
    photos = _photos(shared_fixtures)
    names = list(photos)
    det = FaceDetector({"device": "cpu"})
    rng = np.random.default_rng(0)
    crops, variants = [], []
    for name, d in zip(names, det.detect([photos[n] for n in names]), strict=True):
        assert len(d) > 0, f"MTCNN found no face in {name}"
        best = int(np.argmax((d.boxes[:, 2] - d.boxes[:, 0]) * (d.boxes[:, 3] - d.boxes[:, 1])))
        crops.append(align_arcface(photos[name], d.landmarks[best]))
        moved = d.landmarks[best] * 0.8 + rng.uniform(-2, 2, (5, 2))
        variants.append(align_arcface(_variant(photos[name]), moved))
    return {"names": names, "photos": photos, "crops": np.stack(crops),
            "variants": np.stack(variants)}


def _dist(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.linalg.norm(a[:, None] - b[None], axis=-1)


def test_weights_found_in_wheel_without_import():
    path = default_dlib_weights()
    assert path is not None and path.is_file()
    assert path.name == "dlib_face_recognition_resnet_model_v1.dat"


def test_dlib_mirror_and_second_photo_closer_than_other_people(real_faces):
    emb = DlibEmbedder("dlib")
    crops = torch.from_numpy(real_faces["crops"])
    base = emb.embed(crops)
    mirror = emb.embed(torch.flip(crops, dims=[2]))
    second = emb.embed(torch.from_numpy(real_faces["variants"]))
    assert base.shape == (len(crops), 128) and np.isfinite(base).all()
    unit = base / np.linalg.norm(base, axis=1, keepdims=True)
    others = _dist(unit, unit)
    np.fill_diagonal(others, np.inf)
    nearest_other = others.min(axis=1)
    for view in (mirror, second):
        v = view / np.linalg.norm(view, axis=1, keepdims=True)
        same = np.linalg.norm(unit - v, axis=1)
        assert np.all(same < nearest_other), (real_faces["names"], same, nearest_other)
    # the same photo embeds to the same vector every time
    np.testing.assert_array_equal(emb.embed(crops), base)


def test_our_chips_match_dlibs_own_alignment(real_faces):
    """Descriptors of chips resampled from our ArcFace crops stay close to descriptors of
    the chips dlib cuts itself (its detector, 5-point shape, get_face_chip)."""
    import dlib

    models = default_dlib_weights().parent
    detector = dlib.get_frontal_face_detector()
    shape5 = dlib.shape_predictor(str(models / "shape_predictor_5_face_landmarks.dat"))
    emb = DlibEmbedder("dlib")
    own = []
    for name in real_faces["names"]:
        img = real_faces["photos"][name]
        rects = detector(img, 0)
        assert rects, name
        rect = max(rects, key=lambda r: r.area())
        own.append(dlib.get_face_chip(img, shape5(img, rect), size=DLIB_CHIP_SIZE, padding=0.25))
    own_vec = emb.embed_chips(np.stack(own))
    ours = arcface_to_dlib_chips(torch.from_numpy(real_faces["crops"]))
    assert ours.shape == (len(own), 150, 150, 3) and ours.dtype == np.uint8
    ours_vec = emb.embed_chips(ours)
    d = _dist(own_vec, ours_vec)  # dlib's raw descriptors: same person < 0.6
    assert np.all(np.diag(d) < 0.4), np.diag(d)
    off = d + np.diag(np.full(len(d), np.inf))
    assert np.all(np.diag(d) < off.min(axis=1))


def test_lbp_second_photo_more_similar_than_other_people(real_faces):
    base = lbp_features(real_faces["crops"])
    second = lbp_features(real_faces["variants"])
    centre = np.concatenate([base, second]).mean(0)
    a = base - centre
    b = second - centre
    a /= np.linalg.norm(a, axis=1, keepdims=True)
    b /= np.linalg.norm(b, axis=1, keepdims=True)
    sim = a @ b.T
    off = sim - np.diag(np.full(len(sim), np.inf))
    assert np.all(np.diag(sim) > off.max(axis=1)), sim.round(2)
    np.testing.assert_array_equal(lbp_features(real_faces["crops"]), base)


def test_dlib_jobs_ask_for_one_thread():
    """dlib-bin's descriptor computes on one core holding the GIL (measured by
    benchmarks/embed_throughput.py: two Python threads are no faster than one), so an embed
    job on dlib's engine (``engine: dlib``) asks Snakemake for 1 thread; dlib_resnet's
    default torch engine and other backends for embed.threads."""
    from facecast.embed.targets import SINGLE_CORE_BACKENDS, job_threads

    assert job_threads({"backend": "dlib_resnet", "engine": "dlib"}, {"threads": 4}) == 1
    assert job_threads({"backend": "dlib_resnet"}, {"threads": 4}) == 4
    assert job_threads({"backend": "lbp"}, {"threads": 4}) == 4
    assert job_threads({"backend": "iresnet"}, {"threads": 2}) == 2
    assert SINGLE_CORE_BACKENDS == {"dlib_resnet"}
