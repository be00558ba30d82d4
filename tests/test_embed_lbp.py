"""LBP baseline: operator correctness, batching, whitening, fit file round trip."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from skimage.data import astronaut

from facecast.embed.base import MissingWeightsError
from facecast.embed.lbp import (
    N_LABELS,
    UNIFORM_LUT,
    CovarianceAccumulator,
    LBPEmbedder,
    feature_dim,
    fit_whitening,
    grid_histograms,
    lbp_codes,
    lbp_features,
    load_fit,
    save_fit,
)


def _reference_codes(gray: np.ndarray, r: int) -> np.ndarray:
    """Per-pixel loop version of the square-ring 8-neighbour uniform LBP."""
    dirs = [(0, 1), (-1, 1), (-1, 0), (-1, -1), (0, -1), (1, -1), (1, 0), (1, 1)]
    h, w = gray.shape
    out = np.zeros((h - 2 * r, w - 2 * r), np.int64)
    for y in range(r, h - r):
        for x in range(r, w - r):
            code = 0
            for k, (dy, dx) in enumerate(dirs):
                code |= int(gray[y + r * dy, x + r * dx] >= gray[y, x]) << k
            out[y - r, x - r] = UNIFORM_LUT[code]
    return out


def test_uniform_lut_has_59_labels():
    assert len(np.unique(UNIFORM_LUT)) == N_LABELS
    # the 58 uniform patterns each have their own label; everything else shares label 58
    assert UNIFORM_LUT[0] != UNIFORM_LUT[255] and UNIFORM_LUT[0b01010101] == N_LABELS - 1
    assert (UNIFORM_LUT < N_LABELS - 1).sum() == 58


@pytest.mark.parametrize("r", [1, 2])
def test_codes_match_reference_loop(r):
    rng = np.random.default_rng(r)
    gray = rng.integers(0, 6, (2, 12, 15)).astype(np.float32)  # ties on purpose
    got = lbp_codes(gray, r)
    for i in range(2):
        np.testing.assert_array_equal(got[i], _reference_codes(gray[i], r))


def test_histograms_are_hellinger_per_cell():
    rng = np.random.default_rng(0)
    labels = rng.integers(0, N_LABELS, (3, 20, 20))
    h = grid_histograms(labels, 4)
    assert h.shape == (3, 16 * N_LABELS)
    cells = (h.reshape(3, 16, N_LABELS) ** 2).sum(-1)
    np.testing.assert_allclose(cells, 1.0, rtol=1e-5)
    # cell (0, 0) of image 1 counts exactly the top-left 5x5 labels
    want = np.bincount(labels[1, :5, :5].ravel(), minlength=N_LABELS) / 25.0
    np.testing.assert_allclose(h[1, :N_LABELS] ** 2, want, rtol=1e-5)


def test_batched_equals_single_and_deterministic():
    img = astronaut()[30:142, 160:272]  # 112x112 around the face
    rng = np.random.default_rng(1)
    batch = np.stack([img, img[:, ::-1], rng.integers(0, 256, img.shape, dtype=np.uint8)])
    f = lbp_features(batch)
    assert f.shape == (3, feature_dim((1, 2), 7))
    for i in range(3):
        np.testing.assert_array_equal(f[i], lbp_features(batch[i:i + 1])[0])
    np.testing.assert_array_equal(f, lbp_features(batch))


def test_whitening_gives_unit_covariance_and_roundtrips(tmp_path):
    rng = np.random.default_rng(2)
    x = rng.normal(size=(400, 10)) @ rng.normal(size=(10, 10)) + 5.0
    acc = CovarianceAccumulator(10)
    for chunk in np.array_split(x, 7):  # streaming == one pass
        acc.update(chunk)
    fit = fit_whitening(acc, pca_dim=6, eps=0.0)
    z = (x - fit["mean"]) @ fit["projection"]
    assert z.shape == (400, 6)
    np.testing.assert_allclose(z.mean(0), 0, atol=1e-4)
    np.testing.assert_allclose(np.cov(z.T), np.eye(6), atol=1e-3)
    assert np.all(np.diff(fit["eigenvalues"]) <= 0)
    path = save_fit(tmp_path / "fit.npz", fit, radii=[1, 2], grid=7)
    back = load_fit(path)  # allow_pickle=False inside
    np.testing.assert_array_equal(back["projection"], fit["projection"])
    assert list(back["radii"]) == [1, 2] and int(back["grid"]) == 7
    with pytest.raises(ValueError, match="at least 2"):
        fit_whitening(CovarianceAccumulator(3))


def test_embedder_checks_fit(tmp_path):
    with pytest.raises(MissingWeightsError, match="embed_fit"):
        LBPEmbedder("lbp", weights=str(tmp_path / "fit.npz"))
    acc = CovarianceAccumulator(feature_dim([1], 4))
    rng = np.random.default_rng(3)
    crops = rng.integers(0, 256, (20, 112, 112, 3), dtype=np.uint8)
    acc.update(lbp_features(crops, [1], 4))
    path = save_fit(tmp_path / "fit.npz", fit_whitening(acc, pca_dim=8), [1], 4)
    with pytest.raises(ValueError, match="fitted for radii"):
        LBPEmbedder("lbp", weights=str(path), radii=[1, 2], grid=4)
    emb = LBPEmbedder("lbp", weights=str(path), radii=[1], grid=4)
    out = emb.embed(torch.from_numpy(crops[:3]))
    assert out.shape == (3, 8) and emb.dim == 8


def test_gram_trick_equals_covariance_eigendecomposition():
    """n < dim: the fit goes through the n x n Gram matrix and gives the same whitening."""
    rng = np.random.default_rng(5)
    x = rng.normal(size=(40, 300)) * np.linspace(3, 0.1, 300) + 2.0
    gram = CovarianceAccumulator(300)
    for chunk in np.array_split(x, 3):
        gram.update(chunk)
    assert gram.rows is not None  # rows kept: n < dim
    cov = CovarianceAccumulator(300)
    cov.update(x)
    cov.rows, cov.outer = None, x.T @ x  # force the d x d path on the same data
    a, b = fit_whitening(gram, pca_dim=10), fit_whitening(cov, pca_dim=10)
    np.testing.assert_allclose(a["eigenvalues"], b["eigenvalues"], rtol=1e-4)
    np.testing.assert_allclose(a["projection"], b["projection"], rtol=1e-3, atol=1e-5)
    z = (x - a["mean"]) @ a["projection"]
    np.testing.assert_allclose(np.cov(z.T), np.eye(10), atol=2e-2)


def test_accumulator_switches_to_scatter_matrix_past_dim():
    rng = np.random.default_rng(6)
    x = rng.normal(size=(50, 8))
    acc = CovarianceAccumulator(8)
    acc.update(x[:5])
    assert acc.rows is not None and acc.outer is None
    acc.update(x[5:])
    assert acc.rows is None and acc.outer is not None
    mean, cov = acc.mean_cov()
    np.testing.assert_allclose(cov, np.cov(x.T), atol=1e-10)
    np.testing.assert_allclose(mean, x.mean(0), atol=1e-12)


def test_unwhitened_fit_gives_raw_features(tmp_path):
    from facecast.embed.lbp import unwhitened_fit

    dim = feature_dim([1], 4)
    path = save_fit(tmp_path / "fit.npz", unwhitened_fit(dim, 3, "too few"), [1], 4)
    emb = LBPEmbedder("lbp", weights=str(path), radii=[1], grid=4)
    crops = np.random.default_rng(7).integers(0, 256, (2, 112, 112, 3), dtype=np.uint8)
    np.testing.assert_allclose(emb.embed(torch.from_numpy(crops)), lbp_features(crops, [1], 4))
    prov = emb.provenance()
    assert prov["whitening"] == "none" and prov["whitening_reason"] == "too few"
