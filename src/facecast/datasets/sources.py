"""Where the faces stage gets an image's bytes: a file, a RecordIO record or a .bin entry.

Manifests of container datasets (kind ``recordio``, ``insightface_bin``) list images as
locators ``<container file>#<index>`` and record their containers in the manifest's
provenance (``containers``: file name -> ``{"kind": ..., "path": ..., "idx": ...}``).
``path`` and ``idx`` are relative to the dataset root when the file lies inside it (or
when both lie inside the working directory, the run folder, which then moves as a whole:
``../``), absolute otherwise (:func:`facecast.io.paths.portable_path`), so a results
folder moved together with its data still reads. :func:`resolve_containers` turns them
back into paths against the dataset root; :func:`fetch_bytes` reads one locator by random
access (RecordIO: the record at its indexed byte offset; .bin: the entry of the
once-per-process loaded file).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from facecast.datasets.manifest import DatasetError
from facecast.io.paths import portable_path, resolve_portable

#: Dataset kinds whose manifest paths are locators into container files (``rfw``: when
#: given as insightface ``.bin`` files, ``bins``; one container per set).
CONTAINER_KINDS = ("recordio", "insightface_bin", "rfw")

#: keys of a ``containers`` entry that hold paths
PATH_KEYS = ("path", "idx")


def resolve_containers(containers: Mapping[str, Mapping[str, Any]],
                       root: str | os.PathLike) -> dict[str, dict[str, Any]]:
    """``containers`` with relative ``path`` / ``idx`` resolved against dataset ``root``
    (absolute ones, as older manifests stored them, are kept)."""
    return {name: {k: (os.fspath(resolve_portable(v, root)) if k in PATH_KEYS and v else v)
                   for k, v in spec.items()}
            for name, spec in containers.items()}


def split_locator(rel: str, containers: Mapping[str, Any]) -> tuple[str, int] | None:
    """``(container name, index)`` when ``rel`` is a locator of a known container."""
    name, sep, index = str(rel).rpartition("#")
    if not sep or name not in containers or not index.isdigit():
        return None
    return name, int(index)


def fetch_bytes(rel: str, containers: Mapping[str, Mapping[str, Any]],
                root: str | os.PathLike | None = None) -> tuple[bytes | None, str, str]:
    """``(image bytes | None, status, message)`` for locator ``rel``; never raises for a bad
    record (status ``decode_error``, or ``missing`` for an index the container lacks).

    ``containers`` as the manifest's provenance holds them: relative paths are resolved
    against the dataset ``root`` (without a root they must be absolute already, as after
    :func:`resolve_containers`; a relative one is reported ``unreadable``).
    """
    from facecast.datasets.insightface_bin import cached_bin
    from facecast.datasets.recordio import RecordError, cached_reader

    loc = split_locator(rel, containers)
    if loc is None:
        return None, "missing", f"{rel}: not a locator of this dataset's containers"
    name, index = loc
    spec = containers[name]
    if root is not None:
        spec = resolve_containers({name: spec}, root)[name]
    elif any(v and not Path(v).is_absolute() for k, v in spec.items() if k in PATH_KEYS):
        return None, "unreadable", (f"container {name}: path {spec.get('path')} is relative "
                                    "to the dataset root, which was not given")
    try:
        if spec["kind"] == "recordio":
            reader = cached_reader(spec["path"], spec["idx"])
            try:
                _, image = reader.record(index)
            except RecordError as exc:
                status = "missing" if "not in the index" in str(exc) else "decode_error"
                return None, status, f"record {index}: {exc}"
            return image, "ok", ""
        if spec["kind"] == "insightface_bin":
            images, _ = cached_bin(spec["path"])
            if not 0 <= index < len(images):
                return None, "missing", f"{name} has no image {index} ({len(images)} images)"
            return images[index], "ok", ""
    except (DatasetError, OSError) as exc:
        return None, "unreadable", f"cannot read {spec.get('path')}: {exc}"
    return None, "unreadable", f"unknown container kind {spec.get('kind')!r}"


def container_spec(spec: Mapping[str, Any], root: str | os.PathLike
                   ) -> dict[str, dict[str, str]]:
    """The ``containers`` provenance entry of a dataset config block (empty for file kinds).

    Paths are stored relative to the dataset ``root`` where they can be (module docstring):
    ``{"train.rec": {"kind": "recordio", "path": "train.rec", "idx": "train.idx"}}``.
    """
    kind = spec.get("kind")

    def stored(path: Path) -> str:
        return portable_path(path, root, within=os.getcwd())

    if kind == "recordio":
        rec = Path(spec["rec"])
        idx = Path(spec.get("idx") or rec.with_suffix(".idx"))
        return {rec.name: {"kind": kind, "path": stored(rec), "idx": stored(idx)}}
    if kind == "insightface_bin":
        path = Path(spec["path"])
        return {path.name: {"kind": kind, "path": stored(path)}}
    if kind == "rfw" and spec.get("bins"):
        return {Path(p).name: {"kind": "insightface_bin", "path": stored(Path(p))}
                for p in dict(spec["bins"]).values()}
    return {}
