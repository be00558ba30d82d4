"""Fair Score Normalization and FairCal: k-means of calibration embeddings, per-cluster
thresholds or calibration maps.

Both follow FairCal's public code (``tiagosalvador/faircal``, ``approaches.py``,
``cluster_methods``): ``KMeans(n_clusters=k)`` of the calibration images' embeddings with
scikit-learn's defaults of the code's time (k-means++ initialisation, **10
initialisations**, the best kept: ``n_init=10``, the default before scikit-learn 1.4),
seeded here (the reference leaves it unseeded); every image is assigned its nearest
centre; a cluster's calibration pairs are the pairs with *either* image in it.

* **FSN** (Terhorst et al., "Post-comparison mitigation of demographic bias in face
  recognition using fair score normalization", Pattern Recognition Letters 140, 2020):
  per cluster c, the threshold ``t_c`` at the target
  FMR from the cluster's impostor pairs, the global ``t_G`` from all calibration
  impostors; a pair's score becomes ``s - (d_a + d_b) / 2`` with ``d = t_c - t_G`` of each
  image's cluster. Thresholds follow facecast's one rule
  (:func:`facecast.fairness.threshold.thresholds_at_fmr`); FairCal's ``find_threshold``
  takes the ROC point nearest the target instead. A cluster with fewer than 1/FMR impostor
  pairs cannot resolve the target: it keeps the global threshold (``d = 0``), counted and
  logged (facecast deviation; the reference code uses the unresolvable threshold). FSN's
  number of clusters is capped by the calibration impostors (:func:`cluster_cap`); FairCal
  has no thresholds and keeps its ``clusters`` (at most the calibration images).
* **FairCal** (Salvador et al., ICLR 2022): a beta calibration map per cluster
  (:func:`facecast.mitigation.calibrate.beta_fit`, scores in [-1, 1]); a pair's
  probability is ``(n_a p_a(s) + n_b p_b(s)) / (n_a + n_b)``, ``n`` the number of
  calibration pairs of each image's cluster. A cluster without calibration pairs of both
  labels uses the global map (facecast's rule; the reference code has none).
* **oracle** the protected groups in place of clusters, as FairCal's ``oracle``: a
  group's map is fitted on the calibration pairs whose *both* images are in it, and a
  pair of one group gets that group's probability. A mixed pair (the reference data had
  none) gets FairCal's size-weighted mean of its two images' group maps, ``n`` the
  groups' calibration pair counts (facecast's rule). An image without a group takes no
  part: the pair's other image decides, and with neither the global map.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import expit

from facecast.evaluate.metrics import far_resolvable, min_impostors
from facecast.fairness.threshold import thresholds_at_fmr
from facecast.mitigation.calibrate import BetaMap, beta_fit

__all__ = ["CLUSTER_MARGIN", "N_INIT", "ClusterCal", "FSN", "assign", "both_members", "cluster_cap",
           "clustercal_fit", "clustercal_prob", "either_members", "fit_kmeans", "fsn_fit",
           "fsn_scores"]

_CHUNK = 16384
#: a cluster of average size holds this many times the 1/FMR impostors its threshold needs
CLUSTER_MARGIN = 4
_EPS = float(np.finfo(np.float64).eps)


def cluster_cap(clusters: int, n_images: int, n_impostors: int | None = None,
                fmr: float | None = None) -> tuple[int, str]:
    """The number of k-means clusters: ``clusters``, at most the calibration images (k-means
    needs a point per centre), at least 1; with ``n_impostors`` and ``fmr`` (FSN) also at
    most ``2 n_impostors / (CLUSTER_MARGIN min_impostors(fmr))`` (each impostor pair
    counts in two clusters; a cluster of average size then holds CLUSTER_MARGIN times the
    1/FMR impostors its FSN threshold needs - k-means clusters are uneven). Returns the
    number and why it was capped (``""`` if not)."""
    k = max(1, min(int(clusters), int(n_images)))
    why = f"{int(n_images)} calibration images"
    if n_impostors is not None and fmr is not None:
        need = min_impostors(float(fmr))
        k = max(1, min(k, int(2 * int(n_impostors) // (CLUSTER_MARGIN * need))))
        why += (f" and {int(n_impostors)} calibration impostor pairs (a cluster of average "
                f"size gets {CLUSTER_MARGIN} x {need} impostor pairs at FMR {float(fmr):g})")
    if k == int(clusters):
        return k, ""
    return k, f"{k} clusters, not {int(clusters)}: {why}"


#: FairCal's k-means initialisations (scikit-learn's ``n_init`` default before 1.4)
N_INIT = 10


def fit_kmeans(x: np.ndarray, k: int, seed: int, n_init: int = N_INIT) -> np.ndarray:
    """The ``(k, d)`` centres of scikit-learn's k-means on ``x`` (seeded; ``n_init``
    k-means++ initialisations, the lowest inertia kept). Its OpenMP threads are limited to
    one: their partial sums are added in the order the threads finish, and the same
    config must give the same bytes."""
    from sklearn.cluster import KMeans
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1, user_api="openmp"):
        km = KMeans(n_clusters=int(k), n_init=int(n_init), random_state=int(seed)).fit(
            np.asarray(x, np.float32))
    return np.asarray(km.cluster_centers_, np.float32)


def assign(x: np.ndarray, centres: np.ndarray) -> np.ndarray:
    """Each row's nearest centre (squared Euclidean distance, as ``KMeans.predict``)."""
    half = 0.5 * (centres.astype(np.float64) ** 2).sum(axis=1)
    out = np.empty(len(x), np.int64)
    for lo in range(0, len(x), _CHUNK):
        d = x[lo:lo + _CHUNK].astype(np.float64) @ centres.T.astype(np.float64) - half
        out[lo:lo + _CHUNK] = np.argmax(d, axis=1)
    return out


@dataclass
class FSN:
    """Fitted FSN: global threshold, per-cluster thresholds, offsets and counts."""

    global_threshold: float
    thresholds: np.ndarray
    offsets: np.ndarray
    n_impostors: np.ndarray
    resolvable: np.ndarray

    @property
    def bounds(self) -> tuple[float, float]:
        """FairCal's range of FSN scores: ``[-1 - max d, 1 - min d]``."""
        return -1.0 - float(self.offsets.max()), 1.0 - float(self.offsets.min())


def _members(ca: np.ndarray, cb: np.ndarray, k: int) -> list[np.ndarray]:
    """Per cluster, the indices of the pairs with either image in it."""
    order = np.argsort(np.concatenate([ca, cb]), kind="stable")
    codes = np.concatenate([ca, cb])[order]
    pair = np.concatenate([np.arange(len(ca)), np.arange(len(cb))])[order]
    bounds = np.searchsorted(codes, np.arange(k + 1))
    return [np.unique(pair[bounds[c]:bounds[c + 1]]) for c in range(k)]


def fsn_fit(score: np.ndarray, label: np.ndarray, ca: np.ndarray, cb: np.ndarray, k: int,
            fmr: float) -> FSN:
    """FSN on calibration pairs (``score``, 0/1 ``label``, clusters ``ca``/``cb`` of their
    images, ``k`` clusters) at target ``fmr``."""
    s = np.asarray(score, np.float64)
    imp = np.asarray(label) == 0
    t_g = float(thresholds_at_fmr(s[imp], [fmr])[0])
    thr = np.full(k, np.nan)
    n_imp = np.zeros(k, np.int64)
    for c, idx in enumerate(_members(ca[imp], cb[imp], k)):
        n_imp[c] = len(idx)
        if len(idx):
            thr[c] = thresholds_at_fmr(s[imp][idx], [fmr])[0]
    ok = np.asarray(far_resolvable(n_imp, fmr), bool) & np.isfinite(thr)
    return FSN(t_g, thr, np.where(ok, thr - t_g, 0.0), n_imp, ok)


def fsn_scores(fsn: FSN, score: np.ndarray, ca: np.ndarray, cb: np.ndarray) -> np.ndarray:
    """FSN scores ``s - (d_a + d_b) / 2``."""
    return np.asarray(score, np.float64) - 0.5 * (fsn.offsets[ca] + fsn.offsets[cb])


@dataclass
class ClusterCal:
    """Per-cluster beta maps (``a``, ``b``, ``c`` arrays; the last entry is the global
    map, used for clusters without both labels and images without a cluster), the
    clusters' calibration pair counts and which clusters have their own map."""

    a: np.ndarray
    b: np.ndarray
    c: np.ndarray
    n_pairs: np.ndarray
    own_map: np.ndarray

    def as_dict(self) -> dict[str, list]:
        """The learned parameters, as lists."""
        return {"a": self.a.tolist(), "b": self.b.tolist(), "c": self.c.tolist(),
                "n_pairs": self.n_pairs.tolist(), "own_map": self.own_map.tolist()}


def either_members(ca: np.ndarray, cb: np.ndarray, k: int) -> list[np.ndarray]:
    """FairCal's cluster membership: per cluster, the pairs with either image in it."""
    return _members(np.asarray(ca), np.asarray(cb), k)


def both_members(ga: np.ndarray, gb: np.ndarray, k: int) -> list[np.ndarray]:
    """FairCal's ``oracle`` membership: per group, the pairs with both images in it."""
    return [np.flatnonzero((ga == g) & (gb == g)) for g in range(k)]


def clustercal_fit(score: np.ndarray, label: np.ndarray, members: list[np.ndarray],
                   global_map: BetaMap) -> ClusterCal:
    """One beta map per cluster from the calibration pairs ``members`` lists for it
    (:func:`either_members`, :func:`both_members`); a cluster without pairs of both labels
    keeps the global map."""
    s = np.asarray(score, np.float64)
    y = np.asarray(label).astype(int)
    k = len(members)
    maps, n, own = [], np.zeros(k, np.int64), np.zeros(k, bool)
    for c, idx in enumerate(members):
        n[c] = len(idx)
        if len(idx) and len(np.unique(y[idx])) == 2:
            maps.append(beta_fit(s[idx], y[idx]))
            own[c] = True
        else:
            maps.append(global_map)
    maps.append(global_map)
    return ClusterCal(np.array([m.a for m in maps]), np.array([m.b for m in maps]),
                      np.array([m.c for m in maps]), n, own)


def clustercal_prob(cc: ClusterCal, score: np.ndarray, ca: np.ndarray, cb: np.ndarray
                    ) -> np.ndarray:
    """Each pair's probability: the calibration-size-weighted mean of its two images'
    cluster maps (codes ``-1`` take no part; neither: the global map)."""
    s = np.clip((np.asarray(score, np.float64) + 1.0) / 2.0, _EPS, 1.0 - _EPS)
    ls, l1s = np.log(s), np.log1p(-s)
    k = len(cc.n_pairs)
    weights = np.r_[cc.n_pairs.astype(np.float64), 0.0]

    def side(codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        j = np.where(codes >= 0, codes, k)
        z = cc.a[j] * ls - cc.b[j] * l1s + cc.c[j]
        return expit(z), weights[j]

    pa, wa = side(np.asarray(ca))
    pb, wb = side(np.asarray(cb))
    z_g = cc.a[k] * ls - cc.b[k] * l1s + cc.c[k]
    with np.errstate(invalid="ignore", divide="ignore"):
        mixed = (wa * pa + wb * pb) / (wa + wb)
    return np.where(wa + wb > 0, mixed, expit(z_g))

