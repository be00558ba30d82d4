"""Which rows may enter a benchmark pool, or vote for a template's attributes.

One rule for every reader of an attribute table: the faces status is one of the allowed
statuses (``landmarks_given``, an IJB image aligned with the release's own landmarks,
counts wherever ``ok`` does) and the row is not excluded.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

#: faces statuses of the rows a benchmark pool takes by default (``mining.statuses``);
#: ``aligned_input`` = pre-aligned input (``faces.detector: none``), usable like ``ok``
DEFAULT_STATUSES = ("ok", "aligned_input")


def benchmark_pool(status: np.ndarray, exclude: np.ndarray,
                   statuses: Sequence[str] = DEFAULT_STATUSES) -> np.ndarray:
    """Rows that may enter a benchmark: status in ``statuses`` and not excluded.

    ``landmarks_given`` (an IJB image aligned with the release's own landmarks) is an ok
    face: it counts wherever ``ok`` does.
    """
    allowed = list(statuses) + (["landmarks_given"] if "ok" in statuses else [])
    return np.isin(np.asarray(status).astype(str), allowed) \
        & ~np.asarray(exclude).astype(bool)
