"""The real OFIQ, through ``ofiqpy``, when its models are present (``attributes.ofiq.models_dir``).

OFIQ's models (~450 MB) are on no package registry, so this path is optional. Three steps
per manifest shard (workflow/rules/attributes.smk):

1. :func:`write_ofiq_inputs` (facecast's environment): the shard's readable images as a
   folder ofiqpy reads (JPEG/PNG/BMP files linked, other formats written as PNG) and a
   ``map.tsv`` from file name to ``image_id``;
2. rule ``attributes_ofiq_run`` (envs/ofiq.yaml: ofiqpy pins numpy < 2, OpenCV 4.5.5,
   onnxruntime 1.18): ``ofiqpy -i <folder> -o <csv>`` with ``OFIQPY_OFIQ_DATA`` =
   ``models_dir``; the CSV is OFIQSampleApp's (``;``-separated: ``Filename``, the 28 native
   values, the 28 ``<Component>.scalar`` values, ``assessment_time_in_ms``);
3. :func:`real_ofiq_columns` (the ``ofiq`` scorer's job): the CSV's 28 components as
   ``ofiq_<Component>`` (scalar) and ``ofiq_<Component>_native`` on the faces shard's rows,
   provenance ``ofiq_source: ofiq``. OFIQ's FailureToAssess (native 0, scalar -1) becomes
   NaN with a message naming the components.
"""

from __future__ import annotations

import csv
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from facecast.attributes.ofiq import REAL_OFIQ_COMPONENTS, column

#: file suffixes ofiqpy's folder discovery reads (ofiqpy/batch.py ``EXTS``)
OFIQPY_SUFFIXES = (".jpg", ".jpeg", ".png", ".bmp")
#: what a models folder must hold (ofiqpy's canonical profile: config + models tree)
MODELS_LAYOUT = ("ofiq_config.jaxn", "models")


def models_dir(cfg: Mapping[str, Any]) -> str:
    """``attributes.ofiq.models_dir`` of the ``attributes`` section ('' = not set)."""
    return str((cfg.get("ofiq") or {}).get("models_dir") or "")


def write_ofiq_inputs(manifest: pd.DataFrame, root: str | os.PathLike, out_dir: str | os.PathLike,
                      map_path: str | os.PathLike) -> pd.DataFrame:
    """The folder ofiqpy reads for one manifest shard (``image_id``, ``path``, ``status``
    columns), and its ``map.tsv`` (``file``, ``image_id``, ``status``, ``message``): one
    line per manifest row; rows not ``ok`` or not readable get no file and say why."""
    from PIL import Image

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for k, r in enumerate(manifest.itertuples(index=False)):
        full = Path(root) / str(r.path) if pd.notna(r.path) else None
        name, status, message = "", "ok", ""
        if r.status != "ok" or full is None or not full.is_file():
            status = str(r.status) if r.status != "ok" else "missing"
            message = "not handed to OFIQ: no readable image file"
        elif full.suffix.lower() in OFIQPY_SUFFIXES:
            name = f"{k:07d}{full.suffix.lower()}"
            os.symlink(os.path.abspath(full), out / name)
        else:
            name = f"{k:07d}.png"
            try:
                with Image.open(full) as im:
                    im.convert("RGB").save(out / name)
            except Exception as exc:  # the row keeps a status, the shard goes on
                name, status, message = "", "decode_error", f"{type(exc).__name__}: {exc}"
        rows.append({"file": name, "image_id": str(r.image_id), "status": status,
                     "message": message})
    table = pd.DataFrame(rows, columns=["file", "image_id", "status", "message"])
    table.to_csv(map_path, sep="\t", index=False)
    return table


def read_ofiq_csv(path: str | os.PathLike) -> pd.DataFrame:
    """OFIQSampleApp's CSV (``;``) as a frame indexed by the file's base name, with float
    columns ``<Component>`` (native) and ``<Component>.scalar``; a missing component
    column is an error naming it."""
    with open(path, newline="", encoding="utf-8") as fh:
        rows = list(csv.reader(fh, delimiter=";"))
    if not rows:
        raise ValueError(f"{path}: empty OFIQ CSV (no header)")
    header = [h.strip() for h in rows[0]]
    need = ["Filename", *REAL_OFIQ_COMPONENTS, *(f"{c}.scalar" for c in REAL_OFIQ_COMPONENTS)]
    missing = [c for c in need if c not in header]
    if missing:
        raise ValueError(f"{path} is not OFIQ's CSV format: it lacks {missing[:5]}"
                         + (f" and {len(missing) - 5} more" if len(missing) > 5 else ""))
    width = len(header)  # OFIQSampleApp's header ends with an empty field, its rows may not
    frame = pd.DataFrame([(r + [""] * width)[:width] for r in rows[1:] if r], columns=header)
    out = frame[need[1:]].apply(pd.to_numeric, errors="coerce").astype(np.float64)
    out.index = [Path(f).name for f in frame["Filename"]]
    return out


def real_ofiq_columns(image_ids: np.ndarray, csv_path: str | os.PathLike,
                      map_path: str | os.PathLike) -> tuple[dict[str, np.ndarray], np.ndarray,
                                                             np.ndarray]:
    """``ofiq_*`` columns (28 components x scalar/native) for ``image_ids`` from ofiqpy's
    CSV and the inputs map; plus a status and message per row (``ok``; the map's status
    when the image was not handed to OFIQ; ``ofiq_missing`` when OFIQ wrote no line;
    ``ok`` with a message naming the components OFIQ failed to assess)."""
    values = read_ofiq_csv(csv_path)
    mapping = pd.read_csv(map_path, sep="\t", dtype=str, keep_default_na=False)
    by_id = mapping.drop_duplicates("image_id").set_index("image_id")
    n = len(image_ids)
    out = {c: np.full(n, np.nan) for comp in REAL_OFIQ_COMPONENTS
           for c in (column(comp), column(comp, True))}
    status = np.full(n, "ok", dtype=object)
    message = np.full(n, "", dtype=object)
    for i, iid in enumerate(np.asarray(image_ids).astype(str)):
        if iid not in by_id.index or not by_id.at[iid, "file"]:
            status[i] = by_id.at[iid, "status"] if iid in by_id.index else "ofiq_missing"
            message[i] = (by_id.at[iid, "message"] if iid in by_id.index
                          else "image not in the OFIQ inputs map")
            continue
        name = by_id.at[iid, "file"]
        if name not in values.index:
            status[i], message[i] = "ofiq_missing", f"OFIQ wrote no line for {name}"
            continue
        row = values.loc[name]
        row = row.iloc[0] if isinstance(row, pd.DataFrame) else row
        failed = []
        for comp in REAL_OFIQ_COMPONENTS:
            scalar, native = row[f"{comp}.scalar"], row[comp]
            if not np.isfinite(scalar) or scalar < 0:  # FailureToAssess: (0, -1)
                failed.append(comp)
                continue
            out[column(comp)][i], out[column(comp, True)][i] = scalar, native
        if failed:
            message[i] = ("OFIQ FailureToAssess: every component" if len(failed) == len(
                REAL_OFIQ_COMPONENTS) else "OFIQ FailureToAssess: " + ", ".join(failed))
    return out, status, message


def provenance(path: str) -> dict[str, Any]:
    """What a shard scored by the real OFIQ says about itself."""
    return {"ofiq_source": "ofiq", "ofiq_models_dir": path, "ofiq_runner": "ofiqpy",
            "ofiq_conformant": "as ofiqpy's canonical OFIQ v1.1.0 profile"}
