"""Resolve the image paths of an imported protocol against the manifest.

Shared by every protocol importer (CAST ``.list`` folders, LFW ``pairs.txt``, insightface
``.bin`` sets): paths become manifest ``image_id`` values with identities and a status; a
pair whose image is not in the manifest keeps status ``not_in_manifest``.
"""

from __future__ import annotations

import logging

import numpy as np
import pandas as pd

from facecast.datasets.manifest import DatasetError

log = logging.getLogger(__name__)


PROTOCOL_COLUMNS = ["fold", "image_a", "image_b", "identity_a", "identity_b", "label",
                    "status", "message"]


def _stripped(paths: pd.Series, prefix: str) -> np.ndarray:
    """``paths`` without a leading ``prefix``, then without leading ``/``."""
    text = paths.astype(str)
    if prefix:
        text = text.where(~text.str.startswith(prefix), text.str.slice(len(prefix)))
    return text.str.lstrip("/").to_numpy(dtype=object)


def attach_manifest(pairs: pd.DataFrame, manifest: pd.DataFrame, *, strip_prefix: str = ""
                    ) -> pd.DataFrame:
    """Map ``path_a``/``path_b`` to manifest images; add identities, status and message.

    A path is looked up (minus ``strip_prefix``, then leading ``/``) among the manifest's
    paths, taking a path's first manifest row (a ``duplicate`` row repeats it), with one
    index lookup per side (no per-pair Python but for paths the manifest lacks: those keep
    themselves as image, their folder as identity and status ``not_in_manifest``).
    """
    first = manifest.drop_duplicates("path")
    index = pd.Index(first["path"].astype(str))
    found = {c: first[c].to_numpy(dtype=object) for c in ("image_id", "identity", "status")}
    out = pd.DataFrame({"fold": pairs["fold"].astype(str)})
    states = {}
    for side in ("a", "b"):
        paths = _stripped(pairs[f"path_{side}"], strip_prefix)
        at = index.get_indexer(paths)
        hit = at >= 0
        image, identity = paths.copy(), np.empty(len(paths), dtype=object)
        state = np.full(len(paths), "not_in_manifest", dtype=object)
        image[hit], identity[hit] = found["image_id"][at[hit]], found["identity"][at[hit]]
        state[hit] = found["status"][at[hit]]
        identity[~hit] = [p.rsplit("/", 1)[0] if "/" in p else "" for p in paths[~hit]]
        out[f"image_{side}"], out[f"identity_{side}"] = image.astype(str), identity.astype(str)
        states[side] = state.astype(str)
    out["label"] = pairs["label"].astype(np.int8).to_numpy()
    ok = (states["a"] == "ok") & (states["b"] == "ok")
    out["status"] = np.where(ok, "ok", np.where(states["a"] != "ok", states["a"], states["b"]))
    out["message"] = np.where(ok, "", np.char.add(np.char.add("image_a: ", states["a"]),
                                                  np.char.add("; image_b: ", states["b"])))
    extra = [c for c in ("source",) if c in pairs]
    for c in extra:
        out[c] = pairs[c].to_numpy()
    return out[PROTOCOL_COLUMNS + extra]


def check_resolved(raw: pd.DataFrame, pairs: pd.DataFrame, *, source: str,
                   strip_prefix: str, show: int = 5) -> dict[str, int]:
    """Fail when no pair resolves; log (and return) how many pairs were skipped otherwise.

    A pair resolves when both of its paths are manifest paths (after ``strip_prefix``).
    The error names the list file(s), the first ``show`` unresolved paths and
    ``strip_prefix``. Returns ``{"n_pairs": .., "n_resolved": .., "n_unresolved": ..}``.
    """
    unresolved = pairs["message"].str.contains("not_in_manifest", regex=False).to_numpy()
    counts = {"n_pairs": int(len(pairs)), "n_resolved": int((~unresolved).sum()),
              "n_unresolved": int(unresolved.sum())}
    if not unresolved.any():
        return counts
    miss_a = pairs["message"].str.contains("image_a: not_in_manifest", regex=False)
    miss_b = pairs["message"].str.contains("image_b: not_in_manifest", regex=False)
    paths = list(dict.fromkeys(list(raw.loc[miss_a.to_numpy(), "path_a"])
                               + list(raw.loc[miss_b.to_numpy(), "path_b"])))
    files = (sorted(dict.fromkeys(raw.loc[unresolved, "source"].astype(str)))
             if "source" in raw else [source])
    first = ", ".join(repr(p) for p in paths[:show])
    detail = (f"{counts['n_unresolved']} of {counts['n_pairs']} pairs name paths the "
              f"manifest lacks (list file(s): {', '.join(files[:show])}; first unresolved "
              f"paths: {first}; strip_prefix={strip_prefix!r}; a path is looked up as "
              f"'<path minus strip_prefix>' relative to the dataset root)")
    if counts["n_resolved"] == 0:
        raise DatasetError(f"import {source}: no pair resolves: {detail}")
    log.warning("import %s: %s; those pairs are kept with status not_in_manifest and "
                "skipped by evaluation", source, detail)
    return counts
