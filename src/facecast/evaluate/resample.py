"""Identity-clustered resampling weights, shared by the bootstrap bands of evaluation and
the fairness bootstrap.

A replicate draws identities with replacement; a genuine pair (one identity) is weighted by
its identity's count, an impostor pair by the product of its two identities' counts.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pandas as pd


def identity_weights(identity_a: np.ndarray, identity_b: np.ndarray, n_boot: int,
                     rng: np.random.Generator, chunk: int = 8) -> Iterator[np.ndarray]:
    """Yield pair-weight matrices ``(<=chunk, n_pairs)`` for ``n_boot`` replicates."""
    ida = np.asarray(identity_a, dtype=object)
    inv, ids = pd.factorize(np.concatenate([ida, np.asarray(identity_b, dtype=object)]))
    ca, cb = inv[: ida.shape[0]], inv[ida.shape[0]:]
    genuine = ca == cb
    k = len(ids)
    done = 0
    while done < n_boot:
        b = min(chunk, n_boot - done)
        counts = rng.multinomial(k, np.full(k, 1.0 / k), size=b).astype(np.float64)
        w = np.where(genuine[None, :], counts[:, ca], counts[:, ca] * counts[:, cb])
        done += b
        yield w
