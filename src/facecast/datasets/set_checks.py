"""Config checks of the ``rfw`` and ``bfw`` dataset kinds (run before any job, from
:func:`facecast.datasets.checks.config_errors`) and their label columns.

Each message starts with the key at fault: a missing root, set folder, pairs file, ``.bin``
or datatable; an unknown RFW set; a datatable without one of BFW's columns; a ``scores``
entry the table lacks or that cannot be a model name; BFW's pickled datatable (``.pkl``),
which is never unpickled: the message gives the one-line conversion to CSV. Reads a
header line and a few rows, never an image (and never a pickle).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from facecast.config.columns import register_labels
from facecast.config.fair_sets import (
    BFW_COLUMNS,
    RFW_SETS,
    bfw_header,
    flipped_columns,
    has_embed_models,
    rfw_sets,
    score_columns,
    skipped_columns,
)
from facecast.config.util import embed_model_names, listing, need_file

#: the manifest labels of each kind
RFW_LABELS = {"label_rfw_set"}
BFW_LABELS = {"label_bfw_subgroup", "label_bfw_gender", "label_bfw_ethnicity"}
MODEL_NAME = re.compile(r"^[A-Za-z0-9_-]+$")
#: suffixes of pickled tables (BFW ships bfw-<version>-datatable.pkl beside the CSV)
PICKLE_SUFFIXES = (".pkl", ".pickle")


def pickle_error(key: str, path: str) -> str:
    """The config error of a pickled datatable: its name and the one-line conversion."""
    csv = str(Path(path).with_suffix(".csv"))
    return (f"{key}: {path} is a pickle; facecast never unpickles a file (loading a pickle "
            "runs whatever code it holds). Convert it once, where you trust the file, and "
            "point table at the CSV: python -c \"import pandas as pd; "
            f"pd.read_pickle('{path}').to_csv('{csv}', index=False)\"")


def _root_errors(key: str, spec: Mapping[str, Any], what: str) -> list[str]:
    root = spec.get("root")
    if root and not Path(str(root)).is_dir():
        return [f"{key}.root: directory {root!r} does not exist (looked at "
                f"{Path(str(root)).absolute()}); {what}"]
    return []


def rfw_errors(ds: str, spec: Mapping[str, Any]) -> list[str]:
    """Mistakes of one ``kind: rfw`` block (module docstring)."""
    from facecast.datasets.rfw import rfw_files

    key = f"datasets.{ds}"
    bins = spec.get("bins")
    if not spec.get("root") and not bins:
        return [f"{key}.root: dataset kind rfw needs root (RFW's test release, holding data/ "
                "and txts/) or bins (its insightface .bin files by set)"]
    errors = _root_errors(key, spec, "point it at RFW's test folder (data/, txts/)")
    if bins:
        if spec.get("sets"):
            errors.append(f"{key}.sets: with bins the sets are the keys of bins; leave sets "
                          "out")
        names = [Path(str(p)).name for p in dict(bins).values()]
        for s, path in dict(bins).items():
            if s not in RFW_SETS:
                errors.append(f"{key}.bins.{s}: unknown RFW set {s!r}; RFW's sets: "
                              f"{listing(RFW_SETS)}")
            need_file(errors, f"{key}.bins.{s}", path, "verification .bin")
            if names.count(Path(str(path)).name) > 1:
                errors.append(f"{key}.bins.{s}: file name {Path(str(path)).name!r} is used "
                              "by two sets; the images are located by file name")
        return errors
    for i, s in enumerate(spec.get("sets") or []):
        if s not in RFW_SETS:
            errors.append(f"{key}.sets[{i}]: unknown RFW set {s!r}; RFW's sets: "
                          f"{listing(RFW_SETS)}")
    if errors:
        return errors
    for s in rfw_sets(spec):
        files = rfw_files(str(spec["root"]), s)
        if not files["pairs"].is_file():
            errors.append(f"{key}.root: RFW set {s} has no pairs file {files['pairs']} "
                          "(list the sets you hold in sets)")
        if not files["images_dir"].is_dir():
            errors.append(f"{key}.root: RFW set {s} has no image folder "
                          f"{files['images_dir']}")
    return errors


def _score_errors(key: str, spec: Mapping[str, Any], header: tuple[str, ...],
                  config: Mapping[str, Any]) -> list[str]:
    errors = []
    listed = spec.get("scores")
    embed = set(embed_model_names(config))
    mapping = isinstance(listed, Mapping)
    for i, name in enumerate(listed or []):
        at = f"{key}.scores.{name}" if mapping else f"{key}.scores[{i}]"
        if name not in header:
            errors.append(f"{at}: {name!r} is not a column of {spec['table']} (its columns: "
                          f"{listing(header)})")
        elif name in BFW_COLUMNS:
            errors.append(f"{at}: {name!r} is one of BFW's own columns, not a score column")
    for name in score_columns(spec):
        if not MODEL_NAME.match(name):
            errors.append(f"{key}.scores: score column {name!r} cannot be a model name "
                          "(letters, digits, _ and -); list the columns to use in scores")
        elif name in embed:
            errors.append(f"{key}.scores: score column {name!r} has the name of an embed model "
                          "(embed.models); rename one of them")
    if not score_columns(spec) and not has_embed_models(config):
        errors.append(f"{key}.scores: the datatable has no numeric score column and "
                      "embed.models is empty: there is no model to evaluate")
    return errors


def bfw_errors(ds: str, spec: Mapping[str, Any], config: Mapping[str, Any]) -> list[str]:
    """Mistakes of one ``kind: bfw`` block (module docstring)."""
    key = f"datasets.{ds}"
    errors = _root_errors(key, spec, "point it at BFW's image folder (<subgroup>/<nid>/...)")
    if has_embed_models(config) and not spec.get("root"):
        errors.append(f"{key}.root: embed.models run on BFW's images: set root (the folder "
                      "holding <subgroup>/<nid>/<file>.jpg), or write embed: {models: {}} "
                      "to evaluate the datatable's score columns only")
    if not spec.get("table"):
        return errors + [f"{key}.table: dataset kind bfw needs its datatable CSV "
                         "(bfw-<version>-datatable.csv)"]
    if Path(str(spec["table"])).suffix.lower() in PICKLE_SUFFIXES:
        return errors + [pickle_error(f"{key}.table", str(spec["table"]))]
    need_file(errors, f"{key}.table", spec["table"], "BFW datatable")
    if errors and not Path(str(spec["table"])).is_file():
        return errors
    header = bfw_header(str(spec["table"]))
    missing = [c for c in BFW_COLUMNS if c not in header]
    if missing:
        errors.append(f"{key}.table: {spec['table']} has no column(s) {', '.join(missing)} "
                      f"(BFW's datatable has {', '.join(BFW_COLUMNS)} and score columns; it "
                      f"has {listing(header)})")
    return errors + _score_errors(key, spec, header, config)


def fair_set_errors(config: Mapping[str, Any]) -> list[str]:
    """Mistakes of every ``rfw`` / ``bfw`` dataset block."""
    errors: list[str] = []
    for ds, spec in (config.get("datasets") or {}).items():
        if not isinstance(spec, Mapping):
            continue
        if spec.get("kind") == "rfw":
            errors += rfw_errors(str(ds), spec)
        elif spec.get("kind") == "bfw":
            errors += bfw_errors(str(ds), spec, config)
        else:
            errors += [f"datasets.{ds}.{k}: only datasets of kind "
                       f"{'rfw' if k in ('sets', 'bins') else 'bfw'} take {k} (this one is "
                       f"{spec.get('kind')})" for k in ("sets", "bins", "table", "scores")
                       if spec.get(k) is not None]
    return errors


def bfw_plan(config: Mapping[str, Any]) -> list[str]:
    """Plan lines of each ``kind: bfw`` dataset: its score models (negated ones named)
    and, when ``scores`` is left out, the columns that are not models and why."""
    lines = []
    for ds, spec in (config.get("datasets") or {}).items():
        if not isinstance(spec, Mapping) or spec.get("kind") != "bfw" or not spec.get("table"):
            continue
        if not Path(str(spec["table"])).is_file():
            continue
        models = score_columns(spec)
        flip = flipped_columns(spec)
        line = (f"datasets.{ds}.scores: {'listed' if spec.get('scores') is not None else 'derived'}"
                f" - score models {', '.join(models) or '(none)'}")
        if flip:
            line += f"; negated (higher: different): {', '.join(flip)}"
        skipped = skipped_columns(spec)
        if skipped:
            line += "; not models: " + ", ".join(f"{c!r} ({why})" for c, why in skipped.items())
        lines.append(line)
    return lines


def rfw_plan(config: Mapping[str, Any]) -> list[str]:
    """Plan lines of each ``kind: rfw`` dataset read from the test release: its pairs
    files' structure (:func:`facecast.datasets.rfw.fold_structure`), one line when every
    set is in RFW's layout, else one per set that is not (a ``.bin``'s structure is
    stated when its protocol is written)."""
    from facecast.datasets.manifest import DatasetError
    from facecast.datasets.rfw import fold_structure, read_rfw_pairs, rfw_files

    lines = []
    for ds, spec in (config.get("datasets") or {}).items():
        if (not isinstance(spec, Mapping) or spec.get("kind") != "rfw" or spec.get("bins")
                or not spec.get("root")):
            continue
        found = {}
        for s in rfw_sets(spec):
            pairs = rfw_files(str(spec["root"]), s)["pairs"]
            try:
                found[s] = fold_structure(read_rfw_pairs(pairs, s)["label"].to_numpy())
            except DatasetError as exc:  # no file, or no pairs in it: the checks say so
                if pairs.is_file():
                    lines.append(f"datasets.{ds}: RFW {s}: {exc}")
        odd = {s: text for s, (regular, text) in found.items() if not regular}
        if found and not odd:
            lines.append(f"datasets.{ds}: RFW pairs files of {', '.join(found)} in RFW's "
                         f"layout ({next(iter(found.values()))[1].split(': ', 1)[1]})")
        lines += [f"datasets.{ds}: RFW {s} pairs file {text}" for s, text in odd.items()]
    return lines


@register_labels("rfw")
def rfw_labels(ds: str = "", spec: Mapping[str, Any] | None = None,
               errors: list[str] | None = None) -> set[str]:
    """An RFW image's set, ``label_rfw_set``."""
    return set(RFW_LABELS)


@register_labels("bfw")
def bfw_labels(ds: str = "", spec: Mapping[str, Any] | None = None,
               errors: list[str] | None = None) -> set[str]:
    """A BFW image's subgroup, gender and ethnicity (``label_bfw_*``)."""
    return set(BFW_LABELS)
