"""Values at given positions of a sorted column, ``np.sort(v)[ks]``, without sorting it.

CAST's rank slices need the values at four sorted positions of a column (just inside and
just outside each end) to see whether a tie is cut. A full value sort of 42M float32
values takes ~0.4 s; here a strided sample (every :data:`SAMPLE_STEP`-th row, sorted)
brackets each group of positions by two values ``a <= b``, and only the rows in
``[a, b]`` are sorted: the value at sorted position ``k`` is the ``(k - #(v < a))``-th of
them. Exact whatever the sample (it only decides the bracket): a bracket that misses its
positions, a position among the NaN rows (sorted last) or a small column falls back to
``np.sort``. Values equal as numbers (``-0.0`` and ``0.0``) may come back as either, as
from ``np.sort``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

#: every SAMPLE_STEP-th row forms the sample that brackets the positions
SAMPLE_STEP = 64
#: sample positions kept on each side of a position's estimate (the bracket's width)
SAMPLE_MARGIN = 1024


def _groups(ks: Sequence[int], gap: int) -> list[list[int]]:
    """Sorted distinct ``ks`` split where two neighbours are more than ``gap`` apart."""
    out: list[list[int]] = []
    for k in sorted(set(ks)):
        if out and k - out[-1][-1] <= gap:
            out[-1].append(k)
        else:
            out.append([k])
    return out


def _bracketed(v: np.ndarray, ks: list[int], sample: np.ndarray, n_num: int
               ) -> list | None:
    """The values at sorted positions ``ks`` (close together, all below ``n_num``, the
    count of non-NaN rows) from the rows between two sample values; None when the bracket
    misses a position."""
    s_num = len(sample)
    lo = int(ks[0] * s_num // n_num) - SAMPLE_MARGIN
    hi = int(-(-(ks[-1] + 1) * s_num // n_num)) + SAMPLE_MARGIN
    a = sample[lo] if lo > 0 else None
    b = sample[hi] if hi < s_num else None
    if a is None and b is None:
        return None
    if a is None:
        inside, below = v <= b, 0
    else:
        inside = v >= a
        if b is not None:
            inside &= v <= b
        below = int(np.count_nonzero(v < a))
    vals = np.sort(v[inside])
    if not (below <= ks[0] and ks[-1] < below + len(vals)):
        return None
    return [vals[k - below] for k in ks]


def sorted_at(v: np.ndarray, ks: Sequence[int]) -> dict[int, object]:
    """``{k: np.sort(v)[k]}`` for the positions ``ks`` (0 <= k < len(v)) of a 1-D float
    column (NaN sorted last), equal as numbers to ``np.sort``'s values (see the module
    docstring); other dtypes and small columns are sorted whole."""
    n = len(v)
    ks = [int(k) for k in ks]
    if v.dtype.kind != "f" or n < 4 * SAMPLE_STEP * SAMPLE_MARGIN or not ks:
        part = np.sort(v)
        return {k: part[k] for k in ks}
    n_num = n - int(np.count_nonzero(np.isnan(v)))
    sample = np.sort(v[::SAMPLE_STEP])
    sample = sample[:len(sample) - int(np.count_nonzero(np.isnan(sample)))]  # NaN last
    out: dict[int, object] = {}
    if max(ks) < n_num and len(sample):
        for group in _groups(ks, SAMPLE_STEP * SAMPLE_MARGIN):
            vals = _bracketed(v, group, sample, n_num)
            if vals is None:
                break
            out.update(zip(group, vals, strict=True))
        else:
            return out
    part = np.sort(v)
    return {k: part[k] for k in ks}
