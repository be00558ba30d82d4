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

Every input pair keeps a status (:data:`STATUS`); too few identities, genuine or impostor
pairs on either side is an error that names the numbers and the keys to change.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from facecast.compare.inference import MIN_IDENTITIES
from facecast.evaluate.folds import EVAL_FOLD
from facecast.mitigation.auto import side_counts

__all__ = ["STATUS", "Split", "check_sides", "split_by_fraction", "split_by_source"]

#: the status of every input pair of the evaluated protocol, and what it means
STATUS = {
    "evaluated": "",
    "calibration": "both identities are calibration identities: the methods learn on it",
    "cross": "one calibration and one evaluated identity: used nowhere",
    "excluded": "an identity of the calibration benchmark: used nowhere",
    "held_out": "outside evaluate's test (a held-out fold such as val): counted nowhere",
    "bad_score": "score is missing or not finite",
    "bad_label": "label is not 0 or 1",
    "no_partner_score": "a model of the fusion did not score it: left out of every row",
}


@dataclass
class Split:
    """Every input pair with its ``status``/``message``, the calibration identities, the
    calibration pairs (finite scores, labels 0/1) and a description of the split."""

    pairs: pd.DataFrame
    calibration_ids: list[str]
    calibration: pd.DataFrame
    source: str

    @property
    def evaluated(self) -> pd.DataFrame:
        """The evaluated pairs (status ``evaluated``), index reset."""
        return self.pairs[self.pairs["status"] == "evaluated"].reset_index(drop=True)


def _usable(pairs: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    score = pd.to_numeric(pairs["score"], errors="coerce").to_numpy(np.float64)
    label = pd.to_numeric(pairs["label"], errors="coerce").to_numpy(np.float64)
    return np.isfinite(score), np.isin(label, (0.0, 1.0))


def _with_status(pairs: pd.DataFrame, status: np.ndarray) -> pd.DataFrame:
    out = pairs.copy()
    out["status"] = status.astype(str)
    out["message"] = [STATUS[s] for s in out["status"]]
    return out


def _identities(pairs: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    return (pairs["identity_a"].astype(str).to_numpy(),
            pairs["identity_b"].astype(str).to_numpy())


def _statuses(pairs: pd.DataFrame, cal_ids: set[str], learn_here: bool) -> np.ndarray:
    """Each pair's status given the calibration identities (module docstring)."""
    ia, ib = _identities(pairs)
    in_a = np.isin(ia, list(cal_ids))
    in_b = np.isin(ib, list(cal_ids))
    ok_score, ok_label = _usable(pairs)
    test = (pairs[EVAL_FOLD].astype(str).to_numpy() != "" if EVAL_FOLD in pairs.columns
            else np.ones(len(pairs), bool))
    status = np.full(len(pairs), "evaluated", dtype=object)
    status[~test] = "held_out"
    status[in_a | in_b] = "cross" if learn_here else "excluded"
    status[in_a & in_b] = "calibration" if learn_here else "excluded"
    status[~ok_score] = "bad_score"
    status[~ok_label] = "bad_label"
    return status


def split_by_fraction(pairs: pd.DataFrame, fraction: float, seed: int) -> Split:
    """Draw ``round(fraction * n)`` of the protocol's ``n`` identities (seeded) as the
    calibration identities; see the module docstring."""
    ia, ib = _identities(pairs)
    ids = np.array(sorted(set(ia) | set(ib)), dtype=object)
    rng = np.random.default_rng(int(seed))
    n_cal = side_counts(len(ids), fraction)[0]
    cal = sorted(str(i) for i in ids[rng.permutation(len(ids))[:n_cal]])
    out = _with_status(pairs, _statuses(pairs, set(cal), learn_here=True))
    calib = out[out["status"] == "calibration"].reset_index(drop=True)
    return Split(out, cal, calib, f"a seeded {fraction:g} of the protocol's {len(ids)} "
                                  f"identities (seed {int(seed)})")


def split_by_source(pairs: pd.DataFrame, source: pd.DataFrame, *, same_dataset: bool,
                    name: str) -> Split:
    """The scored pairs ``source`` (benchmark ``name``) calibrate; on the same dataset
    their identities leave the evaluated pairs."""
    sa, sb = _identities(source)
    cal = sorted(set(sa) | set(sb))
    drop = set(cal) if same_dataset else set()
    out = _with_status(pairs, _statuses(pairs, drop, learn_here=False))
    ok_score, ok_label = _usable(source)
    calib = source[ok_score & ok_label].reset_index(drop=True)
    where = "" if same_dataset else " (another dataset: its people are not the evaluated)"
    return Split(out, cal, calib, f"the scored pairs of {name}{where}")


def _side_counts(pairs: pd.DataFrame) -> tuple[int, int, int]:
    ia, ib = _identities(pairs)
    label = pd.to_numeric(pairs["label"], errors="coerce").to_numpy()
    return len(set(ia) | set(ib)), int((label == 1).sum()), int((label == 0).sum())


def check_sides(split: Split, protocol: str) -> dict[str, int]:
    """The identity, genuine and impostor counts of both sides; raises ``ValueError``
    naming every shortfall (fewer than :data:`MIN_IDENTITIES` identities, no genuine or
    no impostor pair on a side) and the keys that change the split."""
    counts, problems = {}, []
    for side, frame in (("calibration", split.calibration), ("evaluated", split.evaluated)):
        n_id, n_gen, n_imp = _side_counts(frame)
        counts.update({f"{side}_identities": n_id, f"{side}_genuine": n_gen,
                       f"{side}_impostors": n_imp})
        if n_id < MIN_IDENTITIES:
            problems.append(f"{n_id} {side} identities (at least {MIN_IDENTITIES} needed)")
        if n_gen == 0:
            problems.append(f"no {side} genuine pair")
        if n_imp == 0:
            problems.append(f"no {side} impostor pair")
    if problems:
        raise ValueError(
            f"mitigation.calibration: the split of {protocol} ({split.source}) leaves "
            + "; ".join(problems) + ". Change mitigation.calibration.fraction, or "
            "calibrate on another benchmark or dataset (mitigation.calibration.benchmark, "
            "mitigation.calibration.dataset)")
    return counts
