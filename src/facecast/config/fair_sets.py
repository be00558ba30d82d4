"""The fairness benchmarks researchers hold - RFW and BFW - as pure config: the protocols a
dataset of kind ``rfw`` or ``bfw`` implies, BFW's score columns (models without images) and
whether a dataset's images are read at all.

* ``kind: rfw`` (Racial Faces in-the-Wild, Wang et al., ICCV 2019): one protocol per set,
  named as the set (:data:`RFW_SETS`, or ``datasets.<ds>.sets``), each the set's
  ``txts/<Set>/<Set>_pairs.txt`` (or the set's insightface ``.bin`` named under ``bins``)
  with its 10 folds in file order.
* ``kind: bfw`` (Balanced Faces in the Wild, Robinson et al., CVPRW 2020): one protocol,
  :data:`BFW_PROTOCOL`, the datatable CSV's pairs with its 5 folds. The CSV's score columns
  are models without images (:func:`score_models`): named as the columns, scored from the
  CSV, never embedded. When the config has no embed model, a BFW dataset reads no image at
  all (:func:`score_only`): no faces, embed or attribute-scoring job is scheduled for it.

Nothing here reads an image. :func:`bfw_header` reads the CSV's header line and
:func:`numeric_columns` the first :data:`SNIFF_ROWS` data rows (the default score columns
are the numeric columns that are not the release's own), when the config is checked and
the DAG is built.
"""

from __future__ import annotations

import csv
from collections.abc import Mapping
from functools import cache
from typing import Any

#: RFW's four test sets, in the papers' order
RFW_SETS = ("African", "Asian", "Caucasian", "Indian")
#: the protocol of an RFW dataset holding every set's pairs (the sets are its groups)
RFW_ALL = "rfw"
#: the one protocol of a BFW dataset
BFW_PROTOCOL = "bfw"
#: the datatable's own columns (every other numeric column is a model's score)
BFW_COLUMNS = ("fold", "p1", "p2", "label", "id1", "id2", "att1", "att2", "a1", "a2",
               "g1", "g2", "e1", "e2")
#: header cells of pandas' index column (written by ``DataFrame.to_csv`` with its index)
INDEX_HEADERS = ("", "Unnamed: 0", "index")
#: data rows read to tell numeric score columns from text ones
SNIFF_ROWS = 200
#: the dataset kinds of this module
KINDS = ("rfw", "bfw")


def _datasets(config: Mapping[str, Any]) -> Mapping[str, Any]:
    value = config.get("datasets")
    return value if isinstance(value, Mapping) else {}


def kind_of(config: Mapping[str, Any], ds: str) -> str:
    """``datasets.<ds>.kind`` ('' when unknown)."""
    spec = _datasets(config).get(ds)
    return str(spec.get("kind", "")) if isinstance(spec, Mapping) else ""


def rfw_sets(spec: Mapping[str, Any]) -> list[str]:
    """The RFW sets of a dataset block: the sets its ``bins`` name (the ``.bin`` form), else
    ``sets`` (all four when left out), in :data:`RFW_SETS` order where they are RFW's."""
    bins = spec.get("bins")
    listed = list(bins) if isinstance(bins, Mapping) and bins else list(spec.get("sets") or [])
    names = [str(s) for s in listed] or list(RFW_SETS)
    order = {s: i for i, s in enumerate(RFW_SETS)}
    return sorted(dict.fromkeys(names), key=lambda s: (order.get(s, len(order)), s))


def implied_protocols(spec: Any) -> list[str]:
    """Protocol names a dataset block implies ([] unless kind ``rfw`` / ``bfw``): an RFW
    dataset's sets then :data:`RFW_ALL`, a BFW dataset's :data:`BFW_PROTOCOL`."""
    if not isinstance(spec, Mapping):
        return []
    if spec.get("kind") == "rfw":
        return [*rfw_sets(spec), RFW_ALL]
    if spec.get("kind") == "bfw":
        return [BFW_PROTOCOL]
    return []


def dataset_protocols(config: Mapping[str, Any], ds: str) -> list[str]:
    """The protocols dataset ``ds`` implies (:func:`implied_protocols`)."""
    return implied_protocols(_datasets(config).get(ds))


def all_protocols(config: Mapping[str, Any]) -> list[str]:
    """Every RFW / BFW protocol name of the config, in dataset order, without repeats."""
    out: list[str] = []
    for ds in _datasets(config):
        out += [n for n in dataset_protocols(config, str(ds)) if n not in out]
    return out


def set_datasets(config: Mapping[str, Any], kind: str | None = None) -> list[str]:
    """The datasets of kind ``rfw`` / ``bfw`` (or of ``kind`` only)."""
    kinds = KINDS if kind is None else (kind,)
    return [str(ds) for ds in _datasets(config) if kind_of(config, str(ds)) in kinds]


# ------------------------------------------------------------------ BFW's score columns


@cache
def bfw_header(path: str) -> tuple[str, ...]:
    """The header cells of the datatable CSV at ``path`` (() when it cannot be read)."""
    try:
        with open(path, newline="", encoding="utf-8-sig") as fh:
            return tuple(next(csv.reader(fh), []))
    except (OSError, UnicodeDecodeError, csv.Error):
        return ()


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


@cache
def numeric_columns(path: str) -> tuple[str, ...]:
    """Header cells of ``path`` whose first :data:`SNIFF_ROWS` non-empty values are mostly
    numbers (more than half: a score column with a bad cell is still a score column, its
    bad cells become pairs with status ``bad_score``; a column empty there counts as
    numeric, a score column may start empty)."""
    header = bfw_header(path)
    numbers, texts = [0] * len(header), [0] * len(header)
    try:
        with open(path, newline="", encoding="utf-8-sig") as fh:
            reader = csv.reader(fh)
            next(reader, None)
            for k, row in enumerate(reader):
                if k >= SNIFF_ROWS:
                    break
                for i, cell in enumerate(row[:len(header)]):
                    if cell.strip():
                        if _is_number(cell.strip()):
                            numbers[i] += 1
                        else:
                            texts[i] += 1
    except (OSError, UnicodeDecodeError, csv.Error):
        return ()
    return tuple(h for h, n, t in zip(header, numbers, texts, strict=True) if n >= t)


def index_column(header: tuple[str, ...]) -> str | None:
    """The header cell of pandas' index column when the CSV was written with it (its first
    cell is empty or ``Unnamed: 0``), else None."""
    return header[0] if header and header[0] in INDEX_HEADERS else None


def score_columns(spec: Mapping[str, Any]) -> list[str]:
    """A BFW dataset's score columns: ``scores`` as written, else every numeric column of
    the CSV that is not one of :data:`BFW_COLUMNS` or the index column."""
    if spec.get("scores") is not None:
        return [str(s) for s in spec.get("scores") or []]
    path = str(spec.get("table", ""))
    header = bfw_header(path)
    skip = set(BFW_COLUMNS) | {index_column(header) or ""} | set(INDEX_HEADERS)
    numeric = set(numeric_columns(path))
    return [h for h in header if h not in skip and h in numeric]


def score_models(config: Mapping[str, Any], ds: str | None = None) -> list[str]:
    """The score models of BFW dataset ``ds`` (of every BFW dataset when ``ds`` is None),
    in column order without repeats."""
    names = [ds] if ds is not None else set_datasets(config, "bfw")
    out: list[str] = []
    for name in names:
        spec = _datasets(config).get(name)
        if isinstance(spec, Mapping) and spec.get("kind") == "bfw":
            out += [m for m in score_columns(spec) if m not in out]
    return out


def has_embed_models(config: Mapping[str, Any]) -> bool:
    """Whether ``embed.models`` names a model (the schema default does)."""
    embed = config.get("embed")
    models = embed.get("models") if isinstance(embed, Mapping) else None
    return bool(models) if models is not None else True


def score_only(config: Mapping[str, Any], ds: str) -> bool:
    """Whether ``ds`` is a BFW dataset whose images are not read: the config has no embed
    model (``embed: {models: {}}``), so its models are the CSV's score columns only."""
    return kind_of(config, ds) == "bfw" and not has_embed_models(config)


def score_model_applies(config: Mapping[str, Any], ds: str, model: str, protocol: str
                        ) -> bool:
    """Whether scored pairs of score model ``model`` exist on (``ds``, ``protocol``): only
    on its BFW dataset's protocol :data:`BFW_PROTOCOL`."""
    return protocol == BFW_PROTOCOL and model in score_models(config, ds)
