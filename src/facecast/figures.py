"""The one place facecast writes figures: headless, atomic and byte-stable.

:func:`pyplot` selects matplotlib's Agg backend (no display on clusters) before handing
out ``matplotlib.pyplot``. :func:`save_figure` writes a figure like
:func:`facecast.parquet_io.write_parquet` writes tables: to a hidden temporary name
beside the target, renamed into place when complete, so an interrupted job never leaves
a half-written PNG under its real name. Creation dates and software versions are left
out of the file metadata, so the same data gives the same bytes.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from facecast.atomic import atomic_path

#: metadata keys that would change between runs (per output format)
_STABLE_METADATA = {".png": {"Software": None}, ".svg": {"Date": None, "Creator": None},
                    ".pdf": {"CreationDate": None, "Producer": None, "Creator": None}}


def pyplot() -> Any:
    """``matplotlib.pyplot`` on the Agg backend."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save_figure(fig: Any, paths: str | os.PathLike | Iterable[str | os.PathLike], *,
                dpi: int = 110, close: bool = True) -> list[Path]:
    """Write ``fig`` to each path (format from the suffix) atomically; close it after.

    Returns the written paths.
    """
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    written = []
    for path in map(Path, paths):
        with atomic_path(path) as tmp:
            fig.savefig(tmp, dpi=dpi, metadata=_STABLE_METADATA.get(path.suffix.lower()))
        written.append(path)
    if close:
        pyplot().close(fig)
    return written
