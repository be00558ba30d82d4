"""Which columns ``results/<ds>/attributes.parquet`` will have, known before any job
(issue 11.5), and the check that every column the config names is one of them.

Scorer columns are read from the scorer modules' source (no torch import); dataset labels
from the synthetic generator, CelebA's annotation header or a table manifest's header.
Where the answer is not certain the dataset is skipped (``None``), never a false error.
"""

from __future__ import annotations

import csv
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from facecast.config_util import (
    active_scorers_of,
    celeba40_trained,
    datasets_of,
    fairness_enabled,
    listing,
    module_constant,
    name_list,
    section,
    warn,
)

#: columns of ``attributes.parquet`` that come from the manifest, not a scorer
BASE_COLUMNS = ("image_id", "identity", "split", "exclude", "status", "message")
#: columns a table manifest keeps as they are (facecast.datasets.table.RESERVED)
TABLE_RESERVED = {"path", "identity", "split", "exclude", "status", "message"}

#: columns of scorers added later: scorer name -> ``(config) -> set of columns`` (None when
#: not certain). A scorer in ``attributes.scorers`` that is neither built in nor listed here
#: makes the column checks skip (never a false error).
SCORER_COLUMNS: dict[str, Callable[[Mapping[str, Any]], set[str] | None]] = {}


def synthetic_labels(spec: Mapping[str, Any] | None = None) -> set[str]:
    """``label_*`` columns of the synthetic generator (facecast.datasets.synthetic) for the
    dataset block ``spec``, with the ``label_noisy_*`` columns of its ``label_noise``."""
    mod = "facecast.datasets.synthetic"
    names = (module_constant(mod, "_IDENTITY_LABELS") + module_constant(mod, "_IMAGE_LABELS")
             + ("dark_skin", "low_contrast_group"))
    out = {f"label_{n}" for n in names}
    try:
        from facecast.labels.noise import DEMO_LABEL_NOISE, noise_attributes
    except ImportError:  # a tree without planted label noise
        return out
    noise = section(section(spec or {}, "synthetic"), "label_noise") or None
    noise = DEMO_LABEL_NOISE if noise is None else noise
    if noise.get("enabled", True):
        out |= {f"label_noisy_{a}" for a in noise_attributes(noise)}
    return out


def _celeba_labels(ds: str, spec: Mapping[str, Any], errors: list[str]) -> set[str] | None:
    root = Path(str(spec.get("root", "")))
    if not spec.get("root") or not root.is_dir():
        return None  # reported by the path checks
    for sub in ("", "Anno"):
        p = root / sub / "list_attr_celeba.txt"
        if p.is_file():
            try:
                with open(p, encoding="utf-8", errors="replace") as fh:
                    fh.readline()
                    header = fh.readline().split()
            except OSError as exc:
                warn(f"datasets.{ds}: cannot read {p} ({exc}); its label columns are not "
                     "checked")
                return None
            return {f"label_{n}" for n in header}
    errors.append(f"datasets.{ds}.root: CelebA annotation file list_attr_celeba.txt not found "
                  f"in {root} or {root / 'Anno'}; point root at the CelebA folder")
    return None


def _table_labels(ds: str, spec: Mapping[str, Any]) -> set[str] | None:
    path = Path(str(spec.get("manifest", "")))
    if not spec.get("manifest") or not path.is_file():
        return None  # reported by the path checks
    try:
        if path.suffix.lower() in (".parquet", ".pq"):
            import pyarrow.parquet as pq

            header = list(pq.read_schema(path).names)
        else:
            with open(path, newline="", encoding="utf-8-sig") as fh:
                header = next(csv.reader(fh), [])
    except Exception as exc:  # any unreadable header: skip, the ingest job will report it
        warn(f"datasets.{ds}.manifest: cannot read the header of {path} ({exc}); the columns "
             "that name its labels are not checked")
        return None
    return {c if c.startswith("label_") else f"label_{c}"
            for c in map(str, header) if c not in TABLE_RESERVED}


def dataset_labels(config: Mapping[str, Any], errors: list[str] | None = None
                   ) -> dict[str, set[str] | None]:
    """``label_*`` columns of each dataset's manifest (None where that is not certain)."""
    errors = [] if errors is None else errors
    out: dict[str, set[str] | None] = {}
    for ds, spec in datasets_of(config).items():
        kind = spec.get("kind")
        if kind == "synthetic":
            out[ds] = synthetic_labels(spec)
        elif kind == "celeba":
            out[ds] = _celeba_labels(ds, spec, errors)
        elif kind == "table":
            out[ds] = _table_labels(ds, spec)
        elif kind in ("folder", "lfw", "recordio", "insightface_bin"):
            out[ds] = set()
        else:
            out[ds] = None
    return out


def _checkpoint_labels(path: Path) -> list[str] | None:
    try:
        import torch

        ckpt = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    except Exception as exc:  # unreadable: the job will say why
        warn(f"attributes.celeba40.weights: cannot read the labels of {path} ({exc}); the "
             "columns it produces are not checked")
        return None
    if not isinstance(ckpt, Mapping):
        return None
    return [str(x) for x in ckpt.get("labels") or
            module_constant("facecast.attributes.heads", "CELEBA_ATTRIBUTES")]


def scorer_columns(config: Mapping[str, Any], labels: set[str] | None,
                   errors: list[str] | None = None) -> set[str] | None:
    """Columns the configured scorers write for a dataset with manifest ``labels``
    (None where that is not certain)."""
    errors = [] if errors is None else errors
    acfg = section(config, "attributes")
    heads = "facecast.attributes.heads"
    cols: set[str] = set()
    for scorer in active_scorers_of(config, errors):
        if scorer == "native":
            cols |= set(module_constant("facecast.attributes.native", "NATIVE_COLUMNS"))
            if acfg.get("embed_norms", True):
                cols |= {f"embed_norm_{m}" for m in name_list(section(config, "embed").get(
                    "models", {"lbp": {}, "dlib": {}}))}
        elif scorer == "age_gender":
            cols |= set(module_constant("facecast.attributes.age_gender", "AGE_COLUMNS"))
        elif scorer == "fairface":
            cols |= {f"fairface_{n}" for n in module_constant(heads, "FAIRFACE_RACES")
                     + module_constant(heads, "FAIRFACE_GENDERS")
                     + module_constant(heads, "FAIRFACE_AGES")}
        elif scorer == "pyiqa":
            cols |= {"iqa_" + m.replace("-", "_")
                     for m in name_list(section(acfg, "pyiqa").get("metrics"))}
        elif scorer in SCORER_COLUMNS:
            extra = SCORER_COLUMNS[scorer](config)
            if extra is None:
                return None
            cols |= set(extra)
        elif scorer != "celeba40":
            return None  # a scorer this module does not know: its columns are not certain
        elif scorer == "celeba40":
            if celeba40_trained(config):
                wanted = name_list(section(acfg, "trainer").get("labels"))
                if wanted:
                    cols |= {w.removeprefix("label_") for w in wanted}
                elif labels is None:
                    return None
                else:  # every binary label: a subset of the labels we know
                    cols |= {c.removeprefix("label_") for c in labels}
            else:
                path = Path(str(section(acfg, "celeba40").get("weights")))
                found = _checkpoint_labels(path) if path.is_file() else None
                if found is None:
                    return None
                cols |= set(found)
    return cols


def known_columns(config: Mapping[str, Any], errors: list[str] | None = None
                  ) -> dict[str, set[str] | None]:
    """Columns of ``results/<ds>/attributes.parquet`` per dataset (None = not certain)."""
    errors = [] if errors is None else errors
    out: dict[str, set[str] | None] = {}
    for ds, labels in dataset_labels(config, errors).items():
        if labels is None:
            out[ds] = None
            continue
        cols = scorer_columns(config, labels, errors)
        out[ds] = None if cols is None else cols | labels | set(BASE_COLUMNS)
    return out


def column_references(config: Mapping[str, Any]) -> list[tuple[str, str, list[str]]]:
    """``(key path, column, datasets it must exist in)`` for every column the config names."""
    all_ds = list(datasets_of(config))
    refs: list[tuple[str, str, list[str]]] = []
    for bench, bcfg in section(config, "benchmarks").items():
        for i, f in enumerate((bcfg or {}).get("filters") or []):
            if isinstance(f, Mapping) and "attribute" in f:
                refs.append((f"benchmarks.{bench}.filters[{i}].attribute", str(f["attribute"]),
                             all_ds))
    for i, c in enumerate(name_list(section(config, "correlations").get("columns"))):
        refs.append((f"correlations.columns[{i}]", c, all_ds))
    if fairness_enabled(config):
        fcfg = section(config, "fairness")
        fds = [d for d in name_list(fcfg.get("datasets")) if d in all_ds] or all_ds
        for part in ("protected", "legitimate"):
            for name, spec in section(fcfg, part).items():
                if isinstance(spec, Mapping) and "column" in spec:
                    refs.append((f"fairness.{part}.{name}.column", str(spec["column"]), fds))
        for name, spec in section(fcfg, "soft_attributes").items():
            for cat, col in section(spec, "categories").items():
                col = str(col)
                col = col[2:].strip() if col.startswith("1-") else col
                refs.append((f"fairness.soft_attributes.{name}.categories.{cat}", col, fds))
    return refs


def check_columns(config: Mapping[str, Any]) -> list[str]:
    """Issue 11.5: every named column is produced by a scorer or is a dataset label."""
    errors: list[str] = []
    known = known_columns(config, errors)
    for key, column, wanted in column_references(config):
        for ds in wanted:
            cols = known.get(ds)
            if cols is None or column in cols:
                continue
            errors.append(f"{key}: {column!r} is not produced by any configured scorer nor a "
                          f"label of dataset {ds!r} (known columns: {listing(sorted(cols))}); "
                          "add the scorer that writes it to attributes.scorers, or name an "
                          "existing column")
    # the trainer's labels must be labels of the datasets it trains on
    acfg = section(config, "attributes")
    trains = (section(acfg, "trainer").get("enabled", False)
              or ("celeba40" in name_list(acfg.get("scorers")) and celeba40_trained(config)))
    if trains:
        labels = dataset_labels(config)
        for i, w in enumerate(name_list(section(acfg, "trainer").get("labels"))):
            col = w if w.startswith("label_") else f"label_{w}"
            for ds, have in labels.items():
                if have is not None and col not in have:
                    errors.append(f"attributes.trainer.labels[{i}]: {w!r} is not a label of "
                                  f"dataset {ds!r} (its labels: {listing(sorted(have))})")
        if not name_list(section(acfg, "trainer").get("labels")):
            for ds, have in labels.items():
                if have is not None and not have:
                    errors.append(f"attributes.trainer: dataset {ds!r} has no label columns to "
                                  "train a celeba40 head on; set attributes.celeba40.weights "
                                  "to a trained checkpoint or drop celeba40 from "
                                  "attributes.scorers")
    return errors
