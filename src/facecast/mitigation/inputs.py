"""Reading what the mitigation job needs: scored pairs with the fusion partners' scores,
embeddings of both sides' images, their protected groups, and the annotated evaluated
pairs the table's fairness figures need.

A calibration source on another dataset keeps its own image and identity names; inside
the job they carry the prefix ``<dataset>::`` so that two datasets' ``id00011`` stay two
people (the calibration file lists them with their dataset).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from facecast.embed.read import load_embeddings
from facecast.fairness.annotate import labelled_pairs, spec_columns
from facecast.fairness.assess import load_attributes
from facecast.fairness.groups import image_labels, parse_specs
from facecast.io.parquet_io import read_parquet
from facecast.io.shard_index import shard_files
from facecast.mitigation.cohort import l2_normalise
from facecast.mitigation.methods import Images, Side

__all__ = ["NEEDED", "annotate", "attach_partners", "build_images", "image_groups",
           "namespaced", "read_embeddings", "read_scores", "side"]

#: columns a scores file must have
NEEDED = ("image_a", "image_b", "identity_a", "identity_b", "label", "score")


def read_scores(path: str | os.PathLike) -> pd.DataFrame:
    """A scores file with ids as text; raises ``ValueError`` naming missing columns."""
    frame = read_parquet(path)
    missing = [c for c in NEEDED if c not in frame.columns]
    if missing:
        raise ValueError(f"{path} lacks column(s) {missing}; the mitigation stage needs "
                         f"{list(NEEDED)} (identities define the calibration split)")
    for c in ("image_a", "image_b", "identity_a", "identity_b"):
        frame[c] = frame[c].astype(str)
    return frame.rename(columns={"status": "input_status", "message": "input_message"})


def _key(frame: pd.DataFrame) -> pd.Series:
    a, b = frame["image_a"].astype(str), frame["image_b"].astype(str)
    return a.where(a <= b, b) + "\x1f" + b.where(a <= b, a)


def attach_partners(pairs: pd.DataFrame, model: str, partners: Mapping[str, pd.DataFrame]
                    ) -> pd.DataFrame:
    """``pairs`` + ``score@<m>`` for this model and every partner (matched on the
    unordered image pair; NaN where a partner did not score it)."""
    out = pairs.copy()
    out[f"score@{model}"] = pd.to_numeric(out["score"], errors="coerce")
    key = _key(out)
    for m, frame in partners.items():
        other = pd.Series(pd.to_numeric(frame["score"], errors="coerce").to_numpy(),
                          index=_key(frame).to_numpy())
        other = other[~other.index.duplicated()]
        out[f"score@{m}"] = other.reindex(key.to_numpy()).to_numpy(np.float64)
    return out


def namespaced(frame: pd.DataFrame, ds: str) -> pd.DataFrame:
    """Image and identity names prefixed ``<ds>::`` (a calibration dataset's people)."""
    out = frame.copy()
    for c in ("image_a", "image_b", "identity_a", "identity_b"):
        out[c] = f"{ds}::" + out[c].astype(str)
    return out


def image_groups(attributes: str | os.PathLike | None, identities: Sequence[str],
                 fairness: Mapping[str, Any]) -> pd.Series:
    """Each image's protected group (``fairness`` specs, per-identity vote), indexed by
    ``image_id``; empty without an attribute table or protected attributes."""
    if attributes is None or not fairness.get("protected"):
        return pd.Series(dtype=object)
    attrs = load_attributes(attributes, identities, spec_columns(fairness))
    labels = image_labels(attrs, parse_specs(fairness.get("protected")),
                          parse_specs(fairness.get("legitimate")),
                          sync=fairness.get("sync", "majority"))
    return labels["group"]


def build_images(pairs: Sequence[pd.DataFrame], embeddings: Mapping[str, np.ndarray],
                 groups: pd.Series) -> Images:
    """Every image of ``pairs`` (sorted ids) with its unit embedding (``embeddings``:
    id -> row; zeros where none is needed), identity code and group code."""
    ids = pd.concat([pd.concat([f["image_a"], f["image_b"]]) for f in pairs]).astype(str)
    who = pd.concat([pd.concat([f["identity_a"], f["identity_b"]]) for f in pairs]
                    ).astype(str)
    first = pd.Series(who.to_numpy(), index=ids.to_numpy())
    first = first[~first.index.duplicated()].sort_index()
    names = first.index.to_numpy(dtype=str)
    ident = pd.factorize(first.to_numpy(), sort=True)[0].astype(np.int64)
    dim = next((len(v) for v in embeddings.values()), 0)
    emb = np.zeros((len(names), dim), np.float32)
    for i, n in enumerate(names):
        if n in embeddings:
            emb[i] = embeddings[n]
    gnames = sorted({str(g) for g in groups.dropna()})
    code = pd.Index(gnames).get_indexer(groups.reindex(names).to_numpy(object))
    return Images(names, l2_normalise(emb) if dim else emb, ident,
                  np.asarray(code, np.int64), gnames)


def read_embeddings(index: str | os.PathLike, image_ids: Sequence[str], prefix: str = ""
                    ) -> dict[str, np.ndarray]:
    """id -> embedding of ``image_ids`` (without ``prefix``) from an embed index."""
    wanted = [i.removeprefix(prefix) for i in image_ids]
    ids, emb = load_embeddings(shard_files(index), wanted)
    return {f"{prefix}{i}": emb[k] for k, i in enumerate(ids)}


def side(frame: pd.DataFrame, im: Images, partners: Sequence[str]) -> Side:
    """The pairs of ``frame`` as a :class:`Side` over ``im``."""
    index = pd.Index(im.ids)
    part = (frame[[f"score@{m}" for m in partners]].to_numpy(np.float64) if partners
            else None)
    return Side(index.get_indexer(frame["image_a"].astype(str)),
                index.get_indexer(frame["image_b"].astype(str)),
                pd.to_numeric(frame["score"], errors="coerce").to_numpy(np.float64),
                pd.to_numeric(frame["label"], errors="coerce").to_numpy().astype(int), part)


def annotate(evaluated: pd.DataFrame, attributes: str | os.PathLike | None,
             fairness: Mapping[str, Any]) -> pd.DataFrame:
    """The evaluated pairs with the fairness annotation (``group``, ``combo``,
    ``in_cells``, ``in_reference``, ``status``); without groups every pair is a reference
    pair in no cell."""
    pairs = evaluated[["image_a", "image_b", "identity_a", "identity_b", "label", "score",
                       "eval_fold"]].copy()
    if "failed" in evaluated.columns:   # groups, not scores: a pair without a feature stays
        pairs.loc[evaluated["failed"].to_numpy(bool), "score"] = 0.0
    if attributes is None or not fairness.get("protected"):
        return pairs.assign(group=None, combo=None, in_cells=False, in_reference=True,
                            status="ok")
    ids = pd.concat([pairs["identity_a"], pairs["identity_b"]]).unique()
    attrs = load_attributes(attributes, ids, spec_columns(fairness))
    ann, _ = labelled_pairs(pairs, attrs, fairness)
    ann["label"] = ann["label"].astype(int)
    return ann.reset_index(drop=True)
