"""Alignment maths and crops: Umeyama fit, warp convention, ArcFace and facenet crops."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image
from scipy import ndimage

from facecast.faces.align import (
    ARCFACE_TEMPLATE_112,
    align_arcface,
    arcface_template,
    center_square_box,
    crop_box_resized,
    crop_facenet,
    invert_affine,
    similarity_transform,
    warp_affine,
)


def _similarity(scale: float, angle: float, tx: float, ty: float) -> np.ndarray:
    c, s = np.cos(angle), np.sin(angle)
    return np.array([[scale * c, -scale * s, tx], [scale * s, scale * c, ty]])


def _apply(m: np.ndarray, pts: np.ndarray) -> np.ndarray:
    return pts @ m[:, :2].T + m[:, 2]


def test_template_is_the_insightface_one():
    assert ARCFACE_TEMPLATE_112.shape == (5, 2) and ARCFACE_TEMPLATE_112.dtype == np.float32
    assert ARCFACE_TEMPLATE_112[0].tolist() == pytest.approx([38.2946, 51.6963], abs=1e-4)
    assert ARCFACE_TEMPLATE_112[4].tolist() == pytest.approx([70.7299, 92.2041], abs=1e-4)
    assert np.allclose(arcface_template(224), ARCFACE_TEMPLATE_112 * 2)


@pytest.mark.parametrize("scale,angle,tx,ty", [
    (1.0, 0.0, 0.0, 0.0), (3.7, 0.4, 120.0, -35.0), (0.45, -2.9, 7.5, 300.0),
    (12.0, np.pi / 2, -50.0, 10.0)])
def test_known_similarity_is_recovered_exactly(scale, angle, tx, ty):
    truth = _similarity(scale, angle, tx, ty)
    landmarks = _apply(truth, ARCFACE_TEMPLATE_112.astype(np.float64))
    # landmarks -> template must be the exact inverse of the generating transform
    m = similarity_transform(landmarks, ARCFACE_TEMPLATE_112)
    assert np.allclose(m, invert_affine(truth), atol=1e-9)
    assert np.allclose(_apply(m, landmarks), ARCFACE_TEMPLATE_112, atol=1e-4)


def test_least_squares_with_noise_beats_any_perturbation():
    rng = np.random.default_rng(0)
    src = _apply(_similarity(2.0, 0.3, 40, 60), ARCFACE_TEMPLATE_112.astype(np.float64))
    src = src + rng.normal(0, 1.5, src.shape)
    m = similarity_transform(src, ARCFACE_TEMPLATE_112)
    best = np.sum((_apply(m, src) - ARCFACE_TEMPLATE_112) ** 2)
    for _ in range(50):  # no nearby similarity has a smaller squared error
        d = _similarity(1 + rng.normal(0, 0.01), rng.normal(0, 0.01), *rng.normal(0, 0.3, 2))
        m2 = np.vstack([d, [0, 0, 1]]) @ np.vstack([m, [0, 0, 1]])
        assert np.sum((_apply(m2[:2], src) - ARCFACE_TEMPLATE_112) ** 2) >= best - 1e-9


def test_reflection_is_never_returned():
    mirrored = ARCFACE_TEMPLATE_112 * np.array([-1.0, 1.0])
    m = similarity_transform(mirrored, ARCFACE_TEMPLATE_112)
    assert np.linalg.det(m[:, :2]) > 0


@pytest.mark.parametrize("bad", [np.zeros((5, 2)), np.full((5, 2), np.nan), np.zeros((1, 2))])
def test_degenerate_landmarks_raise(bad):
    with pytest.raises(ValueError):
        similarity_transform(bad, ARCFACE_TEMPLATE_112[: len(bad)])


def _smooth_image(h=200, w=240, seed=0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    img = rng.random((h, w, 3)) * 255
    return ndimage.gaussian_filter(img, (3, 3, 0)).astype(np.uint8)


def test_warp_matches_index_convention_reference():
    img = _smooth_image()
    m = _similarity(1.3, 0.3, -40, -80)
    out = warp_affine(img, m, (112, 112))
    inv = invert_affine(m)
    yy, xx = np.mgrid[0:112, 0:112]
    sx = inv[0, 0] * xx + inv[0, 1] * yy + inv[0, 2]
    sy = inv[1, 0] * xx + inv[1, 1] * yy + inv[1, 2]
    ref = np.stack([ndimage.map_coordinates(img[..., c].astype(float), [sy, sx], order=1)
                    for c in range(3)], -1)
    inside = (sx > 1) & (sx < img.shape[1] - 2) & (sy > 1) & (sy < img.shape[0] - 2)
    assert inside.mean() > 0.9
    assert np.abs(out.astype(float) - ref)[inside].max() <= 1.0


def _dots_image(points: np.ndarray, shape=(900, 900)) -> np.ndarray:
    img = np.zeros((*shape, 3), np.uint8)
    yy, xx = np.mgrid[0:shape[0], 0:shape[1]]
    for (x, y), colour in zip(points, [(255, 0, 0), (0, 255, 0), (0, 0, 255),
                                       (255, 255, 0), (0, 255, 255)], strict=True):
        blob = np.exp(-((xx - x) ** 2 + (yy - y) ** 2) / (2 * 4.0 ** 2))
        img = np.maximum(img, (blob[..., None] * np.array(colour)).astype(np.uint8))
    return img


@pytest.mark.parametrize("scale,angle", [(4.0, 0.35), (1.0, -0.2), (0.8, 1.2)])
def test_align_arcface_puts_landmarks_on_the_template(scale, angle):
    truth = _similarity(scale, angle, 450 - scale * 56, 450 - scale * 72)
    landmarks = _apply(truth, ARCFACE_TEMPLATE_112.astype(np.float64))
    crop = align_arcface(_dots_image(landmarks), landmarks)
    assert crop.shape == (112, 112, 3) and crop.dtype == np.uint8
    channels = [(0,), (1,), (2,), (0, 1), (1, 2)]
    for (tx, ty), chans in zip(ARCFACE_TEMPLATE_112, channels, strict=True):
        # centroid of the dot's colour near its template position
        y0, x0 = int(round(ty)) - 5, int(round(tx)) - 5
        patch = crop[y0:y0 + 11, x0:x0 + 11].astype(float)
        weight = np.prod([patch[..., c] for c in chans], axis=0) ** (1 / len(chans))
        others = [c for c in range(3) if c not in chans]
        weight *= (patch[..., others].max(axis=-1) < 60) if others else 1
        yy, xx = np.mgrid[y0:y0 + 11, x0:x0 + 11]
        cx, cy = (weight * xx).sum() / weight.sum(), (weight * yy).sum() / weight.sum()
        assert abs(cx - tx) < 0.6 and abs(cy - ty) < 0.6


def test_align_arcface_other_sizes_and_degenerate():
    img = _smooth_image()
    lms = _apply(_similarity(1.5, 0.1, 30, 20), ARCFACE_TEMPLATE_112.astype(np.float64))
    assert align_arcface(img, lms, size=224).shape == (224, 224, 3)
    with pytest.raises(ValueError):
        align_arcface(img, np.zeros((5, 2)))


def test_crop_facenet_matches_facenet_pytorch_extract_face():
    from facenet_pytorch.models.utils.detect_face import extract_face

    img = _smooth_image(300, 260, seed=3)
    for box, margin in [((40.3, 50.8, 170.2, 190.9), 14), ((-20, -10, 100, 120), 0),
                        ((200, 240, 300, 330), 32)]:
        ours = crop_facenet(img, np.array(box), 160, margin)
        ref = extract_face(Image.fromarray(img), np.array(box), 160, margin)
        assert ours.shape == (160, 160, 3) and ours.dtype == np.uint8
        assert np.array_equal(ours, ref.permute(1, 2, 0).numpy().astype(np.uint8))


def test_center_crop_box_and_resize():
    box = center_square_box(178, 218, 0.7)
    assert np.allclose(box, [89 - 62.3, 109 - 62.3, 89 + 62.3, 109 + 62.3], atol=1e-4)
    img = _smooth_image(218, 178)
    assert crop_box_resized(img, box, 112).shape == (112, 112, 3)
    # the full-image box at the image's own size gives the image back
    full = np.array([0, 0, 178, 218], np.float32)
    assert np.array_equal(crop_box_resized(img[:178, :178], full[[0, 1, 2, 2]], 178),
                          img[:178, :178])


def test_warp_partly_and_wholly_outside_the_image_is_black():
    white = np.full((100, 100, 3), 255, np.uint8)
    # template shifted left by 56 px: the left half of the crop lies outside the image
    lms = ARCFACE_TEMPLATE_112.astype(np.float64) - np.array([56.0, 0.0])
    crop = align_arcface(white, lms)
    assert (crop[:, :54] == 0).all() and (crop[:100, 58:] == 255).all()
    assert (align_arcface(white, lms - 500) == 0).all()
    # and the region crop does not depend on how much image surrounds the face
    img = _smooth_image(400, 400, seed=5)
    lms = _apply(_similarity(1.7, 0.2, 150, 140), ARCFACE_TEMPLATE_112.astype(np.float64))
    sub = img[100:400, 90:400]
    a = align_arcface(img, lms).astype(int)
    b = align_arcface(sub, lms - [90, 100]).astype(int)
    assert np.abs(a - b).max() <= 1  # equal up to float rounding of the fitted transform
