"""Atomic file writes: every facecast artifact appears complete under its name, or not at all.

:func:`atomic_path` hands out a hidden temporary path beside the target
(``.<name>.tmp-<pid>-<id><suffix>``) and renames it onto the target when the block ends
without an error; on an error (or a killed job) only the hidden file remains, which no
stage reads (pyarrow's dataset readers skip hidden files too). Parquet
(:mod:`facecast.parquet_io`), figures (:mod:`facecast.figures`) and text outputs
(:func:`write_text`) all go through it.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Iterator
from pathlib import Path


def temp_path(path: str | os.PathLike) -> Path:
    """A hidden, unique temporary name beside ``path`` that keeps its suffix."""
    path = Path(path)
    return path.with_name(f".{path.stem}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}{path.suffix}")


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path to write; rename it onto ``path`` if the block succeeds."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = temp_path(path)
    try:
        yield tmp
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


def write_text(path: str | os.PathLike, text: str) -> Path:
    """Write ``text`` (UTF-8, ``\\n`` line ends as given) to ``path`` atomically."""
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8", newline="")
    return Path(path)
