"""Planted annotation noise for the synthetic demo (issue 14: the label audit must find it).

:func:`plant_label_noise` takes a table with clean ``label_<attr>`` columns and adds
*observed* annotation columns ``label_noisy_<attr>`` (0/1 floats). The clean columns are
never touched: benchmarks, fairness groups, correlations and covariates keep reading the
truth. Four kinds of noise, each from its own seeded stream:

1. ``flip_rate``: per attribute, each image's label flips with probability ``e``.
2. ``group_noise``: one attribute flips with probability ``rate`` only in images whose
   ``label_<group_column>`` equals ``group_value`` (the thesis' necklace/necktie finding).
3. ``contradiction``: exactly ``round(rate * n)`` images get every attribute of a mutually
   exclusive set set to 1 (chosen among images that did not already contradict).
4. ``flipped_identity``: ``count`` identities get ``attribute`` flipped in all their images.

The result is a pure function of (table, spec, seed). Columns ``label_noisy_*`` are added
in sorted order after the existing columns.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

__all__ = ["DEMO_LABEL_NOISE", "noise_attributes", "plant_label_noise", "validate_noise_spec"]

#: What the demo plants (the schema default of ``datasets.<ds>.synthetic.label_noise``).
DEMO_LABEL_NOISE: dict[str, Any] = {
    "enabled": True,
    "flip_rate": {"male": 0.05, "beard": 0.05, "hair_long": 0.05, "bald": 0.03,
                  "glasses": 0.05, "hat": 0.05},
    "group_noise": {"attribute": "hair_long", "group_column": "dark_skin", "group_value": 1.0,
                    "rate": 0.2},
    "contradiction": {"attributes": ["bald", "hair_long"], "rate": 0.04},
    "flipped_identity": {"attribute": "male", "count": 1},
}

_NOISE_STREAM = 7


def noise_attributes(spec: Mapping[str, Any]) -> list[str]:
    """Attributes that get a ``label_noisy_<attr>`` column under ``spec`` (sorted)."""
    names = set((spec.get("flip_rate") or {}).keys())
    if spec.get("group_noise"):
        names.add(spec["group_noise"]["attribute"])
    if spec.get("contradiction"):
        names.update(spec["contradiction"]["attributes"])
    if spec.get("flipped_identity"):
        names.add(spec["flipped_identity"]["attribute"])
    return sorted(names)


def validate_noise_spec(spec: Mapping[str, Any], columns: list[str] | None = None) -> list[str]:
    """Problems with a noise spec (empty list when fine); ``columns`` checks the table too."""
    errs = []
    for attr, e in (spec.get("flip_rate") or {}).items():
        if not 0.0 <= float(e) <= 0.5:
            errs.append(f"label_noise.flip_rate.{attr}: {e} is not in [0, 0.5]")
    g = spec.get("group_noise") or {}
    if g and not 0.0 <= float(g.get("rate", 0.0)) <= 1.0:
        errs.append(f"label_noise.group_noise.rate: {g.get('rate')} is not in [0, 1]")
    c = spec.get("contradiction") or {}
    if c:
        if len(c.get("attributes", [])) < 2:
            errs.append("label_noise.contradiction.attributes: needs at least 2 attributes")
        if not 0.0 <= float(c.get("rate", 0.0)) <= 1.0:
            errs.append(f"label_noise.contradiction.rate: {c.get('rate')} is not in [0, 1]")
    if columns is not None:
        need = {f"label_{a}" for a in noise_attributes(spec)}
        if g:
            need.add(f"label_{g['group_column']}")
        errs += [f"label_noise: the table has no column {c!r}" for c in sorted(need - set(columns))]
    return errs


def plant_label_noise(table: pd.DataFrame, spec: Mapping[str, Any] | None,
                      seed: int) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Return (table with ``label_noisy_*`` columns, summary of what was planted).

    ``spec`` None or ``enabled: false`` returns the table unchanged and an empty summary.
    The summary holds, per kind, the number of planted changes (for provenance and tests).
    """
    if not spec or not spec.get("enabled", True):
        return table, {}
    errs = validate_noise_spec(spec, list(table.columns))
    if errs:
        raise ValueError("; ".join(errs))
    out = table.copy()
    n = len(out)
    rng = np.random.default_rng(np.random.SeedSequence([int(seed) & 0xFFFFFFFF, _NOISE_STREAM]))
    attrs = noise_attributes(spec)
    noisy = {a: (out[f"label_{a}"].to_numpy(dtype=float) >= 0.5).astype(float) for a in attrs}
    summary: dict[str, Any] = {}
    for attr in attrs:  # 1. per-attribute flips (one uniform draw per attribute, fixed order)
        u = rng.random(n)
        e = float((spec.get("flip_rate") or {}).get(attr, 0.0))
        flip = u < e
        noisy[attr][flip] = 1.0 - noisy[attr][flip]
        summary[f"flips_{attr}"] = int(flip.sum())
    g = spec.get("group_noise") or {}
    if g:  # 2. group-specific flips
        u = rng.random(n)
        in_group = np.isclose(out[f"label_{g['group_column']}"].to_numpy(dtype=float),
                              float(g["group_value"]))
        flip = in_group & (u < float(g["rate"]))
        a = g["attribute"]
        noisy[a][flip] = 1.0 - noisy[a][flip]
        summary[f"group_flips_{a}"] = int(flip.sum())
    f = spec.get("flipped_identity") or {}
    if f and int(f.get("count", 0)) > 0:  # 4. whole identities flipped
        ids = np.asarray(sorted(out["identity"].astype(str).unique()))
        chosen = rng.choice(ids, size=min(int(f["count"]), len(ids)), replace=False)
        mask = out["identity"].astype(str).isin(set(chosen.tolist())).to_numpy()
        a = f["attribute"]
        noisy[a][mask] = 1.0 - noisy[a][mask]
        summary["flipped_identities"] = sorted(chosen.tolist())
    c = spec.get("contradiction") or {}
    if c:  # 3. an exact number of planted contradictions (last, so nothing undoes them)
        cols = list(c["attributes"])
        already = np.sum([noisy[a] for a in cols], axis=0) >= 2
        free = np.flatnonzero(~already)
        k = min(int(round(float(c["rate"]) * n)), free.size)
        pick = rng.choice(free, size=k, replace=False) if k else np.zeros(0, int)
        for a in cols:
            noisy[a][pick] = 1.0
        summary["planted_contradictions"] = int(k)
        summary["contradictions_total"] = int(already.sum() + k)
    for attr in attrs:
        out[f"label_noisy_{attr}"] = noisy[attr]
    return out, summary
