"""The one place facecast writes figures: headless, atomic and byte-stable.

:func:`pyplot` selects matplotlib's Agg backend (no display on clusters) before handing
out ``matplotlib.pyplot``. :func:`save_figure` writes a figure like
:func:`facecast.io.parquet_io.write_parquet` writes tables: to a hidden temporary name
beside the target, renamed into place when complete, so an interrupted job never leaves
a half-written PNG under its real name. Creation dates and software versions are left
out of the file metadata, and SVG ids (clip paths, glyphs) are hashed with a fixed salt
(matplotlib's ``svg.hashsalt``) instead of a random one, so the same data gives the same
bytes in every format.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from facecast.io.atomic import atomic_path

#: metadata keys that would change between runs (per output format)
_STABLE_METADATA = {".png": {"Software": None}, ".svg": {"Date": None, "Creator": None},
                    ".pdf": {"CreationDate": None, "Producer": None, "Creator": None},
                    ".eps": {"Creator": "facecast"}, ".ps": {"Creator": "facecast"}}
#: rcParams that make output bytes independent of the run (SVG ids are otherwise random)
STABLE_RC = {"svg.hashsalt": "facecast", "svg.id": None}


def pyplot() -> Any:
    """``matplotlib.pyplot`` on the Agg backend."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def fixed_grid_layout(fig: Any, nrow: int, ncol: int, *, left: float = 0.4,
                      right: float = 0.1, bottom: float = 0.3, top: float = 0.7,
                      wgap: float = 0.4, hgap: float = 0.6, title: str | None = None,
                      title_size: float = 9) -> None:
    """Space a ``nrow`` x ``ncol`` subplot grid by margins and gaps given in inches, and
    put ``title`` (if any) 0.1 inch below the top edge.

    For grids of many small panels, where ``tight_layout`` would cost a whole extra draw
    of every tick label (about half of the figure's time). The defaults leave room for
    two-line panel titles of 7 pt and tick labels of 6 pt.
    """
    w, h = fig.get_size_inches()
    aw = max((w - left - right - (ncol - 1) * wgap) / ncol, 0.1)
    ah = max((h - top - bottom - (nrow - 1) * hgap) / nrow, 0.1)
    fig.subplots_adjust(left=left / w, right=1 - right / w, bottom=bottom / h,
                        top=1 - top / h, wspace=wgap / aw, hspace=hgap / ah)
    if title is not None:
        fig.suptitle(title, fontsize=title_size, y=1 - 0.1 / h, va="top")


@contextlib.contextmanager
def _fixed_ps_date(suffix: str) -> Iterator[None]:
    """PostScript writes the wall-clock time unless SOURCE_DATE_EPOCH is set: pin it."""
    if suffix not in (".eps", ".ps") or os.environ.get("SOURCE_DATE_EPOCH"):
        yield
        return
    os.environ["SOURCE_DATE_EPOCH"] = "0"
    try:
        yield
    finally:
        os.environ.pop("SOURCE_DATE_EPOCH", None)


def save_figure(fig: Any, paths: str | os.PathLike | Iterable[str | os.PathLike], *,
                dpi: int = 110, close: bool = True) -> list[Path]:
    """Write ``fig`` to each path (format from the suffix) atomically; close it after.

    Returns the written paths.
    """
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    written = []
    plt = pyplot()
    for path in map(Path, paths):
        suffix = path.suffix.lower()
        with (atomic_path(path) as tmp, plt.rc_context(STABLE_RC), _fixed_ps_date(suffix),
              open(tmp, "wb") as fh):  # a file object: PostScript titles are file names
            fig.savefig(fh, dpi=dpi, format=suffix.lstrip(".") or None,
                        metadata=_STABLE_METADATA.get(suffix))
        written.append(path)
    if close:
        plt.close(fig)
    return written
