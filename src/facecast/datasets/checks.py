"""Config checks of the ingest stage, run before any job, and the dataset kinds' label
columns for the column registry (:mod:`facecast.config.columns`).

:func:`config_errors` is a :mod:`facecast.config.check` checker: ``(config) -> list of
messages``, each starting with the key path at fault: dataset roots, manifests, pairs and
exclude files exist; RecordIO / .bin containers and ``exclude_by`` are consistent;
``faces.detector: none`` lets images into benchmarks; ``insightface_bin`` imports name
their dataset; ``cast_arrays`` blocks (array headers, ``columns.csv``, the mask); a ``.bin`` dataset's ``layout`` and the protocol name its file stem gives. It is cheap (stats a few files, reads no records) and imports nothing heavy.

Label columns (registered with :func:`facecast.config.columns.register_labels`): the
synthetic generator's (with its planted ``label_noisy_*``), CelebA's annotation header, a
table manifest's header; folders, LFW and containers have none.
"""

from __future__ import annotations

import csv
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from facecast.config.bin_sets import bin_spec_errors
from facecast.config.columns import register_labels
from facecast.config.util import (
    attribute_only,
    datasets_of,
    module_constant,
    name_list,
    need_file,
    section,
    warn,
)
from facecast.datasets.cast_arrays import array_errors, read_column_names
from facecast.datasets.fairface import LABEL_COLUMNS as FAIRFACE_LABELS
from facecast.datasets.fairface import layout_errors as fairface_layout_errors
from facecast.datasets.label_noise import DEMO_LABEL_NOISE, noise_attributes
from facecast.datasets.manifest import DatasetError
from facecast.datasets.set_checks import (  # also registers rfw / bfw labels
    bfw_plan,
    fair_set_errors,
    rfw_plan,
)
from facecast.datasets.utkface import LABEL_COLUMNS as UTKFACE_LABELS

#: columns a table manifest keeps as they are (facecast.datasets.table.RESERVED)
TABLE_RESERVED = {"path", "identity", "split", "exclude", "status", "message"}
#: the module whose constants name the synthetic generator's labels
SYNTHETIC_MODULE = "facecast.datasets.synthetic.truth"


def path_errors(config: Mapping[str, Any]) -> list[str]:
    """Dataset roots and the files folder / table / CelebA / LFW datasets name exist."""
    errors: list[str] = []
    for ds, spec in section(config, "datasets").items():
        spec = spec if isinstance(spec, Mapping) else {}
        kind = spec.get("kind")
        if kind not in ("folder", "table", "celeba", "lfw", "ijb", "fairface", "utkface"):
            continue  # synthetic is generated; containers are checked below
        key = f"datasets.{ds}"
        if not spec.get("root"):
            errors.append(f"{key}.root: dataset kind {kind} needs a root directory")
        elif not Path(str(spec["root"])).is_dir():
            errors.append(f"{key}.root: directory {spec['root']!r} does not exist "
                          f"(looked at {Path(str(spec['root'])).absolute()})")
        elif kind == "celeba" and spec.get("images_dir"):
            sub = Path(str(spec["root"])) / str(spec["images_dir"])
            if not sub.is_dir():
                errors.append(f"{key}.images_dir: folder {sub} does not exist")
        if kind == "ijb" and spec.get("root") and Path(str(spec["root"])).is_dir():
            errors += ijb_errors(key, spec)
        if kind == "fairface" and spec.get("root") and Path(str(spec["root"])).is_dir():
            errors += fairface_layout_errors(key, spec)
        if kind == "table":
            if not spec.get("manifest"):
                errors.append(f"{key}.manifest: dataset kind table needs a manifest file "
                              "(CSV or Parquet with path and identity columns)")
            else:
                need_file(errors, f"{key}.manifest", spec["manifest"], "manifest file")
        if kind == "lfw" and not spec.get("pairs"):
            errors.append(f"{key}.pairs: dataset kind lfw needs its pairs.txt (or use kind "
                          "folder)")
        for opt in ("pairs", "exclude"):
            if spec.get(opt):
                need_file(errors, f"{key}.{opt}", spec[opt])
    return errors


def ijb_errors(key: str, spec: Mapping[str, Any]) -> list[str]:
    """An IJB root holds ``loose_crop/`` and the variant's three 1:1 meta files."""
    from facecast.datasets.ijb import IMAGE_DIR, meta_files

    root = Path(str(spec["root"]))
    variant = str(spec.get("variant") or "ijbc")
    errors = []
    if not (root / IMAGE_DIR).is_dir():
        errors.append(f"{key}.root: {root} has no {IMAGE_DIR}/ folder (the IJB release as "
                      "insightface prepares it: loose_crop/ and meta/)")
    for what, path in meta_files(root, variant).items():
        if not path.is_file():
            errors.append(f"{key}.root: {what} file {path} does not exist (variant {variant})")
    return errors


def config_errors(config: Mapping[str, Any]) -> list[str]:
    """Mistakes in dataset paths, RecordIO / .bin datasets, ``exclude_by``,
    ``faces.detector: none`` and ``insightface_bin`` imports."""
    errors: list[str] = (path_errors(config) + attribute_only_errors(config)
                         + fair_set_errors(config))
    datasets = section(config, "datasets")
    for ds, spec in datasets.items():
        spec = spec if isinstance(spec, Mapping) else {}
        key, kind = f"datasets.{ds}", spec.get("kind")
        if kind == "recordio":
            if not spec.get("rec"):
                errors.append(f"{key}.rec: dataset kind recordio needs its .rec file")
            else:
                need_file(errors, f"{key}.rec", spec["rec"], "RecordIO file")
                idx = spec.get("idx") or str(Path(str(spec["rec"])).with_suffix(".idx"))
                need_file(errors, f"{key}.idx", idx, "RecordIO index")
        elif kind == "cast_arrays":
            errors += array_errors(ds, spec)
        elif kind == "insightface_bin":
            if not spec.get("path"):
                errors.append(f"{key}.path: dataset kind insightface_bin needs its .bin file")
            else:
                need_file(errors, f"{key}.path", spec["path"], "verification .bin")
        errors += bin_spec_errors(ds, spec)
        by = spec.get("exclude_by", "path")
        if by == "record" and kind != "recordio":
            errors.append(f"{key}.exclude_by: 'record' needs kind recordio (got {kind})")
        if by != "path" and not spec.get("exclude"):
            errors.append(f"{key}.exclude_by: set, but no exclude list is given")
    faces = section(config, "faces")
    if faces.get("detector") == "none":
        statuses = section(config, "mining").get("statuses")
        if statuses is not None and "aligned_input" not in list(statuses):
            errors.append("mining.statuses: faces.detector is none, so every image has faces "
                          "status aligned_input; add aligned_input (now "
                          f"{list(statuses)}) or no image can enter a benchmark")
    for name, imp in section(section(config, "evaluate"), "imports").items():
        imp = imp if isinstance(imp, Mapping) else {}
        if imp.get("format") != "insightface_bin":
            continue
        key = f"evaluate.imports.{name}"
        need_file(errors, f"{key}.path", imp.get("path", ""), "verification .bin")
        bin_name = Path(str(imp.get("path", ""))).name
        users = [d for d, s in datasets.items() if isinstance(s, Mapping)
                 and s.get("kind") == "insightface_bin"
                 and Path(str(s.get("path", ""))).name == bin_name]
        for d in imp.get("datasets") or []:
            if d not in users:
                errors.append(f"{key}.datasets: {d} is not a dataset of kind insightface_bin "
                              f"made from {bin_name}; the pairs name that file's images")
        if not imp.get("datasets") and not users:
            errors.append(f"{key}: no dataset of kind insightface_bin has path {bin_name}; add "
                          f"one (datasets.<name>: {{kind: insightface_bin, path: ...}})")
    return errors


#: sections whose ``datasets`` list names datasets a verification stage runs on
VERIFICATION_SECTIONS = ("fairness", "demographics", "identification", "quality",
                         "covariates", "slices", "mitigation", "templates")


def attribute_only_errors(config: Mapping[str, Any]) -> list[str]:
    """A verification section (or an ``evaluate.imports`` entry) that names a dataset of
    an attribute-only kind (fairface, utkface: no identities, nothing to verify)."""
    only = {ds: spec.get("kind") for ds, spec in datasets_of(config).items()
            if attribute_only(config, ds)}
    lists = [(f"{name}.datasets", section(config, name).get("datasets"))
             for name in VERIFICATION_SECTIONS]
    lists += [(f"evaluate.imports.{imp}.datasets", (cfg or {}).get("datasets"))
              for imp, cfg in section(section(config, "evaluate"), "imports").items()]
    return [f"{key}: {ds!r} is a dataset of kind {only[ds]} (images without identities: "
            "faces, attributes and the estimator report run on it, no verification)"
            for key, listed in lists for ds in name_list(listed) if ds in only]


def fill_defaults(config: dict[str, Any], absent: set[str]) -> list[str]:
    """Plan lines of ``cast_arrays`` datasets and attribute-only datasets: what runs for
    them and what does not."""
    lines = [f"datasets.{ds}: kind {spec.get('kind')} - images without identities: faces "
             "and attributes run (and the estimator report, see estimators); embeddings, "
             "benchmarks, evaluation, fairness and the other verification stages do not "
             "(nothing to verify without identities)"
             for ds, spec in datasets_of(config).items() if attribute_only(config, ds)]
    for ds, spec in section(config, "datasets").items():
        if not isinstance(spec, Mapping) or spec.get("kind") != "cast_arrays":
            continue
        head = (f"datasets.{ds}: kind cast_arrays - manifest and attributes.parquet come "
                "from CAST's arrays, benchmarks are filtered from the arrays, no attribute "
                "scorer runs; ")
        if spec.get("root"):
            lines.append(head + "faces and embed run only on the union of the benchmark "
                         f"pools (results/{ds}/pool_manifest.parquet), for the hard pairs; "
                         "evaluation and the stages after it are not run for it")
        else:
            lines.append(head + "no faces or embed job (no root: the images are not "
                         "given), so only mining.mode cast_random benchmarks get pairs; set "
                         f"datasets.{ds}.root to embed the benchmark pools")
    return lines + bfw_plan(config) + rfw_plan(config)


# ------------------------------------------------------------------ label columns


@register_labels("synthetic")
def synthetic_labels(ds: str = "", spec: Mapping[str, Any] | None = None,
                     errors: list[str] | None = None) -> set[str]:
    """``label_*`` columns of the synthetic generator for the dataset block ``spec``, with
    the ``label_noisy_*`` columns of its ``label_noise``."""
    names = (module_constant(SYNTHETIC_MODULE, "IDENTITY_LABELS")
             + module_constant(SYNTHETIC_MODULE, "IMAGE_LABELS")
             + module_constant(SYNTHETIC_MODULE, "GROUP_LABELS"))
    out = {f"label_{n}" for n in names}
    noise = section(section(spec or {}, "synthetic"), "label_noise") or None
    noise = DEMO_LABEL_NOISE if noise is None else noise
    if noise.get("enabled", True):
        out |= {f"label_noisy_{a}" for a in noise_attributes(noise)}
    return out


@register_labels("celeba")
def celeba_labels(ds: str, spec: Mapping[str, Any], errors: list[str]) -> set[str] | None:
    """``label_<name>`` for every attribute of CelebA's ``list_attr_celeba.txt`` header."""
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


@register_labels("table")
def table_labels(ds: str, spec: Mapping[str, Any], errors: list[str]) -> set[str] | None:
    """A table manifest's other columns, as ``label_<column>``."""
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


@register_labels("cast_arrays")
def cast_array_columns(ds: str, spec: Mapping[str, Any], errors: list[str]) -> set[str] | None:
    """The attribute columns ``columns.csv`` names (they become the attribute table's
    columns as they are, no ``label_`` prefix)."""
    try:
        return set(read_column_names(str(spec.get("columns", ""))))
    except (DatasetError, OSError):
        return None  # reported by the array checks


def _no_labels(ds: str, spec: Mapping[str, Any], errors: list[str]) -> set[str]:
    return set()


for _kind in ("folder", "lfw", "recordio", "insightface_bin"):
    register_labels(_kind, _no_labels)


@register_labels("fairface")
def fairface_labels(ds: str, spec: Mapping[str, Any], errors: list[str]) -> set[str]:
    """FairFace's labels (:mod:`facecast.datasets.fairface`)."""
    return set(FAIRFACE_LABELS)


@register_labels("utkface")
def utkface_labels(ds: str, spec: Mapping[str, Any], errors: list[str]) -> set[str]:
    """The labels of UTKFace's file names (:mod:`facecast.datasets.utkface`)."""
    return set(UTKFACE_LABELS)


@register_labels("ijb")
def ijb_labels(ds: str, spec: Mapping[str, Any], errors: list[str]) -> set[str]:
    """An IJB dataset's faceness score (``*_name_5pts_score.txt``) as ``label_faceness``."""
    return {"label_faceness"}
