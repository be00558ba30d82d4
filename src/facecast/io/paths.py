"""Portable paths in provenance: relative where they can be, so results move with the folder.

Provenance records where inputs came from (RecordIO / .bin containers, weight files,
protocol lists). Absolute paths break when a run folder is moved or copied together with
its data, so a path is stored relative to a base folder when it lies inside that folder
(:func:`portable_path`), and read back against the same base (:func:`resolve_portable`).
Which base a field uses is part of its contract: container paths are relative to the
dataset root (:mod:`facecast.datasets.sources`); weights and protocol sources are
relative to the working directory (the run folder, where ``results/`` lives). Paths
outside their base stay absolute.

"Inside" is decided on the normalised absolute paths as written (no symlinks resolved):
the stored value names the file the way the configuration does.
"""

from __future__ import annotations

import os
from pathlib import Path


def _absolute(path: str | os.PathLike) -> str:
    """``path`` made absolute against the working directory and normalised."""
    return os.path.normpath(os.path.abspath(os.fspath(path)))


def is_inside(path: str | os.PathLike, folder: str | os.PathLike) -> bool:
    """Whether ``path`` is ``folder`` or lies below it (lexically, after normalising)."""
    p, f = _absolute(path), _absolute(folder)
    try:
        return os.path.commonpath([p, f]) == f
    except ValueError:  # different drives (Windows)
        return False


def portable_path(path: str | os.PathLike, base: str | os.PathLike | None = None, *,
                  within: str | os.PathLike | None = None) -> str:
    """``path`` as stored in provenance: relative to ``base`` (POSIX ``/``) when inside it.

    ``base`` defaults to the working directory. A relative ``path`` is taken relative to
    the working directory (as the configuration means it); when ``base`` is the working
    directory it is kept as configured (normalised, ``../`` included), so the stored value
    is the same in every run folder. With ``within`` (a folder that moves as a whole, such
    as the run folder) a path outside ``base`` is still stored relative to ``base`` (with
    ``..``) when both lie inside ``within``. Otherwise the absolute path is returned.
    """
    p = _absolute(path)
    b = _absolute(os.getcwd() if base is None else base)
    if not os.path.isabs(path) and b == _absolute(os.getcwd()):
        return Path(os.path.normpath(path)).as_posix()
    if is_inside(p, b) or (within is not None and is_inside(p, within) and is_inside(b, within)):
        return Path(os.path.relpath(p, b)).as_posix()
    return p


def resolve_portable(value: str | os.PathLike, base: str | os.PathLike | None = None) -> Path:
    """The absolute path a :func:`portable_path` value names: an absolute value as is, a
    relative one under ``base`` (default the working directory; a relative ``base`` is
    taken relative to the working directory), normalised."""
    p = Path(value)
    if p.is_absolute():
        return p
    return Path(_absolute(Path(os.getcwd() if base is None else base) / p))


def portable_or_none(path: str | os.PathLike | None,
                     base: str | os.PathLike | None = None) -> str | None:
    """:func:`portable_path` of ``path``, or None when there is no path (empty or None)."""
    return portable_path(path, base) if path else None
