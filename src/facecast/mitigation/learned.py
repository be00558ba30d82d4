"""``learned.json``: what each method learned on the calibration pairs, in numbers a
person can check (thresholds, offsets, calibration maps, fusion weights, counts). Arrays
too large to read (k-means centres, cohort statistics) are summarised. With several fits
(cross-fitting, :mod:`facecast.mitigation.crossfit`) each fit has its record under
``fits``; with one, its record is the file's top level (and ``fits`` names it)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from facecast.mitigation.methods import Result
from facecast.mitigation.split import Split

__all__ = ["learned_record", "learned_records"]


def _plain(v: Any) -> Any:
    """JSON-able lists and numbers (NaN stays NaN)."""
    if isinstance(v, np.ndarray):
        return [_plain(x) for x in v.tolist()]
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    if isinstance(v, (np.floating, float)):
        return float(v)
    if isinstance(v, (np.integer, int)) and not isinstance(v, bool):
        return int(v)
    if isinstance(v, np.bool_):
        return bool(v)
    return v


def _thresholds(obj: Any) -> dict[str, Any]:
    out = {"global_threshold": obj.global_threshold, "thresholds": obj.thresholds,
           "offsets": obj.offsets, "n_impostors": obj.n_impostors,
           "resolvable": obj.resolvable}
    if hasattr(obj, "groups"):
        out["groups"] = obj.groups
    return out


def learned_record(res: Result, split: Split, counts: Mapping[str, int]) -> dict[str, Any]:
    """The record of the module docstring."""
    ln = res.learned
    rec: dict[str, Any] = {"split": {"source": split.source, **dict(counts)},
                           "methods": list(res.scores), "notes": list(res.notes)}
    if "cohort" in ln:
        rec["cohort"] = {"size": len(ln["cohort"]["images"]), "top_k": ln["cohort"]["top_k"],
                         "images": ln["cohort"]["images"]}
    if "kmeans" in ln:
        rec["kmeans"] = {m: {"clusters": v["k"]} for m, v in ln["kmeans"].items()}
    for m in ("fsn", "group_thresholds"):
        if m in ln:
            rec[m] = _thresholds(ln[m])
    for m in ("faircal", "oracle_cal"):
        if m in ln:
            rec[m] = ln[m].as_dict()
    if "fusion" in ln:
        fu = ln["fusion"]
        rec["fusion"] = {"models": fu.models, "mean": fu.mean, "sd": fu.sd,
                         "weights": fu.weights, "intercept": fu.intercept}
    rec["ks_maps"] = {m: b.as_list() for m, b in ln.get("ks_maps", {}).items()}
    return _plain_tree(rec)


def learned_records(results: list[Result], split: Split, counts: Mapping[str, int]
                    ) -> dict[str, Any]:
    """``learned.json`` (module docstring): one fit's record at the top level, several
    fits' under ``fits`` with each fit's name, excluded folds and pair counts."""
    heads = [{"fit": f.name, "excluded": list(f.excluded), "n_calibration": len(f.calibration),
              "n_evaluated": len(f.rows)} for f in split.fits]
    if len(results) == 1:
        return {**learned_record(results[0], split, counts), "fits": _plain_tree(heads)}
    common = [n for n in results[0].notes if all(n in r.notes for r in results)]
    notes = common + [f"fit {h['fit']}: {n}" for h, r in zip(heads, results, strict=True)
                      for n in r.notes if n not in common]
    fits = []
    for h, res in zip(heads, results, strict=True):
        rec = learned_record(res, split, counts)
        fits.append({**h, **{k: v for k, v in rec.items() if k != "split"}})
    return _plain_tree({"split": {"source": split.source, **dict(counts)},
                        "methods": list(results[0].scores), "notes": notes, "fits": fits})


def _plain_tree(v: Any) -> Any:
    if isinstance(v, dict):
        return {str(k): _plain_tree(x) for k, x in v.items()}
    return _plain(v)
