"""The calibration split by identity: what the methods learn on, what is evaluated.

Every method that learns (cohorts, clusters, thresholds, calibration maps, fusion weights)
learns on *calibration identities*, disjoint from the identities of the evaluated pairs:

* ``fraction`` (default): a seeded share of the protocol's identities (sorted, permuted
  with ``numpy.random.default_rng(seed)``) is the calibration set; the calibration pairs
  are the protocol's pairs among them (any fold: the held-out ``val`` fold calibrates
  too), the evaluated pairs the protocol's pairs among the other identities inside
  evaluate's 10-fold test. Pairs of one identity from each side are used nowhere.
* a calibration source (``benchmark`` and/or ``dataset``): that benchmark's scored pairs
  calibrate. On the same dataset its identities leave the evaluated pairs; on another
  dataset the two sets of people are disjoint by construction and every pair of the
  protocol is evaluated.

Cross-fitting (several fits, each scoring the pairs of identities it never saw) lives in
:mod:`facecast.mitigation.crossfit`; each split here is one fit (:class:`Fit`).

Pairs without a feature (``evaluate.failed``, :mod:`facecast.evaluate.failures`) never
calibrate; under ``nonmatch`` those on the evaluated side are evaluated (column ``failed``:
a non-match after every method), under ``drop`` they are left out (status ``failed``).

Every input pair keeps a status (:data:`STATUS`); too few identities, genuine or impostor
pairs on either side is an error that names the numbers and the keys to change.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from facecast.compare.inference import MIN_IDENTITIES
from facecast.evaluate.failures import DEFAULT_RULE, check_rule, failed_mask, invalid_mask
from facecast.evaluate.folds import EVAL_FOLD
from facecast.mitigation.auto import side_counts

__all__ = ["STATUS", "Fit", "Split", "check_sides", "mark_failed", "split_by_fraction",
           "split_by_source"]

#: the status of every input pair of the evaluated protocol, and what it means
STATUS = {
    "evaluated": "",
    "calibration": "both identities are calibration identities: the methods learn on it",
    "cross": "one calibration and one evaluated identity: used nowhere",
    "excluded": "an identity of the calibration benchmark: used nowhere",
    "held_out": "outside evaluate's test (a held-out fold such as val): counted nowhere",
    "bad_score": "score is not finite",
    "bad_label": "label is not 0 or 1",
    "invalid": "no comparison of the protocol (a malformed row or a bad fold)",
    "failed": "not scored (no feature): left out of the evaluated pairs (evaluate.failed: "
              "drop)",
    "not_scored": "not scored (no feature) outside the evaluated pairs: calibrates nothing",
    "no_partner_score": "a model of the fusion did not score it: left out of every row",
}


#: the message of an evaluated pair without a feature under ``nonmatch``
FAILED_EVALUATED = ("not scored (no feature): a non-match under evaluate.failed: nonmatch "
                    "(score -inf after every method, probability 0)")


@dataclass
class Fit:
    """One fit of every method: its name, the identity folds it excludes, its calibration
    pairs (scored, labels 0/1) and the rows of :attr:`Split.evaluated` it scores."""

    name: str
    excluded: tuple[str, ...]
    calibration: pd.DataFrame
    rows: np.ndarray


@dataclass
class Split:
    """Every input pair with its ``status``/``message`` (and ``failed``, ``fit``), the
    calibration identities, the calibration pairs (scored, labels 0/1; with several fits
    every fit's), a description of the split and its fits (one unless cross-fitted)."""

    pairs: pd.DataFrame
    calibration_ids: list[str]
    calibration: pd.DataFrame
    source: str
    fits: list[Fit] = field(default_factory=list)
    how: str = "fraction"

    def __post_init__(self) -> None:
        if not self.fits:
            n = int((self.pairs["status"] == "evaluated").sum())
            self.fits = [Fit("all", (), self.calibration, np.arange(n))]

    @property
    def evaluated(self) -> pd.DataFrame:
        """The evaluated pairs (status ``evaluated``), index reset."""
        return self.pairs[self.pairs["status"] == "evaluated"].reset_index(drop=True)


def mark_failed(pairs: pd.DataFrame) -> pd.DataFrame:
    """A copy of ``pairs`` with a boolean ``failed``: not scored (the scores file's status,
    read as ``input_status``, is not ``ok`` or the score is NaN;
    :func:`facecast.evaluate.failures.failed_mask`), and ``invalid`` (no comparison)."""
    out = pairs.copy()
    col = "input_status" if "input_status" in out.columns else "status"
    out["failed"] = failed_mask(out, col)
    out["invalid"] = invalid_mask(out, col)
    return out


def _usable(pairs: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """``(scored, labelled)``: a finite score of a pair with a feature; a 0/1 label."""
    score = pd.to_numeric(pairs["score"], errors="coerce").to_numpy(np.float64)
    label = pd.to_numeric(pairs["label"], errors="coerce").to_numpy(np.float64)
    failed = pairs["failed"].to_numpy(bool) if "failed" in pairs.columns else False
    return np.isfinite(score) & ~failed, np.isin(label, (0.0, 1.0))


def final_status(pairs: pd.DataFrame, status: np.ndarray, rule: str) -> np.ndarray:
    """``status`` (``evaluated``/``calibration``/...) after the pairs' own problems: a
    failed pair stays evaluated under ``nonmatch``, is ``failed`` (left out) on the
    evaluated side under ``drop`` and ``not_scored`` elsewhere; then ``bad_score`` (a
    scored pair's infinite score), ``invalid``, ``bad_label``."""
    check_rule(rule)
    out = np.asarray(status, dtype=object).copy()
    failed = pairs["failed"].to_numpy(bool)
    score = pd.to_numeric(pairs["score"], errors="coerce").to_numpy(np.float64)
    ok_label = _usable(pairs)[1]
    evaluated = out == "evaluated"
    out[failed & ~evaluated] = "not_scored"
    if rule == "drop":
        out[failed & evaluated] = "failed"
    out[~failed & ~np.isfinite(score)] = "bad_score"
    out[pairs["invalid"].to_numpy(bool)] = "invalid"
    out[~ok_label] = "bad_label"
    return out


def with_status(pairs: pd.DataFrame, status: np.ndarray) -> pd.DataFrame:
    """``pairs`` with ``status`` and its ``message`` (:data:`STATUS`; an evaluated pair
    without a feature: :data:`FAILED_EVALUATED`)."""
    out = pairs.copy()
    out["status"] = np.asarray(status).astype(str)
    out["message"] = [STATUS[s] for s in out["status"]]
    if "failed" in out.columns:
        out.loc[out["failed"].to_numpy(bool) & (out["status"] == "evaluated"),
                "message"] = FAILED_EVALUATED
    return out


def _identities(pairs: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    return (pairs["identity_a"].astype(str).to_numpy(),
            pairs["identity_b"].astype(str).to_numpy())


def in_test(pairs: pd.DataFrame) -> np.ndarray:
    """The pairs inside evaluate's 10-fold test (``eval_fold`` not empty)."""
    return (pairs[EVAL_FOLD].astype(str).to_numpy() != "" if EVAL_FOLD in pairs.columns
            else np.ones(len(pairs), bool))


def _statuses(pairs: pd.DataFrame, cal_ids: set[str], learn_here: bool, rule: str
              ) -> np.ndarray:
    """Each pair's status given the calibration identities (module docstring)."""
    ia, ib = _identities(pairs)
    in_a = np.isin(ia, list(cal_ids))
    in_b = np.isin(ib, list(cal_ids))
    status = np.full(len(pairs), "evaluated", dtype=object)
    status[~in_test(pairs)] = "held_out"
    status[in_a | in_b] = "cross" if learn_here else "excluded"
    status[in_a & in_b] = "calibration" if learn_here else "excluded"
    return final_status(pairs, status, rule)


def split_by_fraction(pairs: pd.DataFrame, fraction: float, seed: int,
                      rule: str = DEFAULT_RULE) -> Split:
    """Draw ``round(fraction * n)`` of the protocol's ``n`` identities (seeded) as the
    calibration identities; see the module docstring."""
    pairs = mark_failed(pairs)
    ia, ib = _identities(pairs)
    ids = np.array(sorted(set(ia) | set(ib)), dtype=object)
    rng = np.random.default_rng(int(seed))
    n_cal = side_counts(len(ids), fraction)[0]
    cal = sorted(str(i) for i in ids[rng.permutation(len(ids))[:n_cal]])
    out = with_status(pairs, _statuses(pairs, set(cal), True, rule))
    calib = out[out["status"] == "calibration"].reset_index(drop=True)
    return Split(out, cal, calib, f"a seeded {fraction:g} of the protocol's {len(ids)} "
                                  f"identities (seed {int(seed)})")


def split_by_source(pairs: pd.DataFrame, source: pd.DataFrame, *, same_dataset: bool,
                    name: str, rule: str = DEFAULT_RULE) -> Split:
    """The scored pairs ``source`` (benchmark ``name``) calibrate; on the same dataset
    their identities leave the evaluated pairs."""
    pairs, source = mark_failed(pairs), mark_failed(source)
    sa, sb = _identities(source)
    cal = sorted(set(sa) | set(sb))
    drop = set(cal) if same_dataset else set()
    out = with_status(pairs, _statuses(pairs, drop, False, rule))
    ok_score, ok_label = _usable(source)
    calib = source[ok_score & ok_label & ~source["invalid"].to_numpy(bool)
                   ].reset_index(drop=True)
    where = "" if same_dataset else " (another dataset: its people are not the evaluated)"
    return Split(out, cal, calib, f"the scored pairs of {name}{where}", how="source")


def _side_counts(pairs: pd.DataFrame) -> tuple[int, int, int]:
    ia, ib = _identities(pairs)
    label = pd.to_numeric(pairs["label"], errors="coerce").to_numpy()
    return len(set(ia) | set(ib)), int((label == 1).sum()), int((label == 0).sum())


def check_sides(split: Split, protocol: str) -> dict[str, int]:
    """The identity, genuine and impostor counts of both sides (with several fits: the
    smallest fit's calibration side, and ``fits``); raises ``ValueError`` naming every
    shortfall (fewer than :data:`MIN_IDENTITIES` identities, no genuine or no impostor
    pair on a side - on a fit's calibration side, named) and the keys that change the
    split."""
    counts: dict[str, int] = {"fits": len(split.fits)}
    problems: list[str] = []
    sides = [(f"calibration (fit {f.name})" if len(split.fits) > 1 else "calibration",
              f.calibration) for f in split.fits]
    smallest = None
    for side, frame in [*sides, ("evaluated", split.evaluated)]:
        n_id, n_gen, n_imp = _side_counts(frame)
        key = "evaluated" if side == "evaluated" else "calibration"
        if key == "evaluated" or smallest is None or n_id < smallest:
            counts.update({f"{key}_identities": n_id, f"{key}_genuine": n_gen,
                           f"{key}_impostors": n_imp})
            smallest = n_id if key == "calibration" else smallest
        if n_id < MIN_IDENTITIES:
            problems.append(f"{n_id} {side} identities (at least {MIN_IDENTITIES} needed)")
        if n_gen == 0:
            problems.append(f"no {side} genuine pair")
        if n_imp == 0:
            problems.append(f"no {side} impostor pair")
    if problems:
        raise ValueError(
            f"mitigation.calibration: the split of {protocol} ({split.source}) leaves "
            + "; ".join(problems) + ". Change mitigation.calibration.fraction or "
            "mitigation.calibration.folds, or calibrate on another benchmark or dataset "
            "(mitigation.calibration.benchmark, mitigation.calibration.dataset)")
    return counts
