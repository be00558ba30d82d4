"""Folder-per-identity layout (LFW, WebFace, VGGFace2): ``root/<identity>/<file>``.

The walk lists every entry whose name looks like an image (by extension, hidden files
included), so that each gets a manifest row with its true status: special files (FIFO,
socket, device) and broken symlinks are listed and reported by
:func:`facecast.datasets.manifest.finalize_manifest` (``unreadable`` / ``missing``). Directory
symlinks are followed when their target stays inside the root (a symlinked identity
folder is an identity); one leading outside the root gets a single ``outside_root`` row
and is not entered. A symlink back to a folder already on the current path (a loop) is
not entered either. A folder that cannot be listed gets one ``unreadable`` row, and so
does a name that is not valid UTF-8 (shown with ``\\x`` escapes).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable
from pathlib import Path

import pandas as pd

from facecast.datasets.manifest import DatasetError

log = logging.getLogger(__name__)

DEFAULT_EXTENSIONS = (".jpg", ".jpeg", ".png", ".bmp", ".webp", ".tif", ".tiff", ".gif",
                      ".pgm", ".ppm", ".pbm", ".pnm")


def _inside(real: str, real_root: str) -> bool:
    return real == real_root or real.startswith(real_root.rstrip(os.sep) + os.sep)


def _walk(root: Path, exts: tuple[str, ...]) -> list[tuple[str, str, str, str]]:
    """(path, identity, status, message) for every image-like entry under ``root``."""
    real_root = os.path.realpath(root)
    rows: list[tuple[str, str, str, str]] = []

    def identity_of(rel: str) -> str:
        parts = rel.split("/")
        return parts[0] if len(parts) > 1 else ""

    def visit(rel_dir: str, ancestors: frozenset[str]) -> None:
        full_dir = os.path.join(root, rel_dir) if rel_dir else str(root)
        try:
            with os.scandir(full_dir) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError as exc:
            if not rel_dir:
                raise DatasetError(f"cannot list dataset root {root}: {exc.strerror}") from exc
            rows.append((rel_dir, identity_of(rel_dir + "/x"), "unreadable",
                         f"cannot list folder {full_dir}: {exc.strerror or exc}"))
            return
        for entry in entries:
            rel = f"{rel_dir}/{entry.name}" if rel_dir else entry.name
            try:
                is_dir = entry.is_dir(follow_symlinks=True)
            except OSError:
                is_dir = False
            if is_dir:
                real = os.path.realpath(entry.path)
                if entry.is_symlink() and not _inside(real, real_root):
                    rows.append((rel, identity_of(rel + "/x"), "outside_root",
                                 f"folder symlink leads outside the dataset root (to {real}); "
                                 "not followed"))
                elif real in ancestors:
                    log.warning("%s: symlink loop (back to %s); not followed", rel, real)
                else:
                    visit(rel, ancestors | {real})
            elif entry.name.lower().endswith(exts):
                ident = identity_of(rel)
                rows.append((rel, ident, "ok" if ident else "no_identity",
                             "" if ident else "image is not inside an identity folder"))

    visit("", frozenset({real_root}))
    return [_utf8_row(r) for r in rows]


def _utf8_row(row: tuple[str, str, str, str]) -> tuple[str, str, str, str]:
    """Names that are not valid UTF-8 cannot be stored: show them with ``\\x`` escapes."""
    path, identity, status, message = row
    try:
        (path + identity).encode("utf-8")
        return row
    except UnicodeEncodeError:
        def shown(text: str) -> str:
            return os.fsencode(text).decode("utf-8", "backslashreplace")
        return (shown(path), shown(identity), "unreadable",
                "file name is not valid UTF-8 (shown with \\x escapes); rename the file")


def read_folder(root: str | os.PathLike, extensions: Iterable[str] | None = None) -> pd.DataFrame:
    """One row per image-like entry under ``root``, identity = its top-level folder.

    Images directly in ``root`` (not in an identity folder) are kept with status
    ``no_identity``; files with other extensions are not images and are not listed.
    Order is sorted by path, so shards are deterministic. See the module docstring for
    symlinks, hidden and special files.
    """
    root = Path(root)
    exts = tuple(e.lower() for e in (extensions or DEFAULT_EXTENSIONS))
    rows = _walk(root, exts)
    if not rows:
        raise DatasetError(f"no image files ({', '.join(exts)}) found under {root}")
    rows.sort()
    return pd.DataFrame(rows, columns=["path", "identity", "status", "message"])
