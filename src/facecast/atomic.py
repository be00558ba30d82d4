"""Atomic file writes: every facecast artifact appears complete under its name, or not at all.

:func:`atomic_path` hands out a temporary path in a hidden ``.tmp/`` folder beside the
target (``<dir>/.tmp/.<name>.tmp-<pid>-<id><suffix>``) and renames it onto the target when
the block ends without an error. On an error the temporary file is removed; a killed job
leaves it in ``.tmp/``, where no glob over the target's folder (``faces/*.parquet``) and
no stage sees it, and the next write of the same target removes it. Parquet
(:mod:`facecast.parquet_io`), figures (:mod:`facecast.figures`) and text outputs
(:func:`write_text`) all go through it.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Iterator
from pathlib import Path

#: name of the hidden folder that holds temporaries, beside each target
TEMP_DIR = ".tmp"


def _temp_prefix(path: Path) -> str:
    return f".{path.stem}.tmp-"


def temp_path(path: str | os.PathLike) -> Path:
    """A unique temporary name for ``path`` in the ``.tmp/`` folder beside it (suffix kept)."""
    path = Path(path)
    return (path.parent / TEMP_DIR
            / f"{_temp_prefix(path)}{os.getpid()}-{uuid.uuid4().hex[:8]}{path.suffix}")


def remove_stale_temps(path: str | os.PathLike) -> list[Path]:
    """Remove temporaries of ``path`` left by killed writers; return what was removed.

    A target has one writer at a time (Snakemake runs each job once), so temporaries of
    other processes are stale; this process's own (concurrent threads) are kept. Legacy
    temporaries beside the target (``.<name>.tmp-*``, before ``.tmp/`` existed) go too.
    """
    path = Path(path)
    prefix, own = _temp_prefix(path), f"{os.getpid()}-"
    removed = []
    for folder in (path.parent / TEMP_DIR, path.parent):
        try:
            names = os.listdir(folder)
        except OSError:
            continue
        for name in names:
            if (name.startswith(prefix) and name.endswith(path.suffix)
                    and not name[len(prefix):].startswith(own)):
                stale = folder / name
                with contextlib.suppress(OSError):
                    stale.unlink()
                    removed.append(stale)
    return removed


def prepare_temp(path: str | os.PathLike) -> Path:
    """Create the target's folders, remove its stale temporaries, return a new temp path."""
    path = Path(path)
    (path.parent / TEMP_DIR).mkdir(parents=True, exist_ok=True)
    remove_stale_temps(path)
    return temp_path(path)


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path to write; rename it onto ``path`` if the block succeeds."""
    path = Path(path)
    tmp = prepare_temp(path)
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
