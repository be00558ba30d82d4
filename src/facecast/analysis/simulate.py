"""Synthetic face embeddings with a realistic score distribution (for tests and benchmarks).

Identity centres live near a low-dimensional subspace (``rank`` dimensions), so impostor
cosines spread like a trained model's (mean ~0, std ~0.1, not the 1/sqrt(D) of random
vectors); each image adds isotropic noise of a per-image strength (its "quality"), so genuine
cosines range from ~0.2 (two poor images) to ~0.9 (two good ones).
"""

from __future__ import annotations

import numpy as np


def synthetic_embeddings(n_identities: int, per_identity: int, dim: int = 512, *,
                         seed: int = 0, rank: int = 48, noise: tuple[float, float] = (0.4, 1.8),
                         chunk: int = 100_000) -> tuple[np.ndarray, np.ndarray]:
    """(embeddings [n_identities*per_identity, dim] float32 L2-normalised, identity codes)."""
    rng = np.random.default_rng(seed)
    basis = np.linalg.qr(rng.standard_normal((dim, rank)))[0].T.astype(np.float32)  # [rank, D]
    centres = rng.standard_normal((n_identities, rank)).astype(np.float32) @ basis
    centres += 0.25 * rng.standard_normal((n_identities, dim)).astype(np.float32) / np.sqrt(dim)
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    n = n_identities * per_identity
    ident = np.repeat(np.arange(n_identities), per_identity)
    out = np.empty((n, dim), np.float32)
    for s in range(0, n, chunk):
        idx = ident[s:s + chunk]
        sigma = rng.uniform(*noise, size=(len(idx), 1)).astype(np.float32)
        x = centres[idx] + sigma * rng.standard_normal((len(idx), dim)).astype(np.float32) \
            / np.float32(np.sqrt(dim))
        out[s:s + chunk] = x / np.linalg.norm(x, axis=1, keepdims=True)
    return out, ident
