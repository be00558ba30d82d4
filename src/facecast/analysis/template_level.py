"""Template-level attributes of IJB-B / IJB-C: a template's attributes from its images'.

One aggregation serves every stage that reads templates (:func:`aggregate_members`): the
analysis stage's template attribute table (``analysis.level: template``: correlations and
CAST subsets over templates) and the templates stage's demographic groups
(:func:`facecast.templates.groups.template_groups`, FMR per group of templates). The
per-identity label sync of the fairness stage uses the same vote (:func:`majority`).

- **mean** (numeric attributes): the mean of the voting images' values, missing values
  skipped;
- **majority** (categorical / label values): the most frequent non-missing value among the
  voting images; a tie goes to the value with the smallest ``order`` (the attribute's
  label order), then to the smallest value as text.

Each image line of the release's ``<variant>_face_tid_mid.txt`` is one member (a name
listed twice counts twice, as the templates stage counts it). An image *votes* when its
row of ``attributes.parquet`` has a usable faces status (``ok``, or the release's
``landmarks_given``, as the benchmark pool counts it) and is not excluded. Every template of
the release reaches :func:`template_attribute_table` with a ``status``: ``ok`` (at least
one voting image) or ``no_ok_image`` (none; its attributes are missing and ``message``
gives the images' statuses), never dropped.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
import pyarrow.parquet as pq

from facecast.analysis.pool import DEFAULT_STATUSES, benchmark_pool
from facecast.config.patterns import matches_any
from facecast.io.parquet_io import read_provenance

#: the ``level`` of an attribute table (provenance key ``level``; absent = ``image``)
LEVELS = ("image", "template")
#: columns of the template attribute table that are not attributes
TEMPLATE_KEY_COLUMNS = ("template_id", "identity", "split", "status", "message", "exclude",
                        "n_images", "n_voting", "level")
#: template statuses
TEMPLATE_STATUSES = {"ok": "", "no_ok_image": "none of its images has usable attributes"}
_IMAGE_COLUMNS = {"image_id", "identity", "split", "exclude", "status", "message", "shard",
                  "path", "single_image"}


def majority(labels: pd.Series | np.ndarray, keys: pd.Series | np.ndarray,
             order: Mapping[Any, int] | None = None) -> pd.Series:
    """The most frequent non-missing label per key, indexed by key (keys with no label
    are absent). Ties go to the label with the smallest ``order`` (labels not in it come
    after), then to the smallest label as text."""
    order = dict(order or {})
    df = pd.DataFrame({"key": np.asarray(keys, dtype=object),
                       "label": np.asarray(labels, dtype=object)})
    known = df[pd.notna(df["label"])]
    if known.empty:
        return pd.Series([], dtype=object)
    counts = known.groupby(["key", "label"], sort=False).size().reset_index(name="n")
    counts["rank"] = counts["label"].map(lambda v: order.get(v, len(order)))
    counts["label_s"] = counts["label"].astype(str)
    counts = counts.sort_values(["key", "n", "rank", "label_s"],
                                ascending=[True, False, True, True], kind="stable")
    return counts.drop_duplicates("key").set_index("key")["label"]


def aggregate_members(values: pd.DataFrame, keys: pd.Series | np.ndarray, *,
                      mean: Sequence[str] = (), vote: Sequence[str] = (),
                      orders: Mapping[str, Mapping[Any, int]] | None = None,
                      voting: np.ndarray | None = None,
                      index: Sequence[Any] | np.ndarray | None = None) -> pd.DataFrame:
    """One row per key (``index``, default the sorted unique ``keys``) of the member rows
    ``values``: ``n_members``, ``n_voting``, the mean of each ``mean`` column and the
    majority (:func:`majority`, ties by ``orders[column]``) of each ``vote`` column, over
    the members with ``voting`` True (default all). A key without a voting member (or
    without a value) gets NaN / None; every key of ``index`` is in the result."""
    keys = np.asarray(keys)
    if len(keys) != len(values):
        raise ValueError(f"{len(keys)} keys for {len(values)} member rows")
    voting = np.ones(len(keys), bool) if voting is None else np.asarray(voting, bool)
    idx = pd.Index(np.unique(keys) if index is None else np.asarray(index), name="key")
    out = pd.DataFrame(index=idx)
    out["n_members"] = pd.Series(keys).value_counts().reindex(idx, fill_value=0).to_numpy(
        np.int64)
    out["n_voting"] = pd.Series(keys[voting]).value_counts().reindex(
        idx, fill_value=0).to_numpy(np.int64)
    sub, sub_keys = values[voting], keys[voting]
    for col in mean:
        v = pd.to_numeric(sub[col], errors="coerce").astype(np.float64)
        out[col] = v.groupby(sub_keys).mean().reindex(idx).to_numpy(np.float64)
    for col in vote:
        won = majority(sub[col].to_numpy(object), sub_keys, (orders or {}).get(col))
        res = (np.array(won.reindex(idx).to_numpy(object), dtype=object) if len(won)
               else np.full(len(idx), None, object))
        res[pd.isna(res)] = None
        out[col] = res
    return out


def attribute_kinds(attributes: pd.DataFrame, majority_columns: Sequence[str] = ()
                    ) -> tuple[list[str], list[str]]:
    """``(mean, vote)`` attribute columns of an image attribute table: numeric columns
    are averaged unless a ``majority_columns`` fnmatch pattern names them; boolean and
    text columns always go by majority."""
    mean, vote = [], []
    for col in attributes.columns:
        if col in _IMAGE_COLUMNS or col in TEMPLATE_KEY_COLUMNS:
            continue
        s = attributes[col]
        numeric = pd.api.types.is_numeric_dtype(s) and not pd.api.types.is_bool_dtype(s)
        if numeric and not matches_any(col, majority_columns):
            mean.append(col)
        else:
            vote.append(col)
    return mean, vote


def voting_images(attributes: pd.DataFrame,
                  statuses: Sequence[str] = DEFAULT_STATUSES) -> np.ndarray:
    """Rows of the image attribute table whose attributes count for their template: the
    benchmark pool's rule (:func:`facecast.analysis.pool.benchmark_pool`)."""
    n = len(attributes)
    status = attributes["status"] if "status" in attributes else np.full(n, statuses[0])
    exclude = (attributes["exclude"].eq(True).to_numpy() if "exclude" in attributes
               else np.zeros(n, bool))
    return benchmark_pool(np.asarray(status), exclude, statuses)


def template_attribute_table(members: pd.DataFrame, attributes: pd.DataFrame, *,
                             majority_columns: Sequence[str] = (),
                             statuses: Sequence[str] = DEFAULT_STATUSES
                             ) -> pd.DataFrame:
    """One row per template of ``members`` (``image_id``, ``template_id``: one row per
    image line) from the image attribute table: :data:`TEMPLATE_KEY_COLUMNS`, then every
    attribute column, aggregated by :func:`aggregate_members` over the voting images
    (:func:`voting_images`); ``identity`` and ``split`` are the majority of all its images
    (as listed in the table). Sorted by ``template_id``."""
    attrs = attributes.drop_duplicates("image_id")
    img = members[["image_id", "template_id"]].merge(attrs, on="image_id", how="left")
    listed = img["image_id"].isin(attrs["image_id"]).to_numpy()
    voting = listed & voting_images(img, statuses)
    mean, vote = attribute_kinds(attrs, majority_columns)
    keys = img["template_id"].to_numpy(np.int64)
    agg = aggregate_members(img, keys, mean=mean, vote=vote, voting=voting)
    ident = aggregate_members(img, keys, vote=[c for c in ("identity", "split")
                                               if c in img], voting=listed,
                              index=agg.index)
    out = pd.DataFrame({"template_id": agg.index.to_numpy(np.int64)})
    out["identity"] = (ident["identity"].to_numpy(object) if "identity" in ident
                       else out["template_id"].map(lambda t: f"template_{t}"))
    missing_id = pd.isna(out["identity"])
    out.loc[missing_id, "identity"] = [f"template_{t}" for t in out.loc[missing_id,
                                                                        "template_id"]]
    out["split"] = ident["split"].to_numpy(object) if "split" in ident else None
    ok = agg["n_voting"].to_numpy() > 0
    out["status"] = np.where(ok, "ok", "no_ok_image")
    out["message"] = _messages(img, keys, agg.index.to_numpy(), ok, listed)
    out["exclude"] = False
    out["n_images"] = agg["n_members"].to_numpy(np.int64)
    out["n_voting"] = agg["n_voting"].to_numpy(np.int64)
    out["level"] = "template"
    for col in mean + vote:
        out[col] = agg[col].to_numpy()
    for col in vote:  # a numeric column voted on stays numeric
        if pd.api.types.is_numeric_dtype(attrs[col]) and not pd.api.types.is_bool_dtype(
                attrs[col]):
            out[col] = pd.to_numeric(out[col], errors="coerce").astype(np.float64)
    return out


def _messages(img: pd.DataFrame, keys: np.ndarray, tids: np.ndarray, ok: np.ndarray,
              listed: np.ndarray) -> np.ndarray:
    """'' for ok templates; else the statuses of the template's images, counted."""
    out = np.full(len(tids), "", dtype=object)
    if ok.all():
        return out
    status = np.where(listed, img.get("status", pd.Series("", index=img.index))
                      .astype(str).to_numpy(), "not_in_attributes")
    excluded = (img["exclude"].eq(True).to_numpy() if "exclude" in img
                else np.zeros(len(img), bool))
    status = np.where(excluded & listed, status + " (excluded)", status)
    rows = np.isin(keys, tids[~ok])  # only the images of templates without a vote
    counts = pd.DataFrame({"t": keys[rows], "s": status[rows]}).value_counts().sort_index()
    pos = {t: i for i, t in enumerate(tids)}
    for t, c in counts.groupby(level="t"):
        out[pos[t]] = (TEMPLATE_STATUSES["no_ok_image"] + ": "
                       + ", ".join(f"{s}={n}" for (_, s), n in c.items()))
    return out


def table_level(path: str | os.PathLike) -> str:
    """The level (``image`` / ``template``) of an attribute table: its provenance
    ``level``, else ``image``."""
    level = str(read_provenance(path).get("level") or "image")
    if level not in LEVELS:
        raise ValueError(f"{path}: provenance level {level!r} is not one of {LEVELS}")
    if level == "template" and "template_id" not in pq.read_schema(path).names:
        raise ValueError(f"{path}: a template-level table needs a template_id column")
    return level
