"""Atomic file writes: every facecast artifact appears complete under its name, or not at all.

:func:`atomic_path` hands out a temporary path in a hidden ``.tmp/`` folder beside the
target, in a private folder of its own that keeps the target's file name
(``<dir>/.tmp/.<name>.tmp-<pid>-<id>/<name>``: writers that record their own file name,
such as ``torch.save``'s archive prefix, write the same bytes as under the real name),
and renames it onto the target when the block ends without an error. On an error the
temporary is removed. Either way the private folder goes, and so does ``.tmp/`` once
it is empty: a finished or failed write leaves no trace. Jobs writing beside each other
share ``.tmp/``: one may remove it (empty) just as another creates its private folder
in it, so creation retries when ``.tmp/`` vanished in between, and removal is a plain
``rmdir`` that fails harmlessly while another writer's folder is in it.

A killed job (SIGKILL: no cleanup runs) leaves its private folder in ``.tmp/``, where no
glob over the target's folder (``faces/*.parquet``) and no stage sees it; the next write
of the same target (the rerun of that job) removes it, and ``.tmp/`` with it once empty.
Parquet (:mod:`facecast.io.parquet_io`), figures (:mod:`facecast.report.figures`) and
text outputs (:func:`write_text`) all go through it.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path

#: name of the hidden folder that holds temporaries, beside each target
TEMP_DIR = ".tmp"


def _temp_prefix(path: Path) -> str:
    return f".{path.name}.tmp-"


def temp_path(path: str | os.PathLike) -> Path:
    """A unique temporary path for ``path``: ``<dir>/.tmp/.<name>.tmp-<pid>-<id>/<name>``."""
    path = Path(path)
    private = f"{_temp_prefix(path)}{os.getpid()}-{uuid.uuid4().hex[:8]}"
    return path.parent / TEMP_DIR / private / path.name


def remove_stale_temps(path: str | os.PathLike) -> list[Path]:
    """Remove temporaries of ``path`` left by killed writers; return what was removed.

    A target has one writer at a time (Snakemake runs each job once), so temporaries of
    other processes are stale; this process's own (concurrent threads) are kept.
    Temporaries of older layouts (``.<stem>.tmp-*<suffix>`` beside the target or in
    ``.tmp/``) go too.
    """
    path = Path(path)
    own = f"{os.getpid()}-"
    prefixes = (_temp_prefix(path), f".{path.stem}.tmp-")
    removed = []
    for folder in (path.parent / TEMP_DIR, path.parent):
        try:
            names = os.listdir(folder)
        except OSError:
            continue
        for name in names:
            prefix = next((p for p in prefixes if name.startswith(p)), None)
            if prefix is None or name[len(prefix):].startswith(own):
                continue
            stale = folder / name
            if prefix == prefixes[1] and not name.endswith(path.suffix):
                continue  # another target with the same stem
            with contextlib.suppress(OSError):
                if stale.is_dir() and not stale.is_symlink():
                    shutil.rmtree(stale)
                else:
                    stale.unlink()
                removed.append(stale)
    return removed


#: attempts to create a private temp folder while other writers remove an empty ``.tmp/``
_MKDIR_ATTEMPTS = 1000


def _make_private_folder(folder: Path) -> None:
    """Create ``folder`` (a private folder in ``.tmp/``) and ``.tmp/`` above it.

    Another writer in the same directory removes ``.tmp/`` when its own write leaves it
    empty; if that happens between creating (or finding) ``.tmp/`` and creating
    ``folder`` in it, the second ``mkdir`` finds no parent, and both are made again.
    (``Path.mkdir(exist_ok=True)`` is not enough: it raises when ``.tmp/`` existed at its
    ``mkdir`` but is gone at its ``is_dir`` check.) Once ``folder`` exists ``.tmp/`` is
    not empty, so no other writer's ``rmdir`` can remove it.
    """
    folder.parent.parent.mkdir(parents=True, exist_ok=True)  # the target's own folder
    for attempt in range(_MKDIR_ATTEMPTS):
        try:
            with contextlib.suppress(FileExistsError):
                os.mkdir(folder.parent)  # .tmp/, shared with the writers beside this one
            os.mkdir(folder)
            return
        except FileNotFoundError:  # .tmp/ was removed (empty) by a writer beside this one
            if attempt == _MKDIR_ATTEMPTS - 1:
                raise


def remove_empty_temp_dir(folder: str | os.PathLike) -> bool:
    """Remove ``<folder>/.tmp`` if it is empty; return whether it was removed.

    A plain ``rmdir``: it fails (harmlessly, returning False) when the folder holds
    another writer's temporary or is already gone, so it never races a live write.
    """
    try:
        os.rmdir(Path(folder) / TEMP_DIR)
    except OSError:
        return False
    return True


def prepare_temp(path: str | os.PathLike) -> Path:
    """Create the target's folders, remove its stale temporaries, return a new temp path."""
    path = Path(path)
    remove_stale_temps(path)
    tmp = temp_path(path)
    _make_private_folder(tmp.parent)
    return tmp


def discard_temp(tmp: Path) -> None:
    """Remove a temporary from :func:`prepare_temp` (if still there), its private folder,
    and ``.tmp/`` when that is left empty."""
    tmp = Path(tmp)
    with contextlib.suppress(FileNotFoundError):
        tmp.unlink()
    with contextlib.suppress(OSError):
        tmp.parent.rmdir()
    if tmp.parent.parent.name == TEMP_DIR:
        remove_empty_temp_dir(tmp.parent.parent.parent)


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path to write; rename it onto ``path`` if the block succeeds."""
    path = Path(path)
    tmp = prepare_temp(path)
    try:
        yield tmp
        os.replace(tmp, path)
    finally:
        discard_temp(tmp)


def write_text(path: str | os.PathLike, text: str) -> Path:
    """Write ``text`` (UTF-8, ``\\n`` line ends as given) to ``path`` atomically."""
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8", newline="")
    return Path(path)


def write_bytes(path: str | os.PathLike, data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically, with one rename and no private folder.

    For many small files in one folder (a rendered dataset's images), where
    :func:`atomic_path`'s two ``mkdir`` and two ``rmdir`` per file cost more than the write.
    The temporary is hidden beside the target (``<dir>/.<name>.tmp-<pid>-<id>``: no glob
    of the folder's files sees it); an error removes it, and a killed writer's is removed
    by the next write of the same target (:func:`remove_stale_temps`). The target's folder
    must exist.
    """
    path = Path(path)
    remove_stale_temps(path)
    tmp = path.parent / f"{_temp_prefix(path)}{os.getpid()}-{uuid.uuid4().hex[:8]}"
    try:
        with open(tmp, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
    return path
