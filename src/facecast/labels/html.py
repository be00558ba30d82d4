"""Small self-contained HTML pages of tables (what the Snakemake report shows)."""

from __future__ import annotations

import html
import os
from collections.abc import Sequence

import pandas as pd

from facecast.io.atomic import write_text

__all__ = ["write_html"]

_STYLE = ("<style>body{font-family:sans-serif;font-size:13px}table{border-collapse:collapse}"
          "td,th{border:1px solid #ccc;padding:2px 6px;text-align:right}"
          "th{background:#eee}</style>")


def write_html(path: str | os.PathLike, title: str,
               sections: Sequence[tuple[str, pd.DataFrame | str]]) -> None:
    """Write a page with a heading per section: a table (DataFrame) or a paragraph."""
    parts = [f"<html><head><meta charset='utf-8'><title>{html.escape(title)}</title>{_STYLE}"
             f"</head><body><h1>{html.escape(title)}</h1>"]
    for heading, body in sections:
        parts.append(f"<h2>{html.escape(heading)}</h2>")
        if isinstance(body, pd.DataFrame):
            parts.append(body.to_html(index=False, float_format=lambda v: f"{v:.4g}",
                                      na_rep="n/a", border=0))
        else:
            parts.append(f"<p>{html.escape(str(body))}</p>")
    parts.append("</body></html>")
    write_text(path, "\n".join(parts))
