"""Where the faces stage gets an image's bytes: a file, a RecordIO record or a .bin entry.

Manifests of container datasets (kind ``recordio``, ``insightface_bin``) list images as
locators ``<container file>#<index>`` and record their containers in the manifest's
provenance (``containers``: file name -> ``{"kind": ..., "path": ..., "idx": ...}``).
:func:`fetch_bytes` reads one locator by random access (RecordIO: the record at its
indexed byte offset; .bin: the entry of the once-per-process loaded file).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from facecast.datasets.manifest import DatasetError

#: Dataset kinds whose manifest paths are locators into one container file.
CONTAINER_KINDS = ("recordio", "insightface_bin")


def split_locator(rel: str, containers: Mapping[str, Any]) -> tuple[str, int] | None:
    """``(container name, index)`` when ``rel`` is a locator of a known container."""
    name, sep, index = str(rel).rpartition("#")
    if not sep or name not in containers or not index.isdigit():
        return None
    return name, int(index)


def fetch_bytes(rel: str, containers: Mapping[str, Mapping[str, Any]]
                ) -> tuple[bytes | None, str, str]:
    """``(image bytes | None, status, message)`` for locator ``rel``; never raises for a bad
    record (status ``decode_error``, or ``missing`` for an index the container lacks)."""
    from facecast.datasets.insightface_bin import cached_bin
    from facecast.datasets.recordio import RecordError, cached_reader

    loc = split_locator(rel, containers)
    if loc is None:
        return None, "missing", f"{rel}: not a locator of this dataset's containers"
    name, index = loc
    spec = containers[name]
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


def container_spec(spec: Mapping[str, Any]) -> dict[str, dict[str, str]]:
    """The ``containers`` provenance entry of a dataset config block (empty for file kinds)."""
    kind = spec.get("kind")
    if kind == "recordio":
        rec = Path(spec["rec"]).absolute()
        idx = Path(spec.get("idx") or rec.with_suffix(".idx")).absolute()
        return {rec.name: {"kind": kind, "path": os.fspath(rec), "idx": os.fspath(idx)}}
    if kind == "insightface_bin":
        path = Path(spec["path"]).absolute()
        return {path.name: {"kind": kind, "path": os.fspath(path)}}
    return {}
