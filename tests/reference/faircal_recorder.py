"""Record what FairCal's code returns on our hostile inputs (our code; nothing copied).

``record(checkout)`` runs, from a tiagosalvador/faircal checkout outside this tree (the
code of Salvador et al., ICLR 2022, whose ``approaches.py`` also holds the FSN and
per-group-threshold baselines facecast's mitigation stage follows):

* ``approaches.py``: ``gst`` (per-subgroup thresholds as a score shift, then a beta
  calibration between its shifted bounds), ``find_threshold`` (the thresholds ``gst``
  used) and ``oracle`` (a beta map per subgroup) on :func:`faircal_inputs.gst_case`;
* ``calibration_methods.py``: ``BetaCalibration`` (fit and ``predict``) on
  :data:`faircal_inputs.BETA_CASES`.

The definitions are taken from the files' own source (``ast``,
:func:`insightface_recorder.source_definitions`) and run with numpy, scipy and
scikit-learn: importing the modules would need torch and cvxpy, which these functions do
not use. Their ``LogisticRegression(C=99999999999)`` runs to a tight tolerance
(:func:`tight_logistic_regression`), so the records hold the optimum of the reference's
problem, not where lbfgs's default tolerance stopped. Records go to ``tests/data/reference/faircal/`` (:func:`common.write_record`).
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import faircal_inputs
import numpy as np
from common import checkout_commit, write_record
from insightface_recorder import source_definitions

REPO = "tiagosalvador/faircal"
APPROACHES = "approaches.py"
CALIBRATION = "calibration_methods.py"


def tight_logistic_regression() -> type:
    """scikit-learn's ``LogisticRegression`` solved to ``tol=1e-12`` (its default 1e-4
    stops lbfgs up to ~1e-2 away from the optimum on small groups): the reference's
    calls, arguments and algorithm unchanged, its optimum reached."""
    from sklearn.linear_model import LogisticRegression

    class TightLogisticRegression(LogisticRegression):
        def __init__(self, C: float = 1.0, **kw: Any):
            super().__init__(C=C, tol=1e-12, max_iter=100_000, **kw)

    return TightLogisticRegression


def faircal_functions(checkout: Path) -> dict[str, Any]:
    """The reference's beta calibration and baselines, with the libraries they call
    (``LogisticRegression`` solved tightly: :func:`tight_logistic_regression`)."""
    from scipy.optimize import minimize_scalar
    from sklearn.base import BaseEstimator, RegressorMixin
    from sklearn.metrics import roc_curve
    from sklearn.utils import column_or_1d, indexable

    env: dict[str, Any] = {"np": np, "warnings": warnings, "BaseEstimator": BaseEstimator,
                           "RegressorMixin": RegressorMixin, "column_or_1d": column_or_1d,
                           "indexable": indexable, "minimize_scalar": minimize_scalar,
                           "LogisticRegression": tight_logistic_regression(),
                           "roc_curve": roc_curve}
    source_definitions(checkout / CALIBRATION,
                       ["normalize", "_beta_calibration", "BetaCalibration"], env)
    return source_definitions(checkout / APPROACHES,
                              ["baseline", "gst", "oracle", "find_threshold"], env)


def _split(case: dict[str, dict[str, np.ndarray]]) -> tuple[dict, dict, dict, dict]:
    scores = {d: case[d]["score"] for d in ("cal", "test")}
    truth = {d: case[d]["label"] for d in ("cal", "test")}
    sub = {d: {"g": {"left": case[d]["left"], "right": case[d]["right"]}}
           for d in ("cal", "test")}
    return scores, truth, sub, {"g": list(faircal_inputs.SUBGROUPS)}


def record_gst(fns: dict[str, Any], commit: str) -> list[Path]:
    """``gst``, the thresholds it uses, and ``oracle`` on the gst case (the test pairs'
    outputs: what the maps learned on the calibration pairs do)."""
    case = faircal_inputs.gst_case()
    scores, truth, sub, groups = _split(case)
    fair, conf = fns["gst"](scores, truth, sub, groups, 10, "beta", faircal_inputs.GST_FPR)
    cal = case["cal"]
    same = {g: (cal["left"] == g) & (cal["right"] == g) for g in faircal_inputs.SUBGROUPS}
    thresholds = {
        "global": fns["find_threshold"](cal["score"], cal["label"], faircal_inputs.GST_FPR),
        **{g: fns["find_threshold"](cal["score"][m], cal["label"][m], faircal_inputs.GST_FPR)
           for g, m in same.items()}}
    oracle = fns["oracle"](scores, truth, sub, groups, 10, "beta")
    inputs = {"builder": "faircal_inputs.gst_case", "seed": 41, "fpr": faircal_inputs.GST_FPR,
              "nbins": 10, "calibration_method": "beta"}
    return [
        write_record("faircal", "gst", repo=REPO, commit=commit, path=APPROACHES,
                     function="gst; find_threshold", inputs=inputs,
                     outputs={"thresholds": thresholds,
                              "fair_scores_test": fair["g"]["test"],
                              "confidences_test": conf["g"]["test"]}),
        write_record("faircal", "oracle", repo=REPO, commit=commit, path=APPROACHES,
                     function="oracle", inputs=inputs,
                     outputs={"confidences_test": oracle["test"]["g"]})]


def record_beta(fns: dict[str, Any], commit: str) -> list[Path]:
    """``BetaCalibration`` fitted and applied on every :data:`BETA_CASES` case."""
    out = {}
    for name in faircal_inputs.BETA_CASES:
        c = faircal_inputs.beta_case(name)
        model = fns["BetaCalibration"](c["score"], c["label"], score_min=c["lo"],
                                       score_max=c["hi"])
        out[name] = {"map": [float(v) for v in model.map_],
                     "coef": model.lr_.coef_[0].tolist(),
                     "intercept": float(model.lr_.intercept_[0]),
                     "predict": model.predict(c["test"])}
    inputs = {"builder": "faircal_inputs.beta_case", "cases": faircal_inputs.BETA_CASES}
    return [write_record("faircal", "beta_calibration", repo=REPO, commit=commit,
                         path=CALIBRATION, function="BetaCalibration(...).predict",
                         inputs=inputs, outputs=out)]


def record(checkout: Path) -> list[Path]:
    """Every FairCal record (module docstring)."""
    commit = checkout_commit(checkout)
    fns = faircal_functions(checkout)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return [*record_gst(fns, commit), *record_beta(fns, commit)]
