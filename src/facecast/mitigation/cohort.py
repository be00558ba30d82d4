"""Cohort score normalisation: Z-, T-, ZT-, S- and adaptive S-norm.

Definitions as in bob's score normalisation - Z and T as bob.bio.base's ``ZNormScores`` and
``TNormScores`` (``pipelines/score_post_processor.py``), ZT as bob's ``ztNorm``
(bob.learn.em ``cpp/ZTNorm.cpp``: Z-norm, then T-norm with Z-normalised cohort scores) -
and the adaptive S-norm of Matejka et al. (Interspeech 2017; Cumani et al. 2011) with
top-k cohort selection. A pair is (reference ``image_a``, probe ``image_b``), as bob scores
a reference against a probe:

* ``znorm``  ``(s - mu_a) / sd_a`` - the reference's statistics over the cohort;
* ``tnorm``  ``(s - mu_b) / sd_b`` - the probe's statistics over the cohort;
* ``ztnorm`` ``(z - m_b) / q_b`` with ``z = (s - mu_a) / sd1_a`` and ``m_b``, ``q_b`` the
  mean and SD over cohort images c of ``(s(b, c) - mu_c) / sd1_c`` (each cohort image
  Z-normed by its own statistics over the rest of the cohort);
* ``snorm``  ``(znorm + tnorm) / 2``;
* ``asnorm`` ``((s - mu^k_a) / sd^k_a + (s - mu^k_b) / sd^k_b) / 2`` with the statistics
  of each image's ``top_k`` highest cohort scores.

SDs: ``znorm``, ``tnorm``, ``snorm`` and ``asnorm`` use population SDs (``np.std``, as
``ZNormScores``), an SD below 1e-12 floored there (``ZNormScores`` would divide by zero).
``ztnorm`` follows ``ZTNorm.cpp`` exactly: the sample (n - 1) SD at all three steps
(``sd1_a``, each cohort image's ``sd1_c``, ``q_b``), 0 for a single value, and an SD
``<= DBL_MIN`` (the smallest normal double) replaced by 1. One cohort of calibration
images serves as Z-cohort and T-cohort: a seeded sample of ``cohort_size`` calibration
images; an image is never normalised by cohort images of its own identity (calibration
images would otherwise meet themselves and their mated images: cohort scores are
impostor scores; ``ZTNorm.cpp``'s mask of true trials does the same for its D matrix).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["COHORT_METHODS", "CohortStats", "choose_cohort", "cohort_self_stats",
           "image_stats", "l2_normalise", "normalised_scores"]

#: the cohort methods, in table order
COHORT_METHODS = ("znorm", "tnorm", "ztnorm", "snorm", "asnorm")
_SD_FLOOR = 1e-12
#: ZTNorm.cpp replaces an SD at or below this (``std::numeric_limits<double>::min()``) by 1
DBL_MIN = float(np.finfo(np.float64).tiny)
_CHUNK = 8192


def l2_normalise(x: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length (float32; zero rows stay zero)."""
    x = np.asarray(x, np.float32)
    n = np.linalg.norm(x, axis=1, keepdims=True)
    return np.divide(x, n, out=np.zeros_like(x), where=n > 0)


def choose_cohort(n_images: int, size: int, seed: int) -> np.ndarray:
    """Sorted indices of a seeded sample of ``min(size, n_images)`` of ``n_images``
    calibration images."""
    rng = np.random.default_rng(int(seed))
    k = min(int(size), int(n_images))
    return np.sort(rng.choice(int(n_images), size=k, replace=False))


@dataclass
class CohortStats:
    """Per image: cohort mean, population SD and sample SD (``mu``, ``sd``, ``sd1``),
    top-k mean/SD (``mu_k``, ``sd_k``) and the ZT statistics of its Z-normed cohort
    scores (``zt_m``, ``zt_q``); SDs already floored (module docstring)."""

    mu: np.ndarray
    sd: np.ndarray
    sd1: np.ndarray
    mu_k: np.ndarray
    sd_k: np.ndarray
    zt_m: np.ndarray
    zt_q: np.ndarray


def _masked_moments(s: np.ndarray, mask: np.ndarray, ddof: int = 0
                    ) -> tuple[np.ndarray, np.ndarray]:
    """Row means and SDs (divisor ``n - ddof``; 0 for a row of ``n <= ddof`` values, as
    ZTNorm.cpp) of ``s`` over ``mask``; NaN for an empty row. Not floored."""
    n = mask.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        mu = np.where(mask, s, 0.0).sum(axis=1) / n
        ss = np.where(mask, (s - mu[:, None]) ** 2, 0.0).sum(axis=1)
        sd = np.where(n > ddof, np.sqrt(ss / np.maximum(n - ddof, 1)), 0.0)
    return mu, np.where(n > 0, sd, np.nan)


def _population(s: np.ndarray, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mean and population SD floored at 1e-12 (Z/T/S/AS-norm)."""
    mu, sd = _masked_moments(s, mask)
    return mu, np.maximum(sd, _SD_FLOOR)


def _bob_sample(s: np.ndarray, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mean and ZTNorm.cpp's SD: n - 1 divisor, ``<= DBL_MIN`` replaced by 1."""
    mu, sd = _masked_moments(s, mask, ddof=1)
    return mu, np.where(sd <= DBL_MIN, 1.0, sd)


def cohort_self_stats(cohort: np.ndarray, cohort_ident: np.ndarray
                      ) -> tuple[np.ndarray, np.ndarray]:
    """Each cohort image's mean and ZTNorm.cpp SD over the cohort images of other
    identities (its row of ZTNorm.cpp's D matrix without true trials)."""
    s = (cohort @ cohort.T).astype(np.float64)
    mask = cohort_ident[:, None] != cohort_ident[None, :]
    return _bob_sample(s, mask)


def _top_k(s: np.ndarray, mask: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Mean and SD of each row's ``k`` highest scores within ``mask``."""
    k = max(1, min(int(k), s.shape[1]))
    filled = np.where(mask, s, -np.inf)
    top = np.partition(filled, s.shape[1] - k, axis=1)[:, -k:]
    return _population(top, np.isfinite(top))


def image_stats(emb: np.ndarray, ident: np.ndarray, cohort: np.ndarray,
                cohort_ident: np.ndarray, self_stats: tuple[np.ndarray, np.ndarray],
                top_k: int) -> CohortStats:
    """:class:`CohortStats` of the images ``emb`` (unit rows; identity codes ``ident``)
    against the cohort (unit rows ``cohort``, identity codes ``cohort_ident``; its own
    statistics ``self_stats`` from :func:`cohort_self_stats`)."""
    mu_c, sd_c = self_stats
    parts = []
    for lo in range(0, len(emb), _CHUNK):
        s = (emb[lo:lo + _CHUNK] @ cohort.T).astype(np.float64)
        mask = ident[lo:lo + _CHUNK, None] != cohort_ident[None, :]
        mu, sd = _population(s, mask)
        sd1 = _bob_sample(s, mask)[1]
        mu_k, sd_k = _top_k(s, mask, top_k)
        zt_m, zt_q = _bob_sample((s - mu_c[None, :]) / sd_c[None, :], mask)
        parts.append((mu, sd, sd1, mu_k, sd_k, zt_m, zt_q))
    if not parts:
        return CohortStats(*[np.zeros(0)] * 7)
    return CohortStats(*[np.concatenate(c) for c in zip(*parts, strict=True)])


def normalised_scores(method: str, score: np.ndarray, ia: np.ndarray, ib: np.ndarray,
                      st: CohortStats) -> np.ndarray:
    """The ``method`` score of pairs with raw ``score``, reference images ``ia`` and probe
    images ``ib`` (indices into the rows of ``st``); see the module docstring."""
    s = np.asarray(score, np.float64)
    if method == "znorm":
        return (s - st.mu[ia]) / st.sd[ia]
    if method == "tnorm":
        return (s - st.mu[ib]) / st.sd[ib]
    if method == "ztnorm":
        return ((s - st.mu[ia]) / st.sd1[ia] - st.zt_m[ib]) / st.zt_q[ib]
    if method == "snorm":
        return 0.5 * ((s - st.mu[ia]) / st.sd[ia] + (s - st.mu[ib]) / st.sd[ib])
    if method == "asnorm":
        return 0.5 * ((s - st.mu_k[ia]) / st.sd_k[ia] + (s - st.mu_k[ib]) / st.sd_k[ib])
    raise ValueError(f"unknown cohort method {method!r} ({', '.join(COHORT_METHODS)})")
