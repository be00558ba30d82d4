"""Candidate predicates over the attribute table (one boolean column per image) and the
one rule of a pair in a slice (:func:`pair_members`).

A binary or categorical column gives one equality predicate per value (``mode: class``);
a continuous column gives quantile bins of its percentile rank and, optionally, every
contiguous run of bins (CAST-style rank ranges, ``mode: rank``). Ranks are taken over the
benchmark pool exactly as :func:`facecast.analysis.filtering.filter_mask` takes them, so a
predicate and the benchmark filter it exports select the same images.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from facecast.analysis.filtering import AttributeFilter, filter_mask, percentile_ranks
from facecast.config.patterns import select_columns
from facecast.config.util import name_list

#: attribute-table columns that are never slice attributes (ids, statuses, bookkeeping)
NOT_ATTRIBUTES = ("image_id", "identity", "split", "exclude", "status", "message", "path",
                  "shard", "single_image")


@dataclass(frozen=True)
class Predicate:
    """One image predicate: the benchmark filter it equals and its text."""

    column: str
    filter: dict[str, Any] = field(hash=False)
    text: str = ""


def slice_columns(available: Sequence[str], cfg: Mapping[str, Any]) -> list[str]:
    """The slice attributes: ``slices.columns`` (fnmatch patterns; empty = every column but
    ids and statuses) minus ``slices.exclude`` patterns, in table order
    (:func:`facecast.config.patterns.select_columns`). A pattern that matches nothing
    raises ``KeyError`` naming it."""
    return select_columns([c for c in available if c not in NOT_ATTRIBUTES],
                          name_list(cfg.get("columns")), name_list(cfg.get("exclude")),
                          key="slices.columns")


def slice_image_mask(image_masks: np.ndarray, definition: Sequence[int]) -> np.ndarray:
    """The images satisfying every predicate of one slice (negative entries: padding)."""
    preds = [int(p) for p in definition if int(p) >= 0]
    return image_masks[:, preds].all(1)


def pair_sides(image_mask: np.ndarray, ia: np.ndarray, ib: np.ndarray
               ) -> tuple[np.ndarray, np.ndarray]:
    """Whether each pair's first and second image satisfy ``image_mask`` (``(n_images,)``
    or ``(n_images, K)``); an image index of -1 (not in the attribute table) never does."""
    pad = np.concatenate([image_mask, np.zeros((1, *image_mask.shape[1:]), bool)])
    return pad[ia], pad[ib]


def in_slice(side_a: np.ndarray, side_b: np.ndarray, pair: str) -> np.ndarray:
    """THE rule of a pair in a slice, from its two sides: ``both`` images satisfy it
    (same-group pairs: CAST sub-benchmarks, NIST IR 8280's same-demographic impostors)
    or ``either`` does."""
    if pair == "both":
        return side_a & side_b
    if pair == "either":
        return side_a | side_b
    raise ValueError(f"slices.pair must be both or either, got {pair!r}")


def pair_members(image_mask: np.ndarray, ia: np.ndarray, ib: np.ndarray,
                 pair: str = "both") -> np.ndarray:
    """Which pairs (image indices ``ia``, ``ib``) lie in the slice whose images are
    ``image_mask`` (one column per slice when 2-D), by :func:`in_slice`."""
    return in_slice(*pair_sides(image_mask, ia, ib), pair)


def _fmt(x: float) -> str:
    return f"{x:.4g}"


def _rank_ranges(n_bins: int, ranges: bool) -> list[tuple[float, float]]:
    edges = [round(i / n_bins, 9) for i in range(n_bins + 1)]
    out = [(edges[i], edges[i + 1]) for i in range(n_bins)]
    if ranges:
        out += [(edges[i], edges[j]) for width in range(2, n_bins)
                for i in range(n_bins - width + 1) for j in [i + width]]
    return out


def column_predicates(name: str, values: np.ndarray, pool: np.ndarray,
                      cfg: Mapping[str, Any]) -> tuple[list[Predicate], np.ndarray]:
    """Predicates of one column and their image masks ``(n_images, n_predicates)``.

    A column with at most ``slices.max_categories`` distinct values, all integers (or any
    text column), is categorical; other numeric columns are continuous. Values outside the
    pool, NaN and empty text never satisfy a predicate.
    """
    raw = pd.Series(values)
    numeric = pd.api.types.is_numeric_dtype(raw) or pd.api.types.is_bool_dtype(raw)
    max_cat = int(cfg.get("max_categories", 10))
    preds: list[Predicate] = []
    masks: list[np.ndarray] = []
    if numeric:
        v = raw.to_numpy(np.float64)
        seen = np.unique(v[pool & np.isfinite(v)])
        categorical = len(seen) <= max_cat and np.all(seen == np.round(seen))
    else:
        v = raw.astype("string").fillna("").to_numpy(object)
        seen = np.unique(v[pool & (v != "")])
        categorical = True
        if len(seen) > max_cat:
            return [], np.zeros((len(v), 0), bool)
    if len(seen) < 2:  # a constant column cannot split anything
        return [], np.zeros((len(v), 0), bool)
    if categorical:
        for value in seen:
            val: Any = int(value) if numeric else str(value)
            f = {"attribute": name, "mode": "class", "value": val}
            preds.append(Predicate(name, f, f"{name} = {val}"))
            masks.append(filter_mask(v, pool, AttributeFilter.from_config(f)))
    else:
        bins = int(cfg.get("bins", 4))
        ranks = np.full(v.shape, np.nan)  # as filter_mask ranks (facecast rank_method)
        ranks[pool] = percentile_ranks(v[pool])
        for low, high in _rank_ranges(bins, bool(cfg.get("rank_ranges", True))):
            f = {"attribute": name, "mode": "rank", "low": low, "high": high}
            AttributeFilter.from_config(f)  # the exported filter is valid
            with np.errstate(invalid="ignore"):
                m = pool & (ranks >= low) & (ranks <= high)
            if not m.any() or any(np.array_equal(m, prev) for prev in masks):
                continue  # empty, or the same images as a narrower range (ties)
            lo_v, hi_v = float(np.min(v[m])), float(np.max(v[m]))
            preds.append(Predicate(name, f, f"{name} in rank [{low:g}, {high:g}] "
                                            f"({_fmt(lo_v)} .. {_fmt(hi_v)})"))
            masks.append(m)
    return preds, (np.stack(masks, axis=1) if masks else np.zeros((len(v), 0), bool))


def build_predicates(attributes: pd.DataFrame, columns: Sequence[str], pool: np.ndarray,
                     cfg: Mapping[str, Any]) -> tuple[list[Predicate], np.ndarray]:
    """Every predicate of ``columns`` and the image mask matrix ``(n_images, P)``."""
    preds: list[Predicate] = []
    blocks: list[np.ndarray] = []
    for col in columns:
        p, m = column_predicates(col, attributes[col].to_numpy(), pool, cfg)
        preds += p
        blocks.append(m)
    mat = np.concatenate(blocks, axis=1) if blocks else np.zeros((len(attributes), 0), bool)
    return preds, mat
