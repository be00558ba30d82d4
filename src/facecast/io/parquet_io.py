"""The one place facecast writes (and reads) Parquet.

Every artifact carries provenance in its schema metadata under the key ``facecast``
(a JSON object: facecast version, config hash, seed, stage, and model name/weights
checksum where a model ran). Writes are atomic: the table goes to a temporary file in a
hidden ``.tmp/`` folder beside the target and is renamed into place, so an interrupted job
never leaves a partial Parquet that a later stage (or a ``faces/*.parquet`` glob) could
read as complete; a finished or failed write removes ``.tmp/`` again once it is empty
(see :mod:`facecast.io.atomic`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from facecast import __version__
from facecast.io.atomic import atomic_path, discard_temp, prepare_temp

PROVENANCE_KEY = b"facecast"


def _jsonable(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, Path):
        return str(value)
    if hasattr(value, "item"):  # numpy scalar
        return value.item()
    return value


def build_provenance(provenance: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Return the provenance dict stored with an artifact: facecast version + ``provenance``."""
    out: dict[str, Any] = {"facecast_version": __version__}
    if provenance:
        out.update(_jsonable(dict(provenance)))
    return out


def to_arrow(data: pd.DataFrame | pa.Table, schema: pa.Schema | None = None) -> pa.Table:
    """Convert a DataFrame (index dropped) or Table to an Arrow table, optionally cast."""
    if isinstance(data, pd.DataFrame):
        table = pa.Table.from_pandas(data, schema=schema, preserve_index=False)
    else:
        table = data if schema is None else data.cast(schema)
    return table


def _with_metadata(table: pa.Table, provenance: Mapping[str, Any] | None,
                   extra: Mapping[str, str] | None) -> pa.Table:
    meta = dict(table.schema.metadata or {})
    meta.pop(b"pandas", None)  # keep files engine-neutral and byte-stable
    meta[PROVENANCE_KEY] = json.dumps(build_provenance(provenance), sort_keys=True).encode()
    for key, value in (extra or {}).items():
        meta[key.encode()] = str(value).encode()
    return table.replace_schema_metadata(meta)


def write_parquet(
    data: pd.DataFrame | pa.Table,
    path: str | os.PathLike,
    *,
    provenance: Mapping[str, Any] | None = None,
    schema: pa.Schema | None = None,
    row_group_size: int | None = None,
    metadata: Mapping[str, str] | None = None,
    use_dictionary: bool | list[str] = True,
    column_encoding: Mapping[str, str] | None = None,
    write_statistics: bool | list[str] = True,
) -> Path:
    """Atomically write ``data`` to ``path`` with facecast provenance metadata.

    ``metadata`` adds further string key/value pairs to the schema metadata (for small
    facts later stages read from the footer without scanning rows, e.g. shard lists).
    ``use_dictionary``, ``column_encoding`` and ``write_statistics`` are passed to
    ``pq.write_table`` (how the pages are encoded, which columns get min/max statistics;
    the values read back are the same).
    """
    path = Path(path)
    table = _with_metadata(to_arrow(data, schema), provenance, metadata)
    with atomic_path(path) as tmp:
        pq.write_table(table, tmp, row_group_size=row_group_size, compression="zstd",
                       use_dictionary=use_dictionary,
                       column_encoding=dict(column_encoding) if column_encoding else None,
                       write_statistics=write_statistics)
    return path


def _leaf_paths(schema: pa.Schema) -> list[str]:
    """Parquet leaf column paths of ``schema`` (``bbox.list.element`` for a list column):
    the keys pyarrow's per-column settings are matched against."""
    buf = pa.BufferOutputStream()
    pq.write_table(schema.empty_table(), buf)
    pf = pq.ParquetFile(pa.BufferReader(buf.getvalue()))
    return [pf.schema.column(i).path for i in range(len(pf.schema))]


class ParquetStreamWriter:
    """Write a Parquet file batch by batch, atomically (renamed into place on close).

    Use as a context manager; on an exception the temporary file is removed and the
    target is left untouched.
    """

    def __init__(self, path: str | os.PathLike, schema: pa.Schema, *,
                 provenance: Mapping[str, Any] | None = None,
                 metadata: Mapping[str, str] | None = None,
                 uncompressed: Sequence[str] = (),
                 column_encoding: Mapping[str, str] | None = None) -> None:
        """``uncompressed`` names columns stored without Parquet compression (already
        compressed bytes such as PNG, where zstd costs time and saves nothing); the rest
        are zstd. ``column_encoding`` maps top-level columns to a Parquet encoding (e.g.
        ``DELTA_BINARY_PACKED`` for a counter: smaller, faster to read back); the others
        keep dictionary pages."""
        self.path = Path(path)
        self.schema = _with_metadata(schema.empty_table(), provenance, metadata).schema
        compression: str | dict[str, str] = "zstd"
        if uncompressed:
            compression = {leaf: ("none" if leaf.split(".")[0] in set(uncompressed) else "zstd")
                           for leaf in _leaf_paths(self.schema)}
        encoding: dict[str, str] = {}
        dictionary: bool | list[str] = True
        if column_encoding:
            leaves = _leaf_paths(self.schema)
            encoding = {leaf: column_encoding[leaf.split(".")[0]] for leaf in leaves
                        if leaf.split(".")[0] in column_encoding}
            dictionary = [leaf for leaf in leaves if leaf not in encoding]
        self._tmp = prepare_temp(self.path)
        try:
            self._writer = pq.ParquetWriter(self._tmp, self.schema, compression=compression,
                                            use_dictionary=dictionary,
                                            column_encoding=encoding or None)
        except BaseException:
            discard_temp(self._tmp)  # no temporary (nor an empty .tmp/) is left behind
            raise

    def write(self, data: pd.DataFrame | pa.Table | pa.RecordBatch) -> None:
        if isinstance(data, pa.RecordBatch):
            data = pa.Table.from_batches([data])
        table = to_arrow(data).select(self.schema.names).cast(self.schema)
        self._writer.write_table(table)

    def close(self) -> Path:
        """Finish the file and rename it onto the target (the temporary goes either way)."""
        try:
            self._writer.close()
            os.replace(self._tmp, self.path)
        finally:
            discard_temp(self._tmp)
        return self.path

    def abort(self) -> None:
        """Drop the temporary; the target is left untouched."""
        try:
            self._writer.close()
        finally:
            discard_temp(self._tmp)

    def __enter__(self) -> ParquetStreamWriter:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()


def read_provenance(path: str | os.PathLike) -> dict[str, Any]:
    """Return the facecast provenance dict of a Parquet file (empty if it has none)."""
    meta = pq.read_schema(path).metadata or {}
    raw = meta.get(PROVENANCE_KEY)
    return json.loads(raw) if raw else {}


def read_metadata(path: str | os.PathLike) -> dict[str, str]:
    """Return all schema key/value metadata of a Parquet file as strings (footer only)."""
    meta = pq.read_schema(path).metadata or {}
    return {k.decode(): v.decode() for k, v in meta.items()}


def read_parquet(path: str | os.PathLike, columns: list[str] | None = None,
                 filters: list | None = None) -> pd.DataFrame:
    """Read a Parquet file (or a directory of shard files) into pandas."""
    return pq.read_table(path, columns=columns, filters=filters).to_pandas()


def iter_batches(paths: Iterable[str | os.PathLike], columns: list[str] | None = None,
                 batch_size: int = 65_536) -> Iterator[pa.RecordBatch]:
    """Stream record batches over several Parquet files without loading them whole."""
    for p in paths:
        pf = pq.ParquetFile(p, pre_buffer=False)
        yield from pf.iter_batches(batch_size=batch_size, columns=columns)
