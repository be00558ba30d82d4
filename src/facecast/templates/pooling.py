"""Image features pooled into template features, as insightface's IJB evaluation does.

This reproduces the behaviour of ``image2template_feature`` and the feature preparation
of insightface's ``recognition/_evaluation_/ijb/ijb_11.py`` (compared with its recorded
outputs in ``tests/test_templates.py``): the image feature is the model's
raw (not normalised) feature - with flip test the sum of the raw features of the image and
its mirror, which the embed stage already computes for models with ``flip: true`` - times
the image's faceness score; the features of the images of one media are averaged, the
media of one template summed, and the sum L2-normalised. Each switch is an option here:
``norm_score`` (keep the raw norm; off = L2-normalise each image first),
``detector_score`` (multiply by the faceness score) and ``media_pooling`` (off = sum the
images directly, each counting once).

Vectorised: one sort by (template, media) and one sparse (templates x images) weight
matrix - weight 1/(images of the media) - applied to the features in float64, as the
reference accumulates (the reference's per-media mean of float32 features rounds to
float32, so template features agree with it to about 1e-7); 227k images pool in about
a second.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import sparse

#: feature columns pooled at a time (bounds the float64 copy of the image features)
COLUMNS = 64


@dataclass
class Pooled:
    """Pooled templates: ``template_ids`` (sorted, unique) and per template its
    ``features`` (float64, L2-normalised; zero rows stay zero), ``n_images`` and
    ``n_media`` (of the images that had features)."""

    template_ids: np.ndarray
    features: np.ndarray
    n_images: np.ndarray
    n_media: np.ndarray


def image_features(raw: np.ndarray, faceness: np.ndarray, *, norm_score: bool = True,
                   detector_score: bool = True) -> np.ndarray:
    """The per-image features that are pooled (float32): ``raw`` as is (``norm_score``)
    or L2-normalised per row, then times ``faceness`` when ``detector_score``."""
    x = np.asarray(raw, np.float32)
    if not norm_score:  # norms in float64, the result rounded to float32
        x = l2_normalise(x.astype(np.float64)).astype(np.float32)
    if detector_score:
        x = x * np.asarray(faceness, np.float32)[:, None]
    return x


def l2_normalise(x: np.ndarray) -> np.ndarray:
    """Rows divided by their L2 norm (``sklearn.preprocessing.normalize``): zero rows stay."""
    n = np.sqrt(np.einsum("ij,ij->i", x, x))[:, None]
    return np.divide(x, n, out=np.zeros_like(x), where=n > 0)


def pool_templates(features: np.ndarray, template_ids: np.ndarray, media_ids: np.ndarray, *,
                   media_pooling: bool = True) -> Pooled:
    """Pool image ``features`` (n, D) into one L2-normalised feature per template.

    With ``media_pooling``: mean over the images of each (template, media), sum over the
    media of a template. Without: the sum of the template's images. Every row counts
    (callers drop images without features first and count them).
    """
    feats = np.asarray(features)
    t = np.asarray(template_ids, np.int64)
    m = np.asarray(media_ids, np.int64)
    n = len(t)
    if n == 0:
        dim = feats.shape[1] if feats.ndim == 2 else 0
        return Pooled(np.zeros(0, np.int64), np.zeros((0, dim)), np.zeros(0, np.int64),
                      np.zeros(0, np.int64))
    order = np.lexsort((m, t))
    t_s, m_s = t[order], m[order]
    new_media = np.r_[True, (t_s[1:] != t_s[:-1]) | (m_s[1:] != m_s[:-1])]
    starts = np.flatnonzero(new_media)
    media_n = np.diff(np.r_[starts, n])
    media_t = t_s[starts]
    t_starts = np.flatnonzero(np.r_[True, media_t[1:] != media_t[:-1]])
    ids = media_t[t_starts]
    # one sparse (templates x images) matrix of weights: 1/(images of the media) with media
    # pooling (the media mean, then the sum over media), else 1
    weight = (1.0 / np.repeat(media_n, media_n)) if media_pooling else np.ones(n)
    row = np.searchsorted(ids, t_s)
    mat = sparse.csr_matrix((weight, (row, order)), shape=(len(ids), n))
    pooled = np.empty((len(ids), feats.shape[1]), np.float64)
    for c in range(0, feats.shape[1], COLUMNS):  # float64 a slab of columns at a time
        pooled[:, c:c + COLUMNS] = mat @ np.asarray(feats[:, c:c + COLUMNS], np.float64)
    n_images = np.add.reduceat(media_n, t_starts)
    n_media = np.diff(np.r_[t_starts, len(media_t)])
    return Pooled(ids, l2_normalise(pooled), n_images.astype(np.int64),
                  n_media.astype(np.int64))
