"""Real face crops for the GPU benchmarks: the RFW test photos of tests/data, aligned.

``tests/data/rfw`` holds 48 RFW photos (4 sets x 4 identities x 3) with RFW's own five
landmarks per photo (``txts/<Set>/<Set>_lmk.txt``). :func:`rfw_crops` aligns each to the
ArcFace template (:func:`facecast.faces.align.align_arcface`, the faces stage's
alignment) and repeats them, mirrored and re-lit, up to the number asked for: face
statistics, not uniform noise (issue 48: the rounding error on faces was 2-3x that on
noise). Imported by the benchmark scripts beside it (``benchmarks/`` is on ``sys.path``
when one of them runs).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from facecast.datasets.rfw import read_landmarks
from facecast.faces.align import align_arcface
from facecast.faces.decode import read_image

RFW = Path(__file__).resolve().parents[1] / "tests" / "data" / "rfw"
SETS = ("African", "Asian", "Caucasian", "Indian")


def rfw_aligned(size: int = 112) -> np.ndarray:
    """The 48 RFW photos of tests/data aligned to ``size`` px: uint8 ``(48, size, size, 3)``
    in a fixed order (set, then path)."""
    out = []
    for name in SETS:
        bad: list[str] = []
        marks = read_landmarks(RFW / "txts" / name / f"{name}_lmk.txt", name, bad)
        if bad:
            raise ValueError(f"RFW landmarks of tests/data: {bad[:3]}")
        for rel, coords in sorted(marks.items()):
            img = read_image(RFW / rel)
            if img.array is None:
                raise ValueError(f"{RFW / rel}: {img.status}")
            out.append(align_arcface(img.array, np.asarray(coords).reshape(5, 2), size))
    return np.stack(out)


def rfw_crops(n: int, size: int = 112) -> np.ndarray:
    """``n`` uint8 face crops: the aligned RFW photos, then mirrored, then re-lit copies
    (gain 0.8..1.2 in a fixed sequence), cycled; deterministic."""
    base = rfw_aligned(size)
    pool = [base, base[:, :, ::-1]]
    out = np.concatenate(pool)
    gains = np.linspace(0.8, 1.2, 7)
    k = 0
    while len(out) < n:
        lit = np.clip(pool[k % 2].astype(np.float32) * gains[k % len(gains)], 0, 255)
        out = np.concatenate([out, lit.astype(np.uint8)])
        k += 1
    return np.ascontiguousarray(out[:n])
