"""Any classifier's predictions from a file, as an estimator of the estimator report
(``estimators.imports``; issue 47.4).

An import names a CSV or Parquet file with one row per image, the column holding the
image and the columns holding its ``gender``, ``age`` and ``race`` estimates (each may be
left out). Every value first passes the import's ``values`` map (exact spelling, per
attribute), then is read as follows; the form of a column is decided once for the column:

- gender: ``Male`` / ``Female`` / ``M`` / ``F`` in any case (a class, estimate kind
  ``label``); a column of only ``0`` and ``1`` is UTKFace's coding, 0 = Male, 1 = Female
  (``label``); any other number is P(male) in [0, 1] (kind ``probability``: >= 0.5 is
  Male). A P(male) column that holds only 0 and 1 must say so:
  ``values: {gender: {"0": Female, "1": Male}}``;
- age: a column holding any of FairFace's bins (:data:`facecast.datasets.fairface.
  FAIRFACE_AGE_BINS`; ``70+``, FairFace ``predict.py``'s spelling of the top bin, too) is
  read as bins (``label``), else as years in [0, 150] (kind ``years``: binned, and its
  MAE where the truth has years);
- race: a class of the dataset in any case (FairFace's seven, or UTKFace's five; on a
  UTKFace dataset FairFace's seven are collapsed as for the fairface head,
  :data:`facecast.datasets.utkface.RACE_FROM_FAIRFACE`).

The image is matched (``match``) by ``path``: the path relative to the dataset root (a
leading ``./``, backslashes and the dataset root itself are taken off), or by
``fairface_predict``: the face chip FairFace's ``predict.py`` names
``<dir>/<name up to its first dot>_face<k>.<ext>``, matched to the dataset image with
that name up to its first dot.

Every prediction row and every image of the dataset gets a status (:data:`STATUSES`)
with a message naming the file and line: ``ok``; ``not_in_dataset`` (the image is not one
of the dataset's); ``ambiguous_image`` (``fairface_predict``: several images share the
name); ``duplicate_prediction`` (an earlier row predicts the same image: the first row
counts); ``bad_value`` (an attribute's value is empty or cannot be read: that attribute
has no estimate for the image, the row's others count); ``bad_row`` (a CSV row with too
many or too few fields); and per image without a counted row ``no_prediction``. The
estimator needs no face detection: its rows are the images it predicts
(:func:`import_estimates`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

import numpy as np
import pandas as pd

from facecast.attributes.estimates import GENDER_CLASSES, Estimate
from facecast.datasets.csv_rows import read_csv_rows
from facecast.datasets.fairface import FAIRFACE_AGE_BINS, FAIRFACE_RACES
from facecast.datasets.utkface import RACE_FROM_FAIRFACE, UTK_RACES

ATTRIBUTES = ("gender", "age", "race")
MATCHES = ("path", "fairface_predict")
STATUSES = ("ok", "not_in_dataset", "ambiguous_image", "duplicate_prediction", "bad_value",
            "bad_row", "no_prediction")
STATUS_COLUMNS = ["estimator", "where", "image", "image_id", "status", "message"]
GENDER_WORDS = {"male": "Male", "m": "Male", "female": "Female", "f": "Female"}
#: UTKFace's file-name coding of gender
GENDER_CODES = {0.0: "Male", 1.0: "Female"}
#: spellings of FairFace's top age bin: the label files' and predict.py's
AGE_SPELLINGS = {**{b: b for b in FAIRFACE_AGE_BINS}, "70+": "more than 70"}
MAX_YEARS = 150.0
#: FairFace predict.py's face chip: <name up to its first dot>_face<k>.<ext>
CHIP = re.compile(r"^(?P<stem>.*)_face(?P<k>\d+)\.[^./]*$")


@dataclass(frozen=True)
class ImportSpec:
    """One ``estimators.imports`` entry."""

    name: str
    path: Path
    image: str
    columns: dict[str, str]
    values: dict[str, dict[str, str]] = field(default_factory=dict)
    match: str = "path"

    @classmethod
    def from_config(cls, name: str, cfg: Mapping[str, Any]) -> ImportSpec:
        """The entry ``estimators.imports.<name>`` (schema-checked)."""
        return cls(name=str(name), path=Path(str(cfg["path"])), image=str(cfg["image"]),
                   columns={a: str(cfg[a]) for a in ATTRIBUTES if cfg.get(a)},
                   values={a: {str(k): str(v) for k, v in (m or {}).items()}
                           for a, m in (cfg.get("values") or {}).items()},
                   match=str(cfg.get("match", "path")))

    def column(self, attribute: str) -> str:
        """The attribute-table column that holds this import's estimate of ``attribute``."""
        return f"import_{self.name}_{attribute}"


@dataclass(frozen=True)
class Imported:
    """What the imports of one dataset add: ``columns`` (``image_id`` and one column per
    estimate, to join onto the attribute table), ``estimates`` and ``statuses``
    (:data:`STATUS_COLUMNS`, one row per prediction row and per image without one)."""

    columns: pd.DataFrame
    estimates: list[Estimate]
    statuses: pd.DataFrame


def read_predictions(path: str | os.PathLike) -> tuple[pd.DataFrame, np.ndarray, np.ndarray]:
    """``(frame, where, bad)`` of a predictions file: its rows (CSV as strings, Parquet as
    stored), each row's place (``preds.csv:12`` / ``preds.parquet row 11``) and the
    message of a malformed CSV row ('' for a good one)."""
    path = Path(path)
    if path.suffix.lower() in (".parquet", ".pq"):
        frame = pd.read_parquet(path).reset_index(drop=True)
        where = np.array([f"{path.name} row {i + 1}" for i in range(len(frame))], dtype=object)
        return frame, where, np.full(len(frame), "", dtype=object)
    rows = read_csv_rows(path)
    where = np.array([f"{path.name}:{n}" for n in rows.line], dtype=object)
    return rows.frame, where, rows.bad


def header_of(path: str | os.PathLike) -> list[str]:
    """The column names of a predictions file (reads its header or Parquet schema only)."""
    path = Path(path)
    if path.suffix.lower() in (".parquet", ".pq"):
        import pyarrow.parquet as pq

        return list(pq.read_schema(path).names)
    import csv

    with open(path, newline="", encoding="utf-8-sig") as fh:
        first = next(csv.reader(fh), [])
    return [c.strip() for c in first if c.strip()]


def _text(values: pd.Series) -> pd.Series:
    """Each value as stripped text ('' for a missing one); 1.0 stays ``1.0``."""
    return values.astype(object).where(values.notna(), "").astype(str).str.strip()


def _objects(values: pd.Series) -> np.ndarray:
    """An object array with None (not NaN) where a value is missing."""
    out = values.to_numpy(dtype=object)
    out[pd.isna(out)] = None
    return out


def _mapped(values: pd.Series, mapping: Mapping[str, str]) -> pd.Series:
    text = _text(values)
    return text.map(lambda v: mapping.get(v, v)) if mapping else text


@dataclass(frozen=True)
class Parsed:
    """One attribute's column read: the estimate ``kind``, ``values`` (object: the class,
    or float: P(male) / years; None / NaN where not read), ``bad`` (why a value could
    not be read, '' where it could) and ``form`` (how the column was read, for the log)."""

    kind: str
    values: np.ndarray
    bad: np.ndarray
    form: str


def _why(raw: pd.Series, ok: np.ndarray, attribute: str, what: str) -> np.ndarray:
    msg = np.full(len(raw), "", dtype=object)
    for i in np.flatnonzero(~ok):
        msg[i] = f"{attribute} empty" if raw.iloc[i] == "" else \
            f"{attribute} {raw.iloc[i]!r} is not {what}"
    return msg


def parse_gender(values: pd.Series, mapping: Mapping[str, str] | None = None) -> Parsed:
    """Gender estimates (see the module docstring)."""
    raw = _mapped(values, mapping or {})
    word = raw.str.lower().map(GENDER_WORDS)
    num = pd.to_numeric(raw, errors="coerce").to_numpy(np.float64)
    if word.notna().any():
        ok = word.notna().to_numpy()
        return Parsed("label", _objects(word), _why(raw, ok, "gender", "Male, Female, "
                      "M or F (a column of classes; values: maps other spellings)"), "classes")
    given = np.isfinite(num)
    if given.any() and np.isin(num[given], (0.0, 1.0)).all():
        out = _objects(pd.Series(num).map(GENDER_CODES))
        return Parsed("label", out, _why(raw, given, "gender", "0 or 1 (a column of "
                      "UTKFace's codes, 0 = Male, 1 = Female)"), "0 = Male, 1 = Female")
    ok = given & (num >= 0.0) & (num <= 1.0)
    why = np.where(given, _why(raw, ok, "gender", "P(male) in [0, 1]"),
                   _why(raw, ok, "gender", "Male, Female, M, F or a number (values: maps "
                        "other spellings)"))
    return Parsed("probability", np.where(ok, num, np.nan), why, "P(male)")


def parse_age(values: pd.Series, mapping: Mapping[str, str] | None = None) -> Parsed:
    """Age estimates (see the module docstring)."""
    raw = _mapped(values, mapping or {})
    bins = raw.map(AGE_SPELLINGS)
    if bins.notna().any():
        ok = bins.notna().to_numpy()
        return Parsed("label", _objects(bins), _why(
            raw, ok, "age", f"one of FairFace's bins ({', '.join(FAIRFACE_AGE_BINS)}; 70+) "
            "in a column of bins"), "FairFace bins")
    num = pd.to_numeric(raw, errors="coerce").to_numpy(np.float64)
    ok = np.isfinite(num) & (num >= 0.0) & (num <= MAX_YEARS)
    return Parsed("years", np.where(ok, num, np.nan),
                  _why(raw, ok, "age", f"an age in years in [0, {MAX_YEARS:g}]"), "years")


def parse_race(values: pd.Series, races: Sequence[str],
               mapping: Mapping[str, str] | None = None) -> Parsed:
    """Race estimates as the dataset's classes ``races`` (see the module docstring)."""
    raw = _mapped(values, mapping or {})
    known = {r.lower(): r for r in races}
    if tuple(races) == UTK_RACES:
        known = {**{k.lower(): v for k, v in RACE_FROM_FAIRFACE.items()}, **known}
    out = raw.str.lower().map(known)
    ok = out.notna().to_numpy()
    return Parsed("label", _objects(out), _why(
        raw, ok, "race", f"one of the dataset's races ({', '.join(races)}; values: maps "
        "other spellings)"), "classes")


def parse_attribute(attribute: str, values: pd.Series, races: Sequence[str],
                    mapping: Mapping[str, str] | None = None) -> Parsed:
    """:func:`parse_gender`, :func:`parse_age` or :func:`parse_race`."""
    if attribute == "gender":
        return parse_gender(values, mapping)
    if attribute == "age":
        return parse_age(values, mapping)
    return parse_race(values, races, mapping)


def _normalise(value: str, root: str) -> str:
    """A predicted path as a dataset image id (posix, relative to ``root``)."""
    p = value.replace("\\", "/")
    for r in ((root, os.path.abspath(root)) if root else ()):
        r = r.replace("\\", "/").rstrip("/") + "/"
        if p.startswith(r):
            p = p[len(r):]
            break
    while p.startswith("./"):
        p = p[2:]
    return p


def _chip_matches(text: pd.Series, image_ids: Sequence[str], ids: np.ndarray,
                  status: np.ndarray, message: np.ndarray) -> None:
    """``match: fairface_predict`` (see :func:`match_images`)."""
    stems = pd.Series([PurePosixPath(i).name.split(".")[0] for i in image_ids], dtype=object)
    shared = stems.duplicated(keep=False).to_numpy()
    single = dict(zip(stems[~shared], np.asarray(image_ids, dtype=object)[~shared],
                      strict=True))
    several = {k: [image_ids[j] for j in v] for k, v in
               stems[shared].groupby(stems[shared]).indices.items()} if shared.any() else {}
    for i, v in enumerate(text):
        m = CHIP.match(PurePosixPath(v.replace("\\", "/")).name)
        stem = m["stem"] if m else None
        if stem in single:
            ids[i] = single[stem]
        elif stem in several:
            status[i] = "ambiguous_image"
            message[i] = (f"{v!r}: the images {', '.join(several[stem][:3])} all have the "
                          f"name {stem!r}")
        else:
            status[i] = "not_in_dataset"
            message[i] = (f"{v!r} is not a face chip named as FairFace's predict.py names "
                          "them (<name>_face<k>.<ext>)" if m is None else
                          f"{v!r}: no dataset image is named {stem!r}")


def match_images(images: pd.Series, image_ids: Sequence[str], how: str = "path",
                 root: str = "", preferred: Sequence[str] | None = None
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(image_id, status, message)`` of each predicted image: the dataset image it names
    (None where none) and, where none, status ``not_in_dataset`` / ``ambiguous_image`` and
    why ('' where matched). ``fairface_predict`` looks for a name among ``preferred`` (the
    labelled images: a UTKFace ``duplicate`` copy shares its name) before all images."""
    text = _text(images)
    ids = np.full(len(text), None, dtype=object)
    status = np.full(len(text), "", dtype=object)
    message = np.full(len(text), "", dtype=object)
    if how == "fairface_predict":
        _chip_matches(text, image_ids if preferred is None else preferred, ids, status,
                      message)
        again = status == "not_in_dataset"
        if preferred is not None and again.any():
            status[again], message[again] = "", ""
            sub = [ids[again], status[again], message[again]]
            _chip_matches(text[again].reset_index(drop=True), image_ids, *sub)
            ids[again], status[again], message[again] = sub
        return ids, status, message
    known = set(image_ids)
    shown = list(preferred or []) or list(image_ids)
    example = f", e.g. {shown[0]!r}" if shown else ""
    for i, p in enumerate(_normalise(v, root) for v in text):
        if p in known:
            ids[i] = p
        else:
            status[i] = "not_in_dataset"
            message[i] = (f"{text.iloc[i]!r} is not a path of the dataset (relative to its "
                          f"root{example})" if p else "the image is empty")
    return ids, status, message


def _classes(attribute: str, races: Sequence[str]) -> tuple[str, ...]:
    return {"gender": GENDER_CLASSES, "age": FAIRFACE_AGE_BINS,
            "race": tuple(races)}[attribute]


def _duplicates(ids: np.ndarray, status: np.ndarray, message: np.ndarray,
                where: np.ndarray) -> None:
    """Rows naming an image an earlier counted row names: ``duplicate_prediction``."""
    live = pd.Series(ids, dtype=object).where(status == "")
    dup = (live.duplicated(keep="first") & live.notna()).to_numpy()
    first = dict(zip(live[live.notna() & ~dup], where[live.notna().to_numpy() & ~dup],
                     strict=True))
    for i in np.flatnonzero(dup):
        status[i] = "duplicate_prediction"
        message[i] = f"{ids[i]} is predicted by {first[ids[i]]} already; that row counts"
    ids[dup] = None


def import_estimates(spec: ImportSpec, manifest: pd.DataFrame, races: Sequence[str],
                     root: str = "") -> Imported:
    """One import read against one dataset (``manifest``: ``image_id``, ``status``;
    ``races``: the dataset's race classes; ``root``: its root as configured). See the
    module docstring."""
    frame, where, bad = read_predictions(spec.path)
    image_ids = manifest["image_id"].astype(str).tolist()
    labelled = manifest.loc[manifest["status"].astype(str) == "ok", "image_id"].astype(str)
    ids, status, message = match_images(frame[spec.image], image_ids, spec.match, root,
                                        labelled.tolist())
    broken = bad != ""
    status[broken], message[broken], ids[broken] = "bad_row", bad[broken], None
    _duplicates(ids, status, message, where)
    counted = status == ""
    status[counted] = "ok"
    out = pd.DataFrame({"image_id": ids[counted]})
    estimates: list[Estimate] = []
    bad_values = np.full(int(counted.sum()), "", dtype=object)
    for attribute, column in spec.columns.items():
        parsed = parse_attribute(attribute, frame.loc[counted, column].reset_index(drop=True),
                                 races, spec.values.get(attribute))
        out[spec.column(attribute)] = parsed.values
        estimates.append(Estimate(spec.name, attribute, parsed.kind, (spec.column(attribute),),
                                  _classes(attribute, races)))
        bad_values = np.where(parsed.bad == "", bad_values,
                              np.where(bad_values == "", parsed.bad, bad_values + "; " +
                                       parsed.bad.astype(str)))
    idx = np.flatnonzero(counted)
    has_bad = bad_values != ""
    status[idx[has_bad]] = "bad_value"
    message[idx[has_bad]] = bad_values[has_bad] + " (no estimate of it for this image)"
    m_status = dict(zip(manifest["image_id"].astype(str), manifest["status"].astype(str),
                        strict=True))
    for i in idx[~has_bad]:
        if m_status.get(ids[i], "ok") != "ok":
            message[i] = f"{ids[i]} has manifest status {m_status[ids[i]]}: it is in no group"
    message = np.array([f"{w}: {m}" if m and st != "bad_row" else m
                        for w, m, st in zip(where, message, status, strict=True)], dtype=object)
    rows = pd.DataFrame({"estimator": spec.name, "where": where,
                         "image": _text(frame[spec.image]).to_numpy(object),
                         "image_id": np.where(counted, ids, None), "status": status,
                         "message": message})
    missing = labelled[~labelled.isin(set(out["image_id"]))].to_numpy(object)
    rows = pd.concat([rows, pd.DataFrame({
        "estimator": spec.name, "where": "", "image": "", "image_id": missing,
        "status": "no_prediction",
        "message": [f"{i}: no row of {spec.path.name} predicts it" for i in missing]})],
        ignore_index=True)
    return Imported(out, estimates, rows[STATUS_COLUMNS])


def applies(cfg: Mapping[str, Any], dataset: str) -> bool:
    """Whether the import ``cfg`` predicts dataset ``dataset`` (its ``datasets``; empty:
    every attribute benchmark)."""
    names = cfg.get("datasets") or []
    return not names or dataset in names


def load_imports(imports: Mapping[str, Any], dataset: str, manifest: pd.DataFrame,
                 races: Sequence[str], root: str = "") -> Imported:
    """Every import of ``estimators.imports`` that predicts ``dataset``, together
    (``columns`` joined on ``image_id``)."""
    parts = [import_estimates(ImportSpec.from_config(name, cfg), manifest, races, root)
             for name, cfg in (imports or {}).items() if applies(cfg or {}, dataset)]
    columns = pd.DataFrame({"image_id": pd.Series([], dtype=object)})
    for p in parts:
        columns = columns.merge(p.columns, on="image_id", how="outer")
    statuses = (pd.concat([p.statuses for p in parts], ignore_index=True) if parts else
                pd.DataFrame({c: pd.Series([], dtype=object) for c in STATUS_COLUMNS}))
    return Imported(columns, [e for p in parts for e in p.estimates], statuses)


def status_summary(statuses: pd.DataFrame) -> pd.DataFrame:
    """Per estimator and status (in :data:`STATUSES` order): ``rows`` and an
    ``example`` message."""
    if statuses.empty:
        return pd.DataFrame(columns=["estimator", "status", "rows", "example"])
    order = {s: i for i, s in enumerate(STATUSES)}
    g = statuses.groupby(["estimator", "status"], sort=False)
    out = g.size().rename("rows").reset_index()
    out["example"] = g["message"].first().to_numpy()
    out["_o"] = out["status"].map(order)
    est = {e: i for i, e in enumerate(pd.unique(statuses["estimator"]))}
    out["_e"] = out["estimator"].map(est)
    return out.sort_values(["_e", "_o"]).drop(columns=["_e", "_o"]).reset_index(drop=True)


def dataset_races(kind: str, manifest: pd.DataFrame) -> tuple[str, ...]:
    """The race classes of an attribute benchmark: UTKFace's five for ``kind: utkface``,
    FairFace's seven for ``fairface``; without a kind, UTKFace's when its truth labels are
    all UTKFace's and not all FairFace's."""
    if kind in ("fairface", "utkface"):
        return UTK_RACES if kind == "utkface" else FAIRFACE_RACES
    seen = set(manifest["label_race"].dropna().astype(str)) if "label_race" in manifest \
        else set()
    return UTK_RACES if not seen <= set(FAIRFACE_RACES) and seen <= set(UTK_RACES) \
        else FAIRFACE_RACES


def join_imports(attrs: pd.DataFrame, manifest: pd.DataFrame, cfg: Mapping[str, Any],
                 dataset: str, kind: str = "", root: str = ""
                 ) -> tuple[pd.DataFrame, Imported]:
    """The attribute table with the columns of every import of ``estimators`` section
    ``cfg`` that predicts ``dataset`` joined on (``image_id``; NaN where an image has no
    prediction), and what :func:`load_imports` read."""
    imported = load_imports(cfg.get("imports") or {}, dataset, manifest,
                            dataset_races(kind, manifest), root)
    if not imported.estimates:
        return attrs, imported
    cols = imported.columns.astype({"image_id": str})
    return attrs.merge(cols, on="image_id", how="left", validate="one_to_one"), imported


def imports_markdown(imported: Imported) -> str:
    """The report's section on the imported predictions: rows per status with an example
    ('' without imports)."""
    from facecast.fairness.tables import to_markdown

    if imported.statuses.empty:
        return ""
    return "\n".join([
        "## Imported predictions by status", "",
        "Every row of each predictions file and every image of the dataset without one "
        "(estimator_imports.csv holds them all; an imported estimator needs no face "
        "detection: its images are those it predicts).", "",
        to_markdown(status_summary(imported.statuses)), ""])


def write_import_statuses(imported: Imported, out_dir: str | os.PathLike,
                          provenance: Mapping[str, Any] | None = None) -> None:
    """``estimator_imports.parquet`` / ``.csv`` in ``out_dir``: every status row (no rows
    without imports) - and one log line per import and status with an example."""
    import logging

    from facecast.io.atomic import write_text
    from facecast.io.parquet_io import write_parquet

    out = Path(out_dir)
    statuses = imported.statuses.astype({"where": object, "image": object, "image_id": object})
    write_parquet(statuses, out / "estimator_imports.parquet", provenance=provenance)
    write_text(out / "estimator_imports.csv", statuses.to_csv(index=False))
    log = logging.getLogger("facecast.labels")
    for r in status_summary(statuses).itertuples():
        log.info("import %s: %d rows %s%s", r.estimator, r.rows, r.status,
                 f" (e.g. {r.example})" if r.example else "")
