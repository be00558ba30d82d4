"""The one fold rule of facecast's 10-fold accuracy (issue 30.3).

Every stage that reports a 10-fold accuracy of scored pairs (``evaluate``, ``compare``,
``slices``) takes its folds from :func:`evaluation_folds`, so the same pairs give the same
figure wherever it is printed:

- the pairs of the 10-fold test are the protocol's pairs outside the held-out folds
  (``val``; :data:`facecast.evaluate.protocols.HELD_OUT_FOLDS`), or all of them with
  ``include_val``;
- when those carry two or more fold names (a mined benchmark, CAST lists, a ``.bin``'s
  consecutive blocks, an imported list folder), the protocol's folds are used as they are;
- otherwise (one fold, or no ``fold`` column) the pairs are dealt over ``n_folds`` folds,
  stratified by label and identity with a seed
  (:func:`facecast.evaluate.protocols.stratified_folds`) - over every test pair of the
  protocol, whatever its status, so two models with different failures share each pair's
  fold.

The ``evaluate`` stage writes the folds it used into each scores file (column
``eval_fold``; ``""`` outside the test) and the rule in provenance (``folds``), so later
stages read them back (:func:`scored_folds`) instead of forming their own.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from facecast.evaluate.protocols import HELD_OUT_FOLDS, fold_range, stratified_folds

__all__ = ["EVAL_FOLD", "evaluation_folds", "scored_folds", "accuracy_test_mask"]

#: column of a scores file: the fold each pair had in the 10-fold accuracy ("" = not in it)
EVAL_FOLD = "eval_fold"


def accuracy_test_mask(pairs: pd.DataFrame, include_val: bool = False) -> np.ndarray:
    """The pairs of the 10-fold test: outside the held-out folds, or all with
    ``include_val``."""
    if include_val or "fold" not in pairs.columns:
        return np.ones(len(pairs), bool)
    return ~pairs["fold"].astype(str).isin(HELD_OUT_FOLDS).to_numpy()


def evaluation_folds(pairs: pd.DataFrame, *, n_folds: int = 10, seed: int = 0,
                     include_val: bool = False, note: str | None = None
                     ) -> tuple[np.ndarray, str]:
    """Each pair's fold in the 10-fold accuracy (``""`` outside the test) and a note saying
    how the folds were formed; see the module docstring for the rule.

    ``pairs`` has ``label`` and optionally ``fold`` and ``identity_a``; ``note`` is the
    protocol's own description of its folds (kept when its folds are used).
    """
    test = accuracy_test_mask(pairs, include_val)
    out = np.full(len(pairs), "", dtype=object)
    given = (pairs["fold"].astype(str).to_numpy() if "fold" in pairs.columns
             else np.full(len(pairs), "", dtype=object))
    names = sorted(pd.unique(given[test]).tolist(), key=lambda f: (not f.isdigit(), len(f), f))
    if len(names) >= 2:
        out[test] = given[test]
        return out.astype(str), note or f"from the protocol's folds {fold_range(names)}"
    ident = None
    if "identity_a" in pairs.columns:
        ident = pairs.loc[test, "identity_a"].astype(str).to_numpy()
        if not (ident != "").any():
            ident = None
    if test.any():
        out[test] = stratified_folds(pairs.loc[test, "label"].to_numpy(), ident, int(n_folds),
                                     int(seed))
    by = "label and identity" if ident is not None else "label"
    return out.astype(str), (f"stratified by {by} over the protocol's single fold "
                             f"({names[0] if names else '-'}), {n_folds} folds, seed {seed}")


def scored_folds(scored: pd.DataFrame, *, n_folds: int = 10, seed: int = 0,
                 include_val: bool = False) -> np.ndarray:
    """The folds of a scores file: its ``eval_fold`` column (what ``evaluate`` used) when
    it has one, else :func:`evaluation_folds` of its pairs with these settings."""
    if EVAL_FOLD in scored.columns:
        return scored[EVAL_FOLD].astype(str).to_numpy()
    return evaluation_folds(scored, n_folds=n_folds, seed=seed, include_val=include_val)[0]
