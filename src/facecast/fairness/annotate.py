"""Scored pairs with their images' demographic labels (shared by the quality, cross-matrix,
per-group-threshold and band analyses).

Reuses :mod:`facecast.fairness.groups` (the ``fairness.protected`` / ``legitimate`` specs,
per-identity majority vote) and :func:`facecast.fairness.assess.load_attributes`.

The failure rule (``evaluate.failed``, :mod:`facecast.evaluate.failures`): given a
``rule``, :func:`labelled_pairs` keeps every row; a pair without a feature gets
``failed`` True and score ``-inf`` (:func:`with_failures`), and under ``drop`` the status
``no_feature``, which puts it in no reference set, no cell and no rate
(:func:`mark_failures`); :func:`valid_pairs` then keeps exactly the pairs the rule counts.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from facecast.evaluate.failures import FAILED_SCORE, check_rule, failed_mask
from facecast.fairness.groups import STATUS_MESSAGES, annotate_pairs, image_labels, parse_specs
from facecast.io.parquet_io import read_parquet


def read_scored_pairs(path: str | os.PathLike) -> pd.DataFrame:
    """Scored pairs (``image_a``, ``image_b``, ``identity_a``, ``identity_b``, ``label``,
    ``score``; optional ``fold``) with ids as text; a missing column is an error."""
    pairs = read_parquet(path)
    need = ["image_a", "image_b", "identity_a", "identity_b", "label", "score"]
    missing = [c for c in need if c not in pairs.columns]
    if missing:
        raise ValueError(f"{path} lacks column(s) {missing}; scored pairs need {need}")
    pairs = pairs.rename(columns={"status": "input_status", "message": "input_message"})
    for c in ("image_a", "image_b", "identity_a", "identity_b"):
        pairs[c] = pairs[c].astype(str)
    return pairs


def spec_columns(fairness_cfg: Mapping[str, Any]) -> list[str]:
    """Attribute columns the protected and legitimate specs read."""
    return sorted({spec["column"] for sect in ("protected", "legitimate")
                   for spec in (fairness_cfg.get(sect) or {}).values()})


def with_failures(pairs: pd.DataFrame, status_col: str = "input_status") -> pd.DataFrame:
    """A copy of scored pairs (:func:`read_scored_pairs`) with a boolean ``failed`` column
    (:func:`facecast.evaluate.failures.failed_mask` of the input status and score) and
    score ``-inf`` where it is True; every row kept."""
    out = pairs.copy()
    failed = failed_mask(out, status_col if status_col in out.columns else "status")
    score = pd.to_numeric(out["score"], errors="coerce").to_numpy(np.float64).copy()
    score[failed] = FAILED_SCORE
    out["score"] = score
    out["failed"] = failed
    return out


def mark_failures(ann: pd.DataFrame, rule: str) -> pd.DataFrame:
    """Annotated pairs under the failure rule: under ``drop`` a failed pair that would
    count gets status ``no_feature`` and leaves the reference set and the cells; under
    ``nonmatch`` nothing changes (it counts at score ``-inf``)."""
    check_rule(rule)
    if rule == "nonmatch" or "failed" not in ann.columns:
        return ann
    out = ann.copy()
    drop = out["failed"].to_numpy(bool) & ~out["status"].isin(
        ["bad_score", "bad_label", "held_out"]).to_numpy()
    out.loc[drop, "status"] = "no_feature"
    out.loc[drop, "message"] = STATUS_MESSAGES["no_feature"]
    out.loc[drop, ["in_reference", "in_cells"]] = False
    return out


def labelled_pairs(pairs: pd.DataFrame, attributes: pd.DataFrame,
                   fairness_cfg: Mapping[str, Any], rule: str | None = None
                   ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``(annotated pairs, per-image labels)``.

    The pairs gain ``group_a``, ``group_b``, ``group``, ``status`` ... (see
    :func:`facecast.fairness.groups.annotate_pairs`) and, per attribute ``x`` of the
    protected and legitimate specs, ``x_a`` and ``x_b`` (each image's value). ``rule``
    (``evaluate.failed``): pairs without a feature count by it (:func:`with_failures`,
    :func:`mark_failures`; column ``failed``); without it they are ``bad_score``.
    """
    if rule is not None:
        pairs = with_failures(pairs)
    protected = parse_specs(fairness_cfg.get("protected"))
    legitimate = parse_specs(fairness_cfg.get("legitimate"))
    labels = image_labels(attributes, protected, legitimate,
                          sync=fairness_cfg.get("sync", "majority"))
    ann = annotate_pairs(pairs, labels, protected, legitimate,
                         mixed_pairs=fairness_cfg.get("mixed_pairs", "reference"))
    for spec in [*protected, *legitimate]:
        for side in ("a", "b"):
            ids = ann[f"image_{side}"].to_numpy(object)
            ann[f"{spec.name}_{side}"] = labels[spec.name].reindex(ids).to_numpy(object)
    ann["score"] = pd.to_numeric(ann["score"], errors="coerce").astype(np.float64)
    ann["label"] = pd.to_numeric(ann["label"], errors="coerce")
    if rule is not None:
        ann = mark_failures(ann, rule)
    return ann, labels


def attribute_names(fairness_cfg: Mapping[str, Any]) -> list[str]:
    """``group`` (the joined protected groups), then every protected and legitimate name."""
    return ["group", *[str(k) for k in (fairness_cfg.get("protected") or {})],
            *[str(k) for k in (fairness_cfg.get("legitimate") or {})]]


def valid_pairs(ann: pd.DataFrame) -> pd.DataFrame:
    """Pairs with a score (``-inf`` for a pair without a feature under ``nonmatch``) and a
    0/1 label inside evaluate's test (the others, held-out ``val`` pairs and ``no_feature``
    pairs under ``drop`` included, keep their status upstream)."""
    ok = ~ann["status"].isin(["bad_score", "bad_label", "held_out", "no_feature"]).to_numpy()
    out = ann.loc[ok].reset_index(drop=True)
    out["label"] = out["label"].astype(int)
    return out


def value_order(fairness_cfg: Mapping[str, Any], name: str, seen: Sequence[str]) -> list[str]:
    """Values of attribute ``name`` in their configured order (``labels``), then the rest."""
    specs = {s.name: s for s in parse_specs(fairness_cfg.get("protected"))
             + parse_specs(fairness_cfg.get("legitimate"))}
    seen = [str(v) for v in seen]
    if name in specs:
        order = [v for v in specs[name].order if v in seen]
        return order + sorted(v for v in seen if v not in order)
    if name == "group":
        prot = parse_specs(fairness_cfg.get("protected"))
        combos = [""]
        for s in prot:
            combos = [f"{c}_{v}" if c else v for c in combos for v in s.order]
        order = [c for c in combos if c in seen]
        return order + sorted(v for v in seen if v not in order)
    return sorted(seen)
