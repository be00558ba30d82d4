"""The embeddings the cc11 evaluation record is made on (our code).

:mod:`cc11_recorder` runs CAST's ``cc11.py`` evaluation on them; ``tests/test_cc11.py``
rebuilds the very same numbers, writes them as a CC11-layout ``.bin``'s embeddings and
runs facecast on them. Everything is a function of :data:`SEED`.

:func:`graded`: eleven blocks of :data:`PER_BLOCK` pairs, each of insightface's ten folds
with a random number (1 to 5 of 6) of genuine pairs in random places (unequal class
counts, yet both classes in every fold: CAST's ``calculate_val`` divides by both counts);
``DIM``-dimensional float32 embeddings, a genuine pair's second image its first plus noise
that grows block by block (block ``b``: ``0.6 + 0.1 b``), so the blocks' accuracies differ.
"""

from __future__ import annotations

import numpy as np

#: the seed of every number here
SEED = 3
#: pairs per CC11 block: 11 x 60 = 660 pairs, 6 per fold
PER_BLOCK = 60
#: CC11's blocks
BLOCKS = 11
#: insightface's folds per block
FOLDS = 10
#: embedding dimension
DIM = 12


def graded(seed: int = SEED) -> tuple[list[bool], np.ndarray]:
    """``(issame, embeddings)``: one bool per pair and ``2 * n_pairs x DIM`` float32
    embeddings, pair ``k`` at rows ``2k`` and ``2k + 1`` (module docstring)."""
    rng = np.random.default_rng(seed)
    n_pairs = BLOCKS * PER_BLOCK
    per_fold = PER_BLOCK // FOLDS
    issame = []
    for _ in range(BLOCKS * FOLDS):  # 1 to per_fold - 1 genuine pairs, in random places
        fold = np.arange(per_fold) < rng.integers(1, per_fold)
        issame += rng.permutation(fold).tolist()
    emb = rng.standard_normal((2 * n_pairs, DIM))
    for k in np.flatnonzero(issame):
        noise = 0.6 + 0.1 * (k // PER_BLOCK)  # later blocks are harder
        emb[2 * k + 1] = emb[2 * k] + rng.standard_normal(DIM) * noise
    return issame, emb.astype(np.float32)
