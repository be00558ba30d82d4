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
:func:`numeric_columns` the first :data:`SNIFF_ROWS` data rows, when the config is checked
and the DAG is built. The default score columns (:func:`score_columns`) are the numeric
columns that are not the release's own, not id-, index- or fold-like by name
(:data:`NOT_SCORE`: ``ids1``, ``Unnamed: 0``, ``subject_id``, ``fold2`` ...) and not empty
in every row (:func:`empty_columns`: a column empty in the sniffed rows is read whole, with
pyarrow); :func:`skipped_columns` says why each other column is not a model. ``scores``
written as a list or a mapping wins; a mapping gives a column's direction
(``{col: {higher: different}}``: a distance, negated when the protocol is written,
:func:`flipped_columns`).
"""

from __future__ import annotations

import csv
import re
from collections.abc import Mapping
from functools import cache
from typing import Any

#: RFW's four test sets, in the RFW paper's order (Wang et al., ICCV 2019: its tables'
#: columns Caucasian, Indian, Asian, African)
RFW_SETS = ("Caucasian", "Indian", "Asian", "African")
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
#: BFW's intended FMRs (Robinson et al., CVPRW 2020, the TAR-at-FAR table): the default
#: ``demographics.fmr_targets`` of a dataset of kind ``bfw``
BFW_FMR_TARGETS = (0.3, 0.1, 0.01, 0.001, 0.0001)
#: names of numeric columns that are ids, indexes, folds or labels, never scores
NOT_SCORE = re.compile(
    r"^(unnamed.*|index|idx|row|row_?(id|index|no)|fold\w*|split\w*|label\w*|"
    r"ids?\d*|ids?_?[ab12]|nid\w*|identit\w*|subject\w*|person\w*|pair_?(id|index|no)"
    r"|.*[_\- ](id|ids|idx|index|fold|label))$", re.IGNORECASE)
#: the values of ``scores: {col: {higher: ...}}``
DIRECTIONS = ("same", "different")


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
def _sniffed_cells(path: str) -> tuple[tuple[str, ...], tuple[int, ...], tuple[int, ...]]:
    """``(header, numbers, texts)``: per header cell, how many of the first
    :data:`SNIFF_ROWS` data rows hold a number there and how many other non-empty text
    (no cells counted when the file cannot be read as CSV)."""
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
        return (), (), ()
    return header, tuple(numbers), tuple(texts)


def numeric_columns(path: str) -> tuple[str, ...]:
    """Header cells of ``path`` whose first :data:`SNIFF_ROWS` non-empty values are mostly
    numbers (more than half: a score column with a bad cell is still a score column, its
    bad cells become pairs with status ``bad_score``; a column empty there counts as
    numeric, a score column may start empty)."""
    header, numbers, texts = _sniffed_cells(path)
    return tuple(h for h, n, t in zip(header, numbers, texts, strict=True) if n >= t)


def index_column(header: tuple[str, ...]) -> str | None:
    """The header cell of pandas' index column when the CSV was written with it (its first
    cell is empty or ``Unnamed: 0``), else None."""
    return header[0] if header and header[0] in INDEX_HEADERS else None


def _score_listing(spec: Mapping[str, Any]) -> list[str] | None:
    """The columns ``scores`` names (a list, or the keys of a mapping); None when absent."""
    listed = spec.get("scores")
    if listed is None:
        return None
    return [str(k) for k in (listed.keys() if isinstance(listed, Mapping) else listed)]


@cache
def empty_columns(path: str, candidates: tuple[str, ...]) -> tuple[str, ...]:
    """The ``candidates`` of the datatable at ``path`` without a non-empty cell in any row
    (read with pyarrow, those columns only)."""
    if not candidates:
        return ()
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.csv as pacsv

    try:
        table = pacsv.read_csv(path, convert_options=pacsv.ConvertOptions(
            include_columns=list(candidates), strings_can_be_null=True,
            column_types={c: pa.string() for c in candidates}))
    except (pa.ArrowInvalid, OSError):
        return ()
    return tuple(c for c in candidates if pc.max(pc.utf8_length(pc.utf8_trim_whitespace(
        pc.fill_null(table.column(c), "")))).as_py() in (None, 0))


def _sniffed_empty(path: str) -> tuple[str, ...]:
    """Header cells of ``path`` without a non-empty value in the first :data:`SNIFF_ROWS`
    data rows."""
    header, numbers, texts = _sniffed_cells(path)
    return tuple(h for h, n, t in zip(header, numbers, texts, strict=True) if n + t == 0)


def skipped_columns(spec: Mapping[str, Any]) -> dict[str, str]:
    """Column -> why it is not a score model, for the columns of a BFW datatable that are
    not BFW's own, when ``scores`` is left out ({} when it is given)."""
    if _score_listing(spec) is not None:
        return {}
    path = str(spec.get("table", ""))
    header = bfw_header(path)
    numeric = set(numeric_columns(path))
    out: dict[str, str] = {}
    rest = []
    for h in header:
        if h in BFW_COLUMNS:
            continue
        if h in INDEX_HEADERS or h == index_column(header):
            out[h] = "pandas' index column"
        elif h not in numeric:
            out[h] = "not numeric"
        elif NOT_SCORE.match(h.strip()):
            out[h] = "an id, index, fold or label column by its name"
        else:
            rest.append(h)
    sniffed = set(_sniffed_empty(path))
    for h in empty_columns(path, tuple(h for h in rest if h in sniffed)):
        out[h] = "empty in every row"
    return out


def score_columns(spec: Mapping[str, Any]) -> list[str]:
    """A BFW dataset's score columns: ``scores`` as written (a list, or a mapping's keys),
    else every column of the CSV that is not one of :data:`BFW_COLUMNS` and that
    :func:`skipped_columns` does not skip."""
    listed = _score_listing(spec)
    if listed is not None:
        return listed
    header = bfw_header(str(spec.get("table", "")))
    skip = skipped_columns(spec)
    return [h for h in header if h not in BFW_COLUMNS and h not in skip]


def flipped_columns(spec: Mapping[str, Any]) -> list[str]:
    """The score columns ``scores: {col: {higher: different}}`` marks as distances (lower
    = more alike): negated when the protocol is written, so that every stage reads higher
    = more alike."""
    listed = spec.get("scores")
    if not isinstance(listed, Mapping):
        return []
    return [str(k) for k, v in listed.items()
            if isinstance(v, Mapping) and v.get("higher") == "different"]


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
