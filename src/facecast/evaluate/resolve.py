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


def _strip(path: str, prefix: str) -> str:
    if prefix and path.startswith(prefix):
        path = path[len(prefix):]
    return path.lstrip("/")


def attach_manifest(pairs: pd.DataFrame, manifest: pd.DataFrame, *, strip_prefix: str = ""
                    ) -> pd.DataFrame:
    """Map ``path_a``/``path_b`` to manifest images; add identities, status and message."""
    by_path = manifest.set_index("path")
    pa_ = pairs["path_a"].map(lambda p: _strip(p, strip_prefix))
    pb_ = pairs["path_b"].map(lambda p: _strip(p, strip_prefix))
    out = pd.DataFrame({"fold": pairs["fold"].astype(str)})
    for side, paths in (("a", pa_), ("b", pb_)):
        out[f"image_{side}"] = paths.map(by_path["image_id"]).fillna(paths).astype(str)
        out[f"identity_{side}"] = paths.map(by_path["identity"]).fillna(
            paths.map(lambda p: p.rsplit("/", 1)[0] if "/" in p else "")).astype(str)
        out[f"_st_{side}"] = paths.map(by_path["status"]).fillna("not_in_manifest").astype(str)
    out["label"] = pairs["label"].astype(np.int8).to_numpy()
    ok = (out["_st_a"] == "ok") & (out["_st_b"] == "ok")
    out["status"] = np.where(ok, "ok", np.where(out["_st_a"] != "ok", out["_st_a"], out["_st_b"]))
    out["message"] = np.where(ok, "", "image_a: " + out["_st_a"] + "; image_b: " + out["_st_b"])
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
