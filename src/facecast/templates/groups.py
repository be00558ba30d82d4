"""Demographic groups of IJB templates, and FMR / FNMR per group on template pairs.

A template's value of a protected attribute (``fairness.protected``) comes from its
images' rows of ``attributes.parquet``: for a binned (numeric) attribute the mean of the
images' values is binned; for a categorical one (``values`` map or raw values) the
majority of the images' values wins (ties: the first in the attribute's order, as
:func:`facecast.fairness.groups.majority_vote`), both through the one aggregation
:func:`facecast.analysis.template_level.aggregate_members` that the analysis stage's
template attribute table uses. Images without attributes (not ok) do not vote; a
template no image votes for has no group. A pair counts for group g when both templates
are in g (the fairness stage's rule: cross-group pairs are ``mixed``).

FMR / FNMR per group come from :func:`facecast.fairness.threshold.group_rates` at the
global thresholds meeting each target FMR (:func:`~facecast.fairness.threshold.
thresholds_at_fmr`, over every scored impostor pair); a target below 1/impostors is
flagged not resolvable.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from facecast.analysis.template_level import aggregate_members
from facecast.evaluate.failures import decision_scores
from facecast.evaluate.metrics import far_resolvable
from facecast.fairness.groups import discretise, parse_specs
from facecast.fairness.threshold import group_failures, group_rates, thresholds_at_fmr


def template_groups(members: pd.DataFrame, attributes: pd.DataFrame,
                    protected: Mapping[str, Mapping[str, Any]]) -> pd.DataFrame:
    """One row per template of ``members``: ``template_id``, one column per protected
    attribute and ``group`` (values joined by ``_``; None when one is missing)."""
    specs = parse_specs(protected)
    cols = sorted({s.column for s in specs})
    missing = [c for c in cols if c not in attributes.columns]
    if missing:
        raise KeyError(f"attributes.parquet lacks column(s) {missing} named by "
                       "fairness.protected")
    img = members[["image_id", "template_id"]].merge(
        attributes[["image_id", *cols]].drop_duplicates("image_id"), on="image_id", how="left")
    binned = [s for s in specs if s.bins is not None]
    labelled = [s for s in specs if s.bins is None]
    values = pd.DataFrame(index=img.index)
    for spec in binned:   # the images' mean, binned afterwards
        values[f"mean:{spec.name}"] = pd.to_numeric(img[spec.column], errors="coerce")
    for spec in labelled:  # each image's label, the majority wins
        values[f"vote:{spec.name}"] = discretise(img[spec.column], spec).to_numpy(object)
    tids = np.unique(members["template_id"].to_numpy(np.int64))
    agg = aggregate_members(values, img["template_id"].to_numpy(np.int64),
                            mean=[f"mean:{s.name}" for s in binned],
                            vote=[f"vote:{s.name}" for s in labelled],
                            orders={f"vote:{s.name}": s.order for s in labelled}, index=tids)
    out = pd.DataFrame({"template_id": tids})
    for spec in specs:
        if spec.bins is not None:
            mean = pd.Series(agg[f"mean:{spec.name}"].to_numpy(np.float64))
            out[spec.name] = discretise(mean, spec).to_numpy(object)
        else:
            out[spec.name] = agg[f"vote:{spec.name}"].to_numpy(object)
    names = [s.name for s in specs]
    parts = [out[n].to_numpy(object) for n in names]
    complete = (np.logical_and.reduce([pd.notna(p) for p in parts]) if parts
                else np.zeros(len(out), bool))
    group = np.full(len(out), None, dtype=object)
    if parts:
        group[complete] = ["_".join(map(str, v)) for v in zip(*(p[complete] for p in parts),
                                                              strict=True)]
    out["group"] = group
    return out


def template_group_rates(pairs: pd.DataFrame, groups: pd.DataFrame,
                         fmr_targets: Sequence[float], failed: str = "nonmatch"
                         ) -> pd.DataFrame:
    """FMR / FNMR per group at the global thresholds of ``fmr_targets``; pairs naming a
    template without features count as ``templates.failed`` (an alias of
    ``evaluate.failed``) says (:func:`facecast.evaluate.failures.decision_scores`:
    non-matches at score ``-inf``, or left out); columns
    of :func:`~facecast.fairness.threshold.group_rates` plus ``target_fmr``,
    ``resolvable`` and, per group whatever the rule, ``n_pairs``, ``n_failed`` and ``fte``
    (:func:`~facecast.fairness.threshold.group_failures`: its pairs naming a template
    without features)."""
    ok = pairs["status"].astype(str).to_numpy() == "ok"
    scores, labels = decision_scores(pairs["score"].to_numpy(np.float64), ok,
                                     pairs["label"].to_numpy(), failed)
    g = groups.set_index("template_id")["group"]
    ga = pairs["template_a"].map(g).to_numpy(object)
    gb = pairs["template_b"].map(g).to_numpy(object)
    every = np.where(pd.notna(ga) & (ga == gb), ga, None)
    group = every if failed == "nonmatch" else every[ok]
    imp = scores[labels == 0]
    thr = thresholds_at_fmr(imp, list(fmr_targets))
    rates = group_rates(scores, labels, group, thr)
    targets = np.asarray(fmr_targets, np.float64)
    rates.insert(1, "target_fmr", targets[rates["threshold_index"].to_numpy()])
    rates["resolvable"] = far_resolvable(rates["n_impostor"].to_numpy(),
                                         rates["target_fmr"].to_numpy())
    return rates.merge(group_failures(every, ~ok), on="group", how="left")
