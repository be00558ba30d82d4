"""Searches of entries without a feature, by the one failure rule (``evaluate.failed``).

ISO/IEC 19795-1 counts a search that could not be made as an error of the system, never
as no search. Under ``nonmatch`` (the default; :mod:`facecast.evaluate.failures`):

- a mated probe without a feature (no face, decode error, no embedding) is a miss at every
  rank and threshold (rank ``k + 1``, "beyond the candidate list"; mate score ``-inf``);
- a mated probe whose identity's gallery entry has no feature cannot find its mate: a miss
  the same way (its search over the other entries is still made and kept);
- a non-mated probe without a feature returns no candidate: top scores ``-inf``, so it is
  never a false positive (a correct reject, as an impostor pair without a feature in 1:1);
- the gallery size N counts every enrolled identity, with or without a feature.

Under ``drop`` the entries without a feature leave the protocol (role ``unused``, reason
``no embedding (<role>)``), as before. :func:`search_with_misses` wraps a search of the
entries that have a feature and puts the misses in.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from facecast.evaluate.failures import FAILED_SCORE
from facecast.identification.search import SearchResult


def search_with_misses(gal_have: np.ndarray, probe_have: np.ndarray, mate: np.ndarray,
                       k: int, run: Callable[[np.ndarray, np.ndarray, np.ndarray],
                                             SearchResult]
                       ) -> tuple[SearchResult, np.ndarray]:
    """``(result over every probe, failed)``: ``run(gallery rows, probe rows, mate)``
    searches the probes that have a feature against the gallery entries that have one
    (``mate`` renumbered among those; -1 when non-mated or the mate has no feature); every
    other probe and every mate without a feature is a miss (module docstring).

    ``gal_have`` / ``probe_have``: per gallery entry / probe whether it has a feature;
    ``mate``: per probe its gallery position (-1 non-mated); ``k``: the candidate list's
    length. ``failed``: per probe, True when the probe or its mate has no feature. A
    candidate slot without an entry has index -1 and score ``-inf``.
    """
    gal_have = np.asarray(gal_have, bool)
    probe_have = np.asarray(probe_have, bool)
    mate = np.asarray(mate, np.int64)
    n_p = mate.shape[0]
    g_idx = np.flatnonzero(gal_have)
    new_pos = np.full(gal_have.shape[0], -1, np.int64)
    new_pos[g_idx] = np.arange(g_idx.shape[0])
    mated = mate >= 0
    mate_lost = mated & ~gal_have[np.where(mated, mate, 0)]
    p_idx = np.flatnonzero(probe_have)
    sub_mate = np.where(mated & ~mate_lost, new_pos[np.where(mated, mate, 0)], -1)[p_idx]
    res = run(g_idx, p_idx, sub_mate)
    width = max(int(k), res.top_index.shape[1] if res.top_index.ndim == 2 else 0)
    top_i = np.full((n_p, width), -1, np.int64)
    top_s = np.full((n_p, width), FAILED_SCORE, np.float32)
    found = res.top_index.shape[1]
    top_i[p_idx, :found] = g_idx[res.top_index] if g_idx.size else -1
    top_s[p_idx, :found] = res.top_score
    m_score = np.full(n_p, np.nan, np.float32)
    m_rank = np.zeros(n_p, np.int64)
    m_score[p_idx] = res.mate_score
    m_rank[p_idx] = res.mate_rank
    failed = mate_lost | ~probe_have
    miss = mated & failed
    m_score[miss] = FAILED_SCORE
    m_rank[miss] = width + 1
    return SearchResult(top_i, top_s, m_score, m_rank), failed
