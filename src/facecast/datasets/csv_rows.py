"""A CSV file read row by row, where one malformed row costs that row only.

:func:`read_csv_rows` reads a header and its data rows as strings with Python's ``csv``
module and remembers the line each row starts on (quoted newlines counted). A row with
more fields than the header, the extra ones not all empty, or with fewer fields, is a bad
row: it is returned with a message naming the file, the line and what is wrong, and every
other row is read as usual. Empty trailing fields are dropped from the header and from
every row, so a trailing comma on every line (or on some) never shifts the columns (what
``pandas.read_csv(index_col=False)`` does for a trailing comma on every line, without its
silent truncation of a row with a real extra field). Blank lines are skipped.
"""

from __future__ import annotations

import csv
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd


@dataclass(frozen=True)
class CsvRows:
    """The rows of one CSV file: ``frame`` (one str column per header name, one row per
    data row in file order, bad rows included with what fields they have), ``line`` (the
    line each row starts on; the header is line 1) and ``bad`` (the bad row's message, ''
    for a good row)."""

    header: tuple[str, ...]
    frame: pd.DataFrame
    line: np.ndarray
    bad: np.ndarray


def _trim(fields: list[str]) -> list[str]:
    """``fields`` without empty trailing fields (a trailing comma)."""
    end = len(fields)
    while end and not fields[end - 1].strip():
        end -= 1
    return fields[:end]


def read_csv_rows(path: str | os.PathLike, *, strip: bool = True) -> CsvRows:
    """Read ``path`` (UTF-8, a byte-order mark allowed; see the module docstring); values
    are stripped of surrounding blanks unless ``strip`` is False. Raises ``OSError`` /
    ``UnicodeDecodeError`` / ``csv.Error`` for a file that cannot be read at all and
    ``ValueError`` for a file without a header."""
    path = Path(path)
    rows: list[list[str]] = []
    lines: list[int] = []
    bad: list[str] = []
    with open(path, newline="", encoding="utf-8-sig") as fh:
        reader = csv.reader(fh)
        header: list[str] | None = None
        start = 1
        for fields in reader:
            line, start = start, reader.line_num + 1
            if not any(f.strip() for f in fields):
                continue
            if strip:
                fields = [f.strip() for f in fields]
            if header is None:
                header = _trim(fields)
                continue
            kept = _trim(fields)
            width = len(header)
            msg = ""
            if len(kept) > width:
                extra = ", ".join(repr(f) for f in kept[width:])
                msg = (f"{path.name}:{line}: {len(kept)} fields where the header has {width} "
                       f"(extra {extra}); the row is not read")
            elif len(kept) < width and len(fields) < width:
                msg = (f"{path.name}:{line}: {len(fields)} fields where the header has "
                       f"{width} (no {', '.join(header[len(fields):])}); the row is not read")
            rows.append((kept + [""] * width)[:width])
            lines.append(line)
            bad.append(msg)
    if header is None:
        raise ValueError(f"{path} is empty: no header line")
    frame = pd.DataFrame(rows, columns=list(header), dtype=object) if rows else \
        pd.DataFrame({c: pd.Series([], dtype=object) for c in header})
    return CsvRows(tuple(header), frame, np.asarray(lines, dtype=np.int64),
                   np.asarray(bad, dtype=object))
