"""Landmark features (issue 14): measurements, invariances, shrinkage, real photos."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from PIL import Image

from facecast.attributes.landmarks68 import head_pose, measurements, normalise_shapes
from facecast.attributes.ofiq_landmarks import fit_68, load_predictor
from facecast.labels.features import icc1, percentile_of, prominent_labels, shrink


def mean_shape() -> np.ndarray:
    """A symmetric, anatomically ordered 68-point face (x right, y down, pixels)."""
    p = np.zeros((68, 2))
    for i in range(17):  # jaw: ear to ear through the chin
        t = np.pi * i / 16
        p[i] = [-70 * np.cos(t), 10 + 80 * np.sin(t)]
    for i in range(5):  # brows, image-left then image-right, arched
        p[17 + i] = [-60 + 10 * i, -40 - 6 * np.sin(np.pi * i / 4)]
        p[22 + i] = [20 + 10 * i, -40 - 6 * np.sin(np.pi * i / 4)]
    p[27:31] = [[0, -25], [0, -10], [0, 5], [0, 20]]  # nose bridge to tip
    p[31:36] = [[-14, 28], [-7, 30], [0, 32], [7, 30], [14, 28]]  # nose base
    for base, cx in ((36, -35), (42, 35)):  # eyes: outer/inner corner order as in iBUG
        xs = [-12, -6, 6, 12, 6, -6]
        ys = [0, -5, -5, 0, 4, 4]
        for k in range(6):
            p[base + k] = [cx + xs[k], -20 + ys[k]]
    outer = [(-25, 55), (-15, 50), (-6, 48), (0, 49), (6, 48), (15, 50), (25, 55), (15, 62),
             (6, 65), (0, 66), (-6, 65), (-15, 62)]
    p[48:60] = outer
    inner = [(-20, 55), (-6, 53), (0, 54), (6, 53), (20, 55), (6, 58), (0, 59), (-6, 58)]
    p[60:68] = inner
    return p


def test_measurements_are_rotation_scale_translation_invariant():
    p = mean_shape()
    base = measurements(p[None])
    ang = np.radians(23.0)
    rot = np.array([[np.cos(ang), -np.sin(ang)], [np.sin(ang), np.cos(ang)]])
    q = (p @ rot.T) * 3.7 + [120.0, -40.0]
    moved = measurements(q[None])
    for k in base:
        assert moved[k][0] == pytest.approx(base[k][0], rel=1e-9, abs=1e-9), k
    norm, ied = normalise_shapes(q[None])
    assert ied[0] == pytest.approx(70.0 * 3.7)
    np.testing.assert_allclose(norm[0, 42:48].mean(0) - norm[0, 36:42].mean(0), [1.0, 0.0],
                               atol=1e-12)


def test_widening_the_nose_raises_its_percentile():
    rng = np.random.default_rng(0)
    shapes = np.stack([mean_shape() + rng.normal(0, 1.0, (68, 2)) for _ in range(200)])
    pop = measurements(shapes)["nose_width"]
    p = mean_shape()
    wide = p.copy()
    wide[31:36, 0] *= 1.3  # alar points further out
    before = percentile_of(measurements(p[None])["nose_width"], pop)[0]
    after = percentile_of(measurements(wide[None])["nose_width"], pop)[0]
    assert after > before and after > 0.95
    m = measurements(np.stack([p, wide]))
    assert m["nose_height"][0] == pytest.approx(m["nose_height"][1])  # only width moved
    labels = prominent_labels(pd.DataFrame({"p_nose_width": [before, after]}), 0.1, 0.9)
    assert "wide nose" in labels[1] and "wide nose" not in labels[0]


def test_brow_arch_sign_and_frontal_pose():
    p = mean_shape()
    flat = p.copy()
    flat[17:27, 1] = -40
    m = measurements(np.stack([p, flat]))
    assert m["brow_arch"][0] > 0.02 and abs(m["brow_arch"][1]) < 1e-9
    pose = head_pose((p * 1.5 + 150)[None], 300.0)[0]
    assert abs(pose[2]) < 3.0  # roll of a level face


def test_shrinkage_limits():
    rng = np.random.default_rng(1)
    mu_g = rng.normal(0, 1, 200)
    groups = np.repeat(np.arange(200), 2)
    vals = mu_g[groups] + rng.normal(0, 1, groups.size)
    # a new identity with n images at +3: estimate -> sample mean as n grows
    for n, tol in ((1, None), (400, 0.02)):
        g2 = np.r_[groups, np.full(n, 999)]
        v2 = np.r_[vals, np.full(n, 3.0) + rng.normal(0, 1, n) * (n > 1)]
        sh = shrink(v2, g2).set_index("group").loc[999]
        if tol is None:  # one image: pulled toward the prior by B = tau2 / (tau2 + s2)
            b = sh["tau2"] / (sh["tau2"] + sh["s2"])
            assert sh["weight"] == pytest.approx(b)
            assert sh["estimate"] == pytest.approx(sh["mu"] + b * (sh["mean"] - sh["mu"]))
            assert abs(sh["estimate"] - sh["mu"]) < abs(sh["mean"] - sh["mu"])
        else:
            assert sh["weight"] > 0.99
            assert sh["estimate"] == pytest.approx(sh["mean"], abs=tol)
    # no between-identity spread: every identity collapses to the prior mean
    flat = shrink(rng.normal(0, 1, 400), np.repeat(np.arange(200), 2))
    assert np.allclose(flat["estimate"], flat["mu"], atol=0.15)


def test_icc_separates_reliable_from_noise():
    rng = np.random.default_rng(2)
    g = np.repeat(np.arange(100), 4)
    good = rng.normal(0, 1, 100)[g] + rng.normal(0, 0.3, g.size)
    noise = rng.normal(0, 1, g.size)
    assert icc1(good, g)[0] > 0.85 and abs(icc1(noise, g)[0]) < 0.1
    assert np.isnan(icc1(np.arange(3.0), np.arange(3))[0])  # no identity with 2 images


@pytest.fixture(scope="module")
def real_faces():
    """Real photos: the vendored test portraits plus skimage's astronaut."""
    from conftest import REPO
    from skimage import data

    from facecast.faces.detect import FaceDetector

    images = [np.asarray(Image.open(p).convert("RGB"))
              for p in sorted((REPO / "tests" / "data" / "faces").glob("*/1.jpg"))]
    images.append(data.astronaut())
    det = FaceDetector({"device": "cpu"})
    out = []
    for img in images:
        d = det.detect([img])[0]
        assert len(d.boxes), "no face found in a test photo"
        best = int(np.argmax((d.boxes[:, 2] - d.boxes[:, 0]) * (d.boxes[:, 3] - d.boxes[:, 1])))
        out.append((img, d.boxes[best]))
    return out


def test_landmarks_on_real_photos_inside_box_and_in_order(real_faces):
    pred = load_predictor()
    for img, box in real_faces:
        p = fit_68(pred, img, box)
        w, h = box[2] - box[0], box[3] - box[1]
        # inside the detector box, with 10 % slack (the chin can sit on its lower edge)
        assert (p[:, 0] >= box[0] - 0.1 * w).all() and (p[:, 0] <= box[2] + 0.1 * w).all()
        assert (p[:, 1] >= box[1] - 0.1 * h).all() and (p[:, 1] <= box[3] + 0.1 * h).all()
        y = p[:, 1]
        assert y[17:27].mean() < y[36:48].mean() < y[30] < y[48:68].mean() < y[8]
        assert p[36, 0] < p[39, 0] < p[42, 0] < p[45, 0]  # eyes left to right
        assert p[48, 0] < p[51, 0] < p[54, 0] and p[31, 0] < p[33, 0] < p[35, 0]
        assert p[0, 0] < p[8, 0] < p[16, 0]
        m = measurements(p[None])
        assert all(np.isfinite(v[0]) for v in m.values())
        assert 0.3 < m["nose_width"][0] < 0.8 and 0.6 < m["mouth_width"][0] < 1.3


def test_pnp_recovers_a_known_pose():
    from scipy.spatial.transform import Rotation

    from facecast.attributes.landmarks68 import _MODEL_3D, _PNP_POINTS

    model = _MODEL_3D * [1.0, -1.0, -1.0]
    truth = np.array([[20.0, -10.0, 5.0], [-15.0, 8.0, -12.0], [0.0, 0.0, 0.0]])
    shapes = np.full((len(truth), 68, 2), np.nan)
    for i, (yaw, pitch, roll) in enumerate(truth):
        rot = Rotation.from_euler("ZYX", [roll, yaw, pitch], degrees=True).as_matrix()
        cam = model @ rot.T + [10.0, -5.0, 1500.0]
        shapes[i, _PNP_POINTS] = 400.0 * cam[:, :2] / cam[:, 2:] + 200.0
    np.testing.assert_allclose(head_pose(shapes, 400.0), truth, atol=0.05)
