"""Small self-contained HTML pages of tables (what the Snakemake report shows), on the
shared page shell and Markdown renderer of :mod:`facecast.report.html_tables`."""

from __future__ import annotations

import html
import os
from collections.abc import Sequence

import pandas as pd

from facecast.report.html_tables import markdown_html, write_html_page

__all__ = ["write_html"]


def write_html(path: str | os.PathLike, title: str,
               sections: Sequence[tuple[str, pd.DataFrame | str]]) -> None:
    """Write a page with a heading per section: a table (DataFrame) or text, rendered as
    Markdown (a ``- `` line is a list item; everything is escaped)."""
    parts = [f"<h1>{html.escape(title)}</h1>"]
    for heading, body in sections:
        parts.append(f"<h2>{html.escape(heading)}</h2>")
        if isinstance(body, pd.DataFrame):
            parts.append(body.to_html(index=False, float_format=lambda v: f"{v:.4g}",
                                      na_rep="n/a", border=0))
        else:
            parts.append(markdown_html(str(body)))
    write_html_page(path, title, parts)
