"""Plain, self-contained HTML pages of tables, for ``snakemake --report``.

Snakemake's report shows an ``.html`` output inline (a Markdown or TSV output is only a
download), so every table a person reads gets an HTML twin registered with ``report()``:

* :func:`frame_html` renders a DataFrame as a ``<table>``;
* :func:`markdown_html` renders the Markdown facecast writes (headings, paragraphs, pipe
  tables; images become their alt text) so an ``.md`` report and its ``.html`` twin say
  the same thing;
* :func:`write_html_page` / :func:`write_markdown_html` / :func:`write_tsv_html` write a
  whole page (one small inline style sheet, no scripts, no external files).

Everything is escaped; the output is deterministic (same input, same bytes).
"""

from __future__ import annotations

import html
import math
import os
import re
from collections.abc import Iterable
from pathlib import Path

import numpy as np
import pandas as pd

from facecast.io.atomic import write_text

STYLE = """
body { font-family: sans-serif; font-size: 14px; margin: 1em; color: #222; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em 0; }
th, td { border: 1px solid #bbb; padding: 3px 8px; text-align: right; }
th { background: #eee; }
td:first-child, th:first-child { text-align: left; }
tr:nth-child(even) td { background: #f7f7f7; }
caption { caption-side: top; text-align: left; font-weight: bold; padding: 4px 0; }
""".strip()

_IMAGE = re.compile(r"!\[([^\]]*)\]\([^)]*\)")
_SEPARATOR = re.compile(r"^\|?\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)*\|?\s*$")


def _cell(value: object, digits: int) -> str:
    if value is None:
        return ""
    if isinstance(value, (bool, np.bool_)):
        return "yes" if value else "no"
    if isinstance(value, (float, np.floating)):
        v = float(value)
        if math.isnan(v):
            return "–"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        return f"{v:.{digits}g}"
    return str(value)


def frame_html(df: pd.DataFrame, *, caption: str | None = None, digits: int = 4,
               index: bool = False) -> str:
    """``df`` as an HTML ``<table>`` (floats to ``digits`` significant digits, NaN as –)."""
    frame = df.reset_index() if index else df
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in frame.columns)
    rows = []
    for row in frame.itertuples(index=False):
        rows.append("<tr>" + "".join(f"<td>{html.escape(_cell(v, digits))}</td>" for v in row)
                    + "</tr>")
    cap = f"<caption>{html.escape(caption)}</caption>" if caption else ""
    return (f"<table>{cap}<thead><tr>{head}</tr></thead><tbody>" + "".join(rows)
            + "</tbody></table>")


def _split_row(line: str) -> list[str]:
    body = line.strip()
    if body.startswith("|"):
        body = body[1:]
    if body.endswith("|") and not body.endswith("\\|"):
        body = body[:-1]
    cells = re.split(r"(?<!\\)\|", body)
    return [c.strip().replace("\\|", "|") for c in cells]


def markdown_html(text: str) -> str:
    """The subset of Markdown facecast writes, as HTML body elements.

    Headings (``#``..``####``), pipe tables (header, separator, rows), paragraphs; an image
    ``![alt](file)`` becomes its alt text in brackets (the report shows figures itself).
    """
    out: list[str] = []
    lines = text.splitlines()
    i = 0
    para: list[str] = []

    def flush() -> None:
        if para:
            out.append("<p>" + html.escape(" ".join(para)) + "</p>")
            para.clear()

    while i < len(lines):
        line = _IMAGE.sub(lambda m: f"[figure: {m.group(1)}]", lines[i]).rstrip()
        stripped = line.strip()
        if not stripped:
            flush()
            i += 1
            continue
        m = re.match(r"^(#{1,4})\s+(.*)$", stripped)
        if m:
            flush()
            level = len(m.group(1))
            out.append(f"<h{level}>{html.escape(m.group(2))}</h{level}>")
            i += 1
            continue
        if (stripped.startswith("|") and i + 1 < len(lines)
                and _SEPARATOR.match(lines[i + 1].strip())):
            flush()
            header = _split_row(stripped)
            body = []
            i += 2
            while i < len(lines) and lines[i].strip().startswith("|"):
                body.append(_split_row(lines[i]))
                i += 1
            head = "".join(f"<th>{html.escape(c)}</th>" for c in header)
            rows = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>"
                           for r in body)
            out.append(f"<table><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>")
            continue
        para.append(stripped)
        i += 1
    flush()
    return "\n".join(out)


def html_page(title: str, body: str | Iterable[str]) -> str:
    """A complete HTML document with the shared style sheet."""
    parts = [body] if isinstance(body, str) else list(body)
    return ("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\">"
            f"<title>{html.escape(title)}</title><style>\n{STYLE}\n</style></head>\n<body>\n"
            + "\n".join(parts) + "\n</body></html>\n")


def write_html_page(path: str | os.PathLike, title: str, body: str | Iterable[str]) -> Path:
    """Write :func:`html_page` atomically."""
    return write_text(path, html_page(title, body))


def write_markdown_html(md_path: str | os.PathLike, html_path: str | os.PathLike,
                        title: str | None = None) -> Path:
    """The HTML twin of a Markdown report (``title`` defaults to its first heading)."""
    text = Path(md_path).read_text()
    if title is None:
        m = re.search(r"^#\s+(.*)$", text, re.M)
        title = m.group(1) if m else Path(md_path).stem
    return write_html_page(html_path, title, markdown_html(text))


def write_tsv_html(tsv_path: str | os.PathLike, html_path: str | os.PathLike, title: str,
                   *, note: str = "", digits: int = 4) -> Path:
    """The HTML twin of a TSV table (e.g. a benchmark's ``pair_stats.tsv``)."""
    df = pd.read_csv(tsv_path, sep="\t", dtype={"fold": str}, keep_default_na=False,
                     na_values=[""])
    body = [f"<h1>{html.escape(title)}</h1>"]
    if note:
        body.append(f"<p>{html.escape(note)}</p>")
    body.append(frame_html(df, digits=digits))
    return write_html_page(html_path, title, body)
