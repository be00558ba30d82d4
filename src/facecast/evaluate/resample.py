"""Identity-clustered resampling weights, shared by the bootstrap bands of evaluation and
the fairness bootstrap.

A replicate draws identities with replacement; a genuine pair (one identity) is weighted by
its identity's count, an impostor pair by the product of its two identities' counts.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pandas as pd


def identity_codes(identity_a: np.ndarray, identity_b: np.ndarray
                   ) -> tuple[np.ndarray, np.ndarray, int]:
    """Each pair's two identity codes (in order of first appearance over ``identity_a``
    then ``identity_b``: the columns of :func:`identity_counts`) and the number of
    identities."""
    ida = np.asarray(identity_a, dtype=object)
    inv, ids = pd.factorize(np.concatenate([ida, np.asarray(identity_b, dtype=object)]))
    return inv[: ida.shape[0]], inv[ida.shape[0]:], len(ids)


def identity_counts(k: int, n_boot: int, rng: np.random.Generator, chunk: int = 8
                    ) -> Iterator[np.ndarray]:
    """Yield ``(<=chunk, k)`` float counts for ``n_boot`` replicates: how often each of the
    ``k`` identities is drawn (with replacement). The draws do not depend on ``chunk``."""
    done = 0
    while done < n_boot:
        b = min(chunk, n_boot - done)
        done += b
        yield rng.multinomial(k, np.full(k, 1.0 / k), size=b).astype(np.float64)


def identity_weights(identity_a: np.ndarray, identity_b: np.ndarray, n_boot: int,
                     rng: np.random.Generator, chunk: int = 8) -> Iterator[np.ndarray]:
    """Yield pair-weight matrices ``(<=chunk, n_pairs)`` for ``n_boot`` replicates."""
    ca, cb, k = identity_codes(identity_a, identity_b)
    genuine = ca == cb
    for counts in identity_counts(k, n_boot, rng, chunk):
        yield np.where(genuine[None, :], counts[:, ca], counts[:, ca] * counts[:, cb])
