"""Plain, self-contained HTML pages of tables, for ``snakemake --report``.

Snakemake's report shows an ``.html`` output inline (a Markdown or TSV output is only a
download), so every table a person reads gets an HTML twin registered with ``report()``:

* :func:`frame_html` renders a DataFrame as a ``<table>``;
* :func:`markdown_html` (from :mod:`facecast.report.markdown`, the one Markdown renderer)
  renders the Markdown facecast writes (headings, paragraphs, lists, pipe tables, code,
  links, emphasis, images) so an ``.md`` report and its ``.html`` twin say the same thing;
  :func:`write_markdown_html` embeds the figures the Markdown names (``data:`` URIs), so a
  page opened as a file, moved or offline shows them;
* :func:`write_html_page` / :func:`write_markdown_html` / :func:`write_tsv_html` write a
  whole page (one small inline style sheet, no scripts, no external files), with a link
  under its title to the glossary at its foot (:mod:`facecast.report.glossary`).

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
from facecast.report.glossary import ANCHOR, glossary_html
from facecast.report.markdown import embed_images, markdown_html

__all__ = ["STYLE", "frame_html", "html_page", "markdown_html", "write_html_page",
           "write_markdown_html", "write_tsv_html"]

STYLE = """
body { font-family: sans-serif; font-size: 14px; margin: 1em; color: #222; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em 0; }
th, td { border: 1px solid #bbb; padding: 3px 8px; text-align: right; }
th { background: #eee; }
td:first-child, th:first-child { text-align: left; }
tr:nth-child(even) td { background: #f7f7f7; }
caption { caption-side: top; text-align: left; font-weight: bold; padding: 4px 0; }
p, li { max-width: 60em; line-height: 1.4; }
li { margin: 0.2em 0; }
pre { background: #f4f4f4; padding: 6px; overflow-x: auto; }
img { max-width: 100%; }
""".strip()
#: The line under each page's title that points to its glossary.
GLOSSARY_LINK = ('<p><small>Terms (Bias+, FDR, GARBE, KS, intervals, thresholds): '
                 f'<a href="#{ANCHOR}">glossary</a> at the foot of the page.</small></p>')


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


def html_page(title: str, body: str | Iterable[str]) -> str:
    """A complete HTML document with the shared style sheet: ``body``, a link to the
    glossary after its first ``<h1>`` (or at its top), and the glossary at its foot
    (:mod:`facecast.report.glossary`)."""
    text = "\n".join([body] if isinstance(body, str) else list(body))
    at = text.find("</h1>")
    text = (text[:at + 5] + "\n" + GLOSSARY_LINK + text[at + 5:] if at >= 0
            else GLOSSARY_LINK + "\n" + text)
    return ("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\">"
            f"<title>{html.escape(title)}</title><style>\n{STYLE}\n</style></head>\n<body>\n"
            + text + "\n<hr>\n" + glossary_html() + "\n</body></html>\n")


def write_html_page(path: str | os.PathLike, title: str, body: str | Iterable[str]) -> Path:
    """Write :func:`html_page` atomically; an ``<img>`` whose file is beside the page is
    embedded (:func:`facecast.report.markdown.embed_images`)."""
    return write_text(path, embed_images(html_page(title, body), Path(path).parent))


def write_markdown_html(md_path: str | os.PathLike, html_path: str | os.PathLike,
                        title: str | None = None) -> Path:
    """The HTML twin of a Markdown report (``title`` defaults to its first heading)."""
    text = Path(md_path).read_text()
    if title is None:
        m = re.search(r"^#\s+(.*)$", text, re.M)
        title = m.group(1) if m else Path(md_path).stem
    body = markdown_html(text, base=Path(md_path).parent, page=Path(html_path).parent)
    return write_html_page(html_path, title, body)


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
