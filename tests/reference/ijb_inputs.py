"""The inputs the records of insightface's IJB read-out and template pooling are made on.

:mod:`insightface_recorder` runs ``recognition/_evaluation_/ijb/ijb_11.py``'s TAR read-out
and ``image2template_feature`` on them; ``tests/test_templates.py`` rebuilds the same
inputs (functions of the seeds below only) and runs facecast's
:mod:`facecast.templates.verify` and :mod:`facecast.templates.pooling`. Our code.
"""

from __future__ import annotations

import numpy as np

#: the FARs the hostile read-out cases ask for (beyond the reference's six: FARs that
#: small protocols reach exactly, and ones equally far from two ROC points)
HOSTILE_FARS = [1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1, 0.2, 0.25, 0.5, 1 / 3]
#: insightface's IJB table FARs (the script's own list is recorded and compared too)
IJB_FARS = [1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1]
N_HOSTILE = 60
PERFECT = [(3, 5), (40, 400), (500, 20_000)]


def hostile(case: int) -> tuple[np.ndarray, np.ndarray]:
    """Vertical steps (tied genuine scores), ties across labels, float32 scores every
    third case, tiny protocols: (scores, labels)."""
    rng = np.random.default_rng(case)
    n_gen = int(rng.integers(1, 30))
    n_imp = int(rng.choice([1, 2, 3, 7, 10, 20, 100, 1000, 5000]))
    y = np.r_[np.ones(n_gen, int), np.zeros(n_imp, int)]
    levels = int(rng.integers(2, 12))           # few distinct values: ties everywhere
    s = rng.integers(0, levels, len(y)) + 0.7 * y * rng.integers(0, 3)
    if case % 3 == 0:
        s = (s / levels).astype(np.float32)      # float32 scores, as ijb_11.py's np.sum
    return s, y


def large() -> tuple[np.ndarray, np.ndarray]:
    """2,000 genuine and 200,000 impostor scores rounded to 3 decimals (ties)."""
    rng = np.random.default_rng(3)
    labels = np.r_[np.ones(2000), np.zeros(200_000)].astype(int)
    return np.round(rng.normal(size=len(labels)) + 3 * labels, 3), labels


def tiny_step() -> tuple[np.ndarray, np.ndarray]:
    """5 genuine, 40 impostor: the ROC point nearest FAR 0.1 is a tie between FAR 0 and
    FAR 0.2 (8 impostors above the fifth genuine pair)."""
    s, y = np.r_[0.95, 0.94, 0.93, 0.92, np.linspace(0.9, 0.5, 40)], np.r_[[1] * 4, [0] * 40]
    s, y = np.r_[s, 0.86], np.r_[y, 1]
    s[4:12] = np.linspace(0.91, 0.87, 8)
    return s, y


def perfect(k: int) -> tuple[np.ndarray, np.ndarray]:
    """A model that separates genuine and impostor pairs perfectly (:data:`PERFECT` sizes)."""
    n_gen, n_imp = PERFECT[k]
    rng = np.random.default_rng(100 + k)
    y = np.r_[np.ones(n_gen, int), np.zeros(n_imp, int)]
    return np.r_[rng.uniform(0.6, 0.9, n_gen), rng.uniform(-0.2, 0.5, n_imp)], y


def readout_cases() -> dict[str, tuple[np.ndarray, np.ndarray, list[float]]]:
    """case -> (scores, labels, FARs) of every read-out record."""
    out = {f"hostile_{c}": (*hostile(c), HOSTILE_FARS) for c in range(N_HOSTILE)}
    out["large"] = (*large(), IJB_FARS)
    out["tiny_step"] = (*tiny_step(), [0.1])
    out.update({f"perfect_{k}": (*perfect(k), IJB_FARS) for k in range(len(PERFECT))})
    return out


# ---------------------------------------------------------------------- pooling inputs

def by_hand() -> dict[str, np.ndarray]:
    """Template 7: media 1 = images a, b, media 2 = image c; template 3: image d (dyadic
    values: every step exact)."""
    raw = np.array([[2, 0, 0], [0, 4, 0], [0, 0, 1], [3, 4, 0]], np.float32)
    return {"raw": raw, "faceness": np.array([0.5, 1.0, 2.0, 1.0], np.float32),
            "template_id": np.array([7, 7, 7, 3]), "media_id": np.array([1, 1, 2, 9])}


def layout(seed: int, n_images: int, n_templates: int, dim: int) -> dict[str, np.ndarray]:
    """Random IJB-like membership: templates of one or many media, media of one or many
    images (a media id shared by two templates too), raw float32 features x 20, float32
    faceness scores."""
    rng = np.random.default_rng(seed)
    template = np.sort(rng.integers(1, n_templates + 1, n_images)) * 3  # gaps in the ids
    media = rng.integers(0, max(2, n_images // 3), n_images)
    raw = (rng.standard_normal((n_images, dim)) * 20).astype(np.float32)
    face = rng.uniform(0.5, 1.0, n_images).astype(np.float32)
    order = rng.permutation(n_images)  # members in no particular order
    return {"raw": raw[order], "faceness": face[order], "template_id": template[order],
            "media_id": media[order]}


#: pooling case -> builder arguments (None: :func:`by_hand`)
POOLING_CASES: dict[str, tuple[int, int, int, int] | None] = {
    "by_hand": None,
    "small": (7, 40, 8, 8),
    "wide": (8, 600, 120, 8),
}


def pooling_case(name: str) -> dict[str, np.ndarray]:
    """The members and features of one :data:`POOLING_CASES` case, plus ``img_feats``:
    raw times faceness in float32 (what ijb_11.py pools)."""
    args = POOLING_CASES[name]
    case = by_hand() if args is None else layout(*args)
    case["img_feats"] = case["raw"] * case["faceness"][:, None]
    return case
