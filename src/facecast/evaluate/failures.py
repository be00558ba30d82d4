"""One rule for pairs that could not be compared (``evaluate.failed``).

ISO/IEC 19795-1's generalized FMR and FNMR count a comparison that could not be made
because a feature is missing (no face, a decode error, a failed alignment, no
embedding) as a non-match: a false non-match when the pair is genuine, a correct reject
when it is an impostor pair. NIST FRTE does the same for a failure to template. So a
detector that misses more faces never makes a model look better.

- ``nonmatch`` (the default): every pair is kept; a pair that was not scored gets the
  score :data:`FAILED_SCORE` (``-inf``), below every real score, so every threshold
  rejects it.
- ``drop``: the pairs that were not scored are left out (each model on the pairs it
  scored). The two rules agree when every pair was scored.

A pair that is not a comparison of the protocol at all - a line that could not be read
(``malformed``), a label that is not 0 or 1 (``bad_label``), a fold it cannot have
(``bad_fold``): :data:`INVALID_STATUSES` - is no failure of the system: it is left out
under both rules (the scores file keeps it with its status). Every other status that is
not ``ok`` (``no_face``, ``decode_error``, ``missing``, ``not_in_manifest``,
``no_embedding``, a BFW ``bad_score``, ...), and an ``ok`` pair without a score, is a
pair without a feature.

Every stage that turns scores into rates reads the rule through :func:`apply_failure_rule`
(frames) or :func:`decision_scores` (arrays), and every table it writes keeps ``n_pairs``
and adds ``n_failed`` with :func:`rule_text` naming the rule.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

#: the values of ``evaluate.failed`` (and its alias ``templates.failed``)
FAILED_RULES = ("nonmatch", "drop")

#: the default rule: ISO/IEC 19795-1's generalized rates
DEFAULT_RULE = "nonmatch"

#: the score a pair that was not scored gets under ``nonmatch``
FAILED_SCORE = -np.inf

#: pair statuses that make a row no comparison of the protocol (left out by both rules)
INVALID_STATUSES = ("malformed", "bad_label", "bad_fold")


def check_rule(rule: str, key: str = "evaluate.failed") -> str:
    """``rule`` if it is one of :data:`FAILED_RULES`; else ``ValueError`` naming ``key``."""
    if rule not in FAILED_RULES:
        raise ValueError(f"{key} must be one of {list(FAILED_RULES)}, got {rule!r}")
    return rule


def rule_of(config: Mapping[str, Any] | None) -> str:
    """The failure rule of a whole config (``evaluate.failed``; default ``nonmatch``)."""
    evaluate = (config or {}).get("evaluate") or {}
    return check_rule(str(evaluate.get("failed", DEFAULT_RULE)))


def invalid_mask(frame: pd.DataFrame, status_col: str = "status",
                 label_col: str = "label") -> np.ndarray:
    """True where a row is no comparison of the protocol: a status of
    :data:`INVALID_STATUSES` or (when the frame has labels) a label that is not 0 or 1."""
    bad = np.zeros(len(frame), bool)
    if status_col in frame.columns:
        bad |= frame[status_col].astype(str).isin(INVALID_STATUSES).to_numpy()
    if label_col in frame.columns:
        label = pd.to_numeric(frame[label_col], errors="coerce").to_numpy(np.float64)
        bad |= ~np.isin(label, (0.0, 1.0))
    return bad


def failed_mask(frame: pd.DataFrame, status_col: str = "status",
                score_col: str = "score") -> np.ndarray:
    """True where a comparison was not scored: its status is not ``ok`` (when the frame
    has a status column) or its score is missing (NaN). Rows of
    :func:`invalid_mask` are no comparison and never failed."""
    score = pd.to_numeric(frame[score_col], errors="coerce").to_numpy(np.float64)
    bad = np.isnan(score)
    if status_col in frame.columns:
        bad |= frame[status_col].astype(str).to_numpy() != "ok"
    return bad & ~invalid_mask(frame, status_col)


def decision_scores(scores: np.ndarray, ok: np.ndarray, labels: np.ndarray,
                    rule: str = DEFAULT_RULE) -> tuple[np.ndarray, np.ndarray]:
    """``(scores, labels)`` of the pairs the rates count: under ``nonmatch`` every pair,
    a pair that was not scored (``ok`` False) at :data:`FAILED_SCORE`; under ``drop`` the
    scored pairs only."""
    check_rule(rule)
    scores = np.asarray(scores, np.float64)
    ok = np.asarray(ok, bool)
    labels = np.asarray(labels)
    if rule == "drop":
        return scores[ok], labels[ok]
    return np.where(ok, scores, FAILED_SCORE), labels


def apply_failure_rule(frame: pd.DataFrame, rule: str = DEFAULT_RULE, *,
                       status_col: str = "status", score_col: str = "score"
                       ) -> pd.DataFrame:
    """A copy of the rows the rates count under ``rule``, with a boolean column ``failed``
    (the index kept, so a caller can align other columns).

    ``nonmatch``: every comparison, ``score`` set to :data:`FAILED_SCORE` where the pair
    was not scored (:func:`failed_mask`). ``drop``: the scored rows only. Under both rules
    rows that are no comparison (:func:`invalid_mask`) are left out. Fits (thresholds,
    calibrations, normalisations) should learn from ``~failed`` rows; rates count every
    row returned.
    """
    check_rule(rule)
    bad = failed_mask(frame, status_col, score_col)
    keep = ~invalid_mask(frame, status_col)
    if rule == "drop":
        keep &= ~bad
    out = frame.loc[keep].copy()
    score = pd.to_numeric(out[score_col], errors="coerce").to_numpy(np.float64).copy()
    score[bad[keep]] = FAILED_SCORE
    out[score_col] = score
    out["failed"] = bad[keep]
    return out


def failure_counts(failed: np.ndarray, labels: np.ndarray | None = None
                   ) -> dict[str, int]:
    """``n_pairs`` and ``n_failed`` (and, given labels, ``n_failed_genuine`` and
    ``n_failed_impostor``) of the pairs a table counts."""
    failed = np.asarray(failed, bool)
    out = {"n_pairs": int(len(failed)), "n_failed": int(failed.sum())}
    if labels is not None:
        y = np.asarray(labels).astype(bool)
        out["n_failed_genuine"] = int((failed & y).sum())
        out["n_failed_impostor"] = int((failed & ~y).sum())
    return out


def rule_text(rule: str, n_failed: int | None = None) -> str:
    """One sentence naming the rule, for a table's text."""
    check_rule(rule)
    head = "" if n_failed is None else f"{n_failed} pair(s) without a feature: "
    if rule == "nonmatch":
        text = (head + "pairs without a feature count as non-matches (evaluate.failed: "
                "nonmatch, ISO/IEC 19795-1 generalized FMR/FNMR): a false non-match when "
                "genuine, a correct reject when impostor.")
    else:
        text = (head + "pairs without a feature are left out (evaluate.failed: drop): each "
                "rate is over the pairs the model scored.")
    return text[0].upper() + text[1:]


def status_counts(statuses: pd.Series | np.ndarray) -> str:
    """``"decode_error: 1, no_face: 3"``: how many rows have each status, sorted by name
    (``""`` for none)."""
    counts = pd.Series(np.asarray(statuses).astype(str)).value_counts()
    return ", ".join(f"{k}: {int(v)}" for k, v in sorted(counts.items()))
