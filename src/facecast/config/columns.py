"""The column registry: which columns ``results/<ds>/attributes.parquet`` will have, known
before any job, and the check that a column the config names is one of them.

The stages that make columns register what they make: dataset kinds their ``label_*``
columns (:func:`register_labels`, filled by :mod:`facecast.datasets.checks`), attribute
scorers theirs (:func:`register_columns`, filled by :mod:`facecast.attributes.checks`).
This package imports no stage; :data:`SOURCE_MODULES` names the modules that fill the
registry, loaded on first use. Where the answer is not certain (an unreadable header, a
scorer nobody registered) a dataset's columns are ``None`` and nothing is reported: never
a false error.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from facecast.config.fair_sets import score_only
from facecast.config.util import attribute_only, datasets_of, listing, note

#: columns of ``attributes.parquet`` that come from the manifest, not a scorer
BASE_COLUMNS = ("image_id", "identity", "split", "exclude", "status", "message")

#: ``(dataset name, dataset block, errors) -> label_* columns`` (None = not certain)
LabelSource = Callable[[str, Mapping[str, Any], list[str]], "set[str] | None"]
#: ``(config, the dataset's labels or None, errors) -> columns of the scorers`` (None = not
#: certain)
ColumnSource = Callable[[Mapping[str, Any], "set[str] | None", list[str]], "set[str] | None"]

#: dataset kind -> its label source
LABEL_SOURCES: dict[str, LabelSource] = {}
#: every scorer column source (the attributes stage registers one for its scorers)
COLUMN_SOURCES: list[ColumnSource] = []
#: modules whose import fills the registry
SOURCE_MODULES = ("facecast.datasets.checks", "facecast.attributes.checks")


def register_labels(kind: str, source: LabelSource | None = None) -> Any:
    """Say which ``label_*`` columns datasets of ``kind`` have; without ``source`` it is a
    decorator (``@register_labels("celeba")``)."""
    def add(fn: LabelSource) -> LabelSource:
        LABEL_SOURCES[kind] = fn
        return fn

    return add if source is None else add(source)


def register_columns(source: ColumnSource) -> ColumnSource:
    """Add a source of attribute-table columns (once)."""
    if source not in COLUMN_SOURCES:
        COLUMN_SOURCES.append(source)
    return source


def _load_sources() -> None:
    for module in SOURCE_MODULES:
        importlib.import_module(module)


def dataset_labels(config: Mapping[str, Any], errors: list[str] | None = None
                   ) -> dict[str, set[str] | None]:
    """``label_*`` columns of each dataset's manifest (None where that is not certain)."""
    _load_sources()
    errors = [] if errors is None else errors
    out: dict[str, set[str] | None] = {}
    for ds, spec in datasets_of(config).items():
        source = LABEL_SOURCES.get(str(spec.get("kind")))
        out[ds] = None if source is None else source(ds, spec, errors)
    return out


def scorer_columns(config: Mapping[str, Any], labels: set[str] | None,
                   errors: list[str] | None = None) -> set[str] | None:
    """Columns the configured scorers write for a dataset with manifest ``labels``
    (None where that is not certain)."""
    _load_sources()
    errors = [] if errors is None else errors
    cols: set[str] = set()
    for source in COLUMN_SOURCES:
        found = source(config, labels, errors)
        if found is None:
            return None
        cols |= set(found)
    return cols


def known_columns(config: Mapping[str, Any], errors: list[str] | None = None
                  ) -> dict[str, set[str] | None]:
    """Columns of ``results/<ds>/attributes.parquet`` per dataset (None = not certain), for
    the checks of the stages that read them. Datasets of an attribute-only kind
    (:data:`facecast.config.util.ATTRIBUTE_ONLY_KINDS`: no identities, no verification
    stage reads them) are left out; :func:`dataset_labels` still lists their labels."""
    errors = [] if errors is None else errors
    out: dict[str, set[str] | None] = {}
    for ds, labels in dataset_labels(config, errors).items():
        if attribute_only(config, ds):
            continue
        if labels is None:
            out[ds] = None
            continue
        if score_only(config, ds):  # BFW without its images: no scorer runs on it
            out[ds] = labels | set(BASE_COLUMNS)
            continue
        cols = scorer_columns(config, labels, errors)
        out[ds] = None if cols is None else cols | labels | set(BASE_COLUMNS)
    return out


def describe_known(ds: str, cols: Iterable[str]) -> str:
    """The one note listing dataset ``ds``'s columns (printed once after the errors)."""
    return f"known columns of dataset {ds!r}: {listing(sorted(cols))}"


def unknown_column(key: str, column: str, ds: str, cols: Iterable[str],
                   hint: str = "add the scorer that writes it to attributes.scorers, or name "
                               "an existing column") -> str:
    """The error for ``column`` (named at ``key``) missing from dataset ``ds``; the known
    columns are listed once, in a note after all errors."""
    note(describe_known(ds, cols))
    return (f"{key}: {column!r} is not produced by any configured scorer nor a label of "
            f"dataset {ds!r} (its columns are listed below); {hint}")


def check_references(config: Mapping[str, Any],
                     refs: Iterable[tuple[str, str, list[str]]]) -> list[str]:
    """Errors for ``(key path, column, datasets it must exist in)`` references whose column a
    dataset will not have (datasets whose columns are not certain are skipped)."""
    errors: list[str] = []
    known = known_columns(config, errors)
    for key, column, wanted in refs:
        for ds in wanted:
            cols = known.get(ds)
            if cols is not None and column not in cols:
                errors.append(unknown_column(key, column, ds, cols))
    return errors
