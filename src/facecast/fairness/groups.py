"""Per-image protected groups and legitimate attribute values, and their pair-level forms.

An attribute spec (config) maps one column of the attribute table to discrete values:

- ``column``: the column (any attribute column or manifest ``label_*`` column);
- ``bins``: ascending cut points for continuous values; a value ``v`` gets
  ``labels[i]`` where ``i`` is the number of cut points ``<= v`` (so ``bins: [0.5]``,
  ``labels: [female, male]`` gives ``male`` for ``v >= 0.5``);
- ``abs``: take ``|v|`` before binning (pose angles: frontal vs other);
- ``labels``: the value names (``len(bins) + 1`` of them; default ``<name>0``, ...);
- without ``bins`` the column is categorical: ``values`` maps raw values to names (raw
  values not listed are missing); without ``values`` the raw value's text is the name.

NaN (or an unmapped value) is missing. Protected labels are synchronised per identity by
majority vote (``sync: majority``; ties go to the value listed first in ``labels``;
``sync: none`` keeps image labels). An image's protected group joins its protected values
with ``_`` (``female_dark``).

Pairs: the protected group of a pair is the group both images share; images of different
groups make a ``mixed`` pair. The legitimate combination x_L is, per legitimate attribute,
the unordered pair of the two images' values written ``A0-A1`` (values ordered as in
``labels``), attributes joined with ``,`` (``A0-A1,G1-G1,P0-P0``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from facecast.analysis.template_level import majority
from facecast.evaluate.folds import EVAL_FOLD

MIXED = "mixed"

# Pair statuses (the pairs table keeps every input row with one of these).
STATUS_MESSAGES = {
    "ok": "",
    "mixed": "images belong to different protected groups",
    "missing_image": "image not in the attribute table",
    "missing_protected": "a protected attribute value is missing",
    "missing_legitimate": "a legitimate attribute value is missing",
    "bad_score": "score is missing or not finite",
    "no_feature": "an image has no feature (no face, decode error, no embedding): left out "
                  "(evaluate.failed: drop)",
    "bad_label": "label is not 0 or 1",
    "held_out": "outside evaluate's test (a held-out fold such as val): counted nowhere, "
                "as evaluate counts it nowhere",
}


@dataclass(frozen=True)
class AttributeSpec:
    """How one attribute column becomes discrete values (see the module docstring)."""

    name: str
    column: str
    bins: tuple[float, ...] | None = None
    labels: tuple[str, ...] = ()
    abs: bool = False
    values: Mapping[Any, str] = field(default_factory=dict)

    @property
    def order(self) -> dict[str, int]:
        """Position of each value name (for canonical ordering inside pairs)."""
        names = list(self.labels) or list(dict.fromkeys(self.values.values()))
        return {v: i for i, v in enumerate(names)}


def parse_specs(mapping: Mapping[str, Mapping[str, Any]] | None) -> list[AttributeSpec]:
    """Turn a config mapping ``{name: {column, bins, labels, abs, values}}`` into specs."""
    specs = []
    for name, raw in (mapping or {}).items():
        raw = dict(raw)
        if "column" not in raw:
            raise ValueError(f"attribute {name!r}: 'column' is required")
        bins = raw.get("bins")
        if bins is not None:
            bins = tuple(float(b) for b in bins)
            if list(bins) != sorted(bins):
                raise ValueError(f"attribute {name!r}: bins must be ascending, got {bins}")
            labels = tuple(str(x) for x in raw.get("labels") or
                           [f"{name}{i}" for i in range(len(bins) + 1)])
            if len(labels) != len(bins) + 1:
                raise ValueError(f"attribute {name!r}: {len(bins)} bins need "
                                 f"{len(bins) + 1} labels, got {len(labels)}")
        else:
            labels = tuple(str(x) for x in raw.get("labels") or ())
        values = {k: str(v) for k, v in (raw.get("values") or {}).items()}
        specs.append(AttributeSpec(name=str(name), column=str(raw["column"]), bins=bins,
                                   labels=labels, abs=bool(raw.get("abs", False)),
                                   values=values))
    return specs


def discretise(values: pd.Series, spec: AttributeSpec) -> pd.Series:
    """Discrete value names for one column (object dtype, None where missing)."""
    if spec.bins is not None:
        v = pd.to_numeric(values, errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)
        if spec.abs:
            v = np.abs(v)
        idx = np.searchsorted(np.asarray(spec.bins), v, side="right")
        names = np.asarray(spec.labels, dtype=object)[np.minimum(idx, len(spec.labels) - 1)]
        names[~np.isfinite(v)] = None
        return pd.Series(names, index=values.index, dtype=object)
    raw = values.to_numpy(dtype=object)
    known = pd.notna(raw)
    out = np.full(raw.shape[0], None, dtype=object)
    if spec.values:
        keyed: dict[Any, str] = {}
        for k, name in spec.values.items():
            keyed[str(k)] = name
            try:
                keyed[str(float(k))] = name
            except (TypeError, ValueError):
                pass
        out[known] = [keyed.get(str(x)) for x in raw[known]]
    else:
        out[known] = [str(x) for x in raw[known]]
    return pd.Series(out, index=values.index, dtype=object)


def _discretise_checked(values: pd.Series, spec: AttributeSpec, section: str) -> pd.Series:
    """:func:`discretise`, but a spec that gives no image a value while the column has
    values is a config mistake: one sentence naming the key and the fix."""
    out = discretise(values, spec)
    if out.notna().any() or not values.notna().any():
        return out
    seen = [str(v) for v in pd.unique(values.dropna())[:8]]
    key = f"fairness.{section}.{spec.name}"
    if spec.bins is not None:
        raise ValueError(f"{key}.bins: column {spec.column!r} has no numeric value to bin "
                         f"(its values include {seen}); map its values with "
                         f"{key}.values instead of bins")
    raise ValueError(f"{key}.values: no value of column {spec.column!r} matches a key of "
                     f"the map ({sorted(map(str, spec.values))}; the column's values include "
                     f"{seen}); use the column's raw values as keys")


def majority_vote(labels: pd.Series, identity: pd.Series,
                  order: Mapping[str, int] | None = None) -> pd.Series:
    """Replace each image's label by its identity's most frequent (non-missing) label.

    Ties go to the label with the smallest ``order`` (then alphabetical). Identities with
    no label at all stay missing. The vote is :func:`facecast.analysis.template_level.
    majority`, the one a template's attributes use.
    """
    ident = identity.astype(str).to_numpy()
    winner = majority(labels.to_numpy(dtype=object), ident, order)
    if winner.empty:
        return pd.Series([None] * len(labels), index=labels.index, dtype=object)
    out = pd.Series(ident).map(winner).to_numpy(dtype=object)
    out[pd.isna(out)] = None
    return pd.Series(out, index=labels.index, dtype=object)


def image_labels(attributes: pd.DataFrame, protected: Sequence[AttributeSpec],
                 legitimate: Sequence[AttributeSpec], *, sync: str = "majority") -> pd.DataFrame:
    """Per-image discrete labels, indexed by ``image_id``.

    Columns: ``identity``, one column per protected attribute (after the per-identity
    sync), ``group`` (protected values joined by ``_``; None if any is missing), and one
    column per legitimate attribute. A spec naming a column the table lacks is an error.
    """
    if sync not in ("majority", "none"):
        raise ValueError(f"sync must be 'majority' or 'none', got {sync!r}")
    needed = {s.column for s in [*protected, *legitimate]}
    missing = sorted(needed - set(attributes.columns))
    if missing:
        raise KeyError(f"attribute table lacks column(s) {missing}; available: "
                       f"{sorted(attributes.columns)}")
    out = pd.DataFrame(index=pd.Index(attributes["image_id"].astype(str), name="image_id"))
    identity = attributes["identity"].astype(str)
    out["identity"] = identity.to_numpy()
    prot_cols = []
    for spec in protected:
        lab = _discretise_checked(attributes[spec.column], spec, "protected")
        if sync == "majority":
            lab = majority_vote(lab, identity, spec.order)
        out[spec.name] = lab.to_numpy(dtype=object)
        prot_cols.append(spec.name)
    if prot_cols:
        parts = [out[c].to_numpy(dtype=object) for c in prot_cols]
        complete = np.logical_and.reduce([pd.notna(v) for v in parts])
        group = np.full(len(out), None, dtype=object)
        group[complete] = ["_".join(vals) for vals in zip(*(v[complete] for v in parts),
                                                         strict=True)]
        out["group"] = group
    else:
        out["group"] = None
    for spec in legitimate:
        out[spec.name] = _discretise_checked(attributes[spec.column], spec,
                                             "legitimate").to_numpy(dtype=object)
    if out.index.has_duplicates:
        dup = out.index[out.index.duplicated()][:5].tolist()
        raise ValueError(f"attribute table has duplicate image_id values, e.g. {dup}")
    return out


def _pair_codes(a: pd.Series, b: pd.Series,
                order: Mapping[str, int]) -> tuple[np.ndarray, list[str]]:
    """Codes of the unordered value pairs 'x-y' (x before y in ``order``, then text).

    Returns ``(codes, names)``: ``names[codes[i]]`` is pair i's text; code -1 = missing.
    """
    a = a.astype(object).where(a.notna(), None).map(lambda x: x if x is None else str(x))
    b = b.astype(object).where(b.notna(), None).map(lambda x: x if x is None else str(x))
    seen = set(pd.unique(pd.concat([a, b]).dropna()))
    cats = sorted(seen, key=lambda v: (order.get(v, len(order)), v))
    k = max(len(cats), 1)
    ca = pd.Categorical(a, categories=cats).codes.astype(np.int64)
    cb = pd.Categorical(b, categories=cats).codes.astype(np.int64)
    lo = np.minimum(ca, cb)
    hi = np.maximum(ca, cb)
    codes = np.where((ca >= 0) & (cb >= 0), lo * k + hi, -1)
    names = [f"{cats[i // k]}-{cats[i % k]}" for i in range(len(cats) * len(cats))] or ["?"]
    return codes, names


def annotate_pairs(pairs: pd.DataFrame, labels: pd.DataFrame,
                   protected: Sequence[AttributeSpec],
                   legitimate: Sequence[AttributeSpec], *,
                   mixed_pairs: str = "reference") -> pd.DataFrame:
    """Every input pair with its group, legitimate combination, status and message.

    Adds: ``group_a``, ``group_b``, ``group`` (shared group, ``mixed``, or None), one
    ``legit_<name>`` column per legitimate attribute (``A0-A1``), ``combo`` (x_L), ``status``,
    ``message``, ``in_cells`` (the pair enters the per-group, per-combination cells) and
    ``in_reference`` (the pair counts among "all positives/negatives" and in accuracy).
    ``mixed_pairs='reference'`` keeps mixed pairs in the reference sets; ``'exclude'``
    drops them from everything. Pairs with a bad score or label, and pairs outside
    evaluate's test (``eval_fold`` ``""``: a held-out ``val`` fold), are in nothing. A pair
    with ``failed`` True and score ``-inf`` (a pair without a feature under
    ``evaluate.failed: nonmatch``, :func:`facecast.fairness.annotate.with_failures`) is a
    comparison like any other.
    """
    if mixed_pairs not in ("reference", "exclude"):
        raise ValueError(f"mixed_pairs must be 'reference' or 'exclude', got {mixed_pairs!r}")
    out = pairs.copy()
    ia = out["image_a"].astype(str)
    ib = out["image_b"].astype(str)
    known_a = ia.isin(labels.index).to_numpy()
    known_b = ib.isin(labels.index).to_numpy()
    la = labels.reindex(ia.to_numpy())
    lb = labels.reindex(ib.to_numpy())
    ga = la["group"].to_numpy(dtype=object)
    gb = lb["group"].to_numpy(dtype=object)
    out["group_a"] = ga
    out["group_b"] = gb
    both = pd.notna(ga) & pd.notna(gb)
    same = both & (ga == gb)
    group = np.where(same, ga, None).astype(object)
    group[both & ~same] = MIXED
    out["group"] = group

    legit_ok = np.ones(len(out), bool)
    key = np.zeros(len(out), dtype=np.int64)
    parts: list[list[str]] = []
    for spec in legitimate:
        codes, names = _pair_codes(la[spec.name], lb[spec.name], spec.order)
        ok = codes >= 0
        col = np.empty(len(out), dtype=object)
        col[ok] = np.asarray(names, dtype=object)[codes[ok]]
        out[f"legit_{spec.name}"] = col
        legit_ok &= ok
        key = key * len(names) + np.maximum(codes, 0)
        parts.append(names)
    combo = np.empty(len(out), dtype=object)
    if parts:
        uniq, inv = np.unique(key[legit_ok], return_inverse=True)
        texts = []
        for u in uniq:
            bits = []
            for names in reversed(parts):
                bits.append(names[u % len(names)])
                u //= len(names)
            texts.append(",".join(reversed(bits)))
        combo[legit_ok] = np.asarray(texts, dtype=object)[inv] if len(texts) else []
    else:
        combo[:] = "all"
    out["combo"] = combo

    score = pd.to_numeric(out["score"], errors="coerce").to_numpy(dtype=np.float64,
                                                                   na_value=np.nan)
    label = pd.to_numeric(out["label"], errors="coerce").to_numpy(dtype=np.float64,
                                                                   na_value=np.nan)
    status = np.full(len(out), "ok", dtype=object)
    status[~legit_ok] = "missing_legitimate"
    status[~both] = "missing_protected"
    status[both & ~same] = "mixed"
    status[~(known_a & known_b)] = "missing_image"
    status[~np.isin(label, (0.0, 1.0))] = "bad_label"
    # a pair without a feature (column failed, facecast.evaluate.failures) is a comparison
    # at score -inf, never a bad score
    failed = (out["failed"].to_numpy(bool) if "failed" in out.columns
              else np.zeros(len(out), bool))
    status[~np.isfinite(score) & ~(failed & (score == -np.inf))] = "bad_score"
    if EVAL_FOLD in out.columns:  # evaluate's pairs only (facecast.evaluate.folds)
        status[out[EVAL_FOLD].astype(str).to_numpy() == ""] = "held_out"
    out["status"] = status
    out["message"] = [STATUS_MESSAGES[s] for s in status]
    valid = ~np.isin(status, ("bad_score", "bad_label", "held_out"))
    in_ref = valid.copy()
    if mixed_pairs == "exclude":
        in_ref &= status != "mixed"
    out["in_reference"] = in_ref
    out["in_cells"] = status == "ok"
    return out
