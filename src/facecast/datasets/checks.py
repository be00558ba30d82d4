"""Config checks for pre-aligned and container inputs (issue 12), run before any job.

:func:`config_errors` is a :mod:`facecast.config_check` checker: ``(config) -> list of
messages``, each starting with the key path at fault. It is cheap (stats a few files,
reads no records) and imports nothing heavy.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any


def _sec(config: Mapping[str, Any], name: str) -> Mapping[str, Any]:
    value = config.get(name) if isinstance(config, Mapping) else None
    return value if isinstance(value, Mapping) else {}


def _need(errors: list[str], key: str, path: Any, what: str) -> None:
    p = Path(str(path))
    if not p.is_file():
        errors.append(f"{key}: {what} {str(path)!r} does not exist (looked at {p.absolute()})")


def config_errors(config: Mapping[str, Any]) -> list[str]:
    """Mistakes in RecordIO / .bin datasets, ``exclude_by``, ``faces.detector: none`` and
    ``insightface_bin`` imports."""
    errors: list[str] = []
    datasets = _sec(config, "datasets")
    for ds, spec in datasets.items():
        spec = spec if isinstance(spec, Mapping) else {}
        key, kind = f"datasets.{ds}", spec.get("kind")
        if kind == "recordio":
            if not spec.get("rec"):
                errors.append(f"{key}.rec: dataset kind recordio needs its .rec file")
            else:
                _need(errors, f"{key}.rec", spec["rec"], "RecordIO file")
                idx = spec.get("idx") or str(Path(str(spec["rec"])).with_suffix(".idx"))
                _need(errors, f"{key}.idx", idx, "RecordIO index")
        elif kind == "insightface_bin":
            if not spec.get("path"):
                errors.append(f"{key}.path: dataset kind insightface_bin needs its .bin file")
            else:
                _need(errors, f"{key}.path", spec["path"], "verification .bin")
        by = spec.get("exclude_by", "path")
        if by == "record" and kind != "recordio":
            errors.append(f"{key}.exclude_by: 'record' needs kind recordio (got {kind})")
        if by != "path" and not spec.get("exclude"):
            errors.append(f"{key}.exclude_by: set, but no exclude list is given")
    faces = _sec(config, "faces")
    if faces.get("detector") == "none":
        statuses = _sec(config, "mining").get("statuses")
        if statuses is not None and "aligned_input" not in list(statuses):
            errors.append("mining.statuses: faces.detector is none, so every image has faces "
                          "status aligned_input; add aligned_input (now "
                          f"{list(statuses)}) or no image can enter a benchmark")
    for name, imp in _sec(_sec(config, "evaluate"), "imports").items():
        imp = imp if isinstance(imp, Mapping) else {}
        if imp.get("format") != "insightface_bin":
            continue
        key = f"evaluate.imports.{name}"
        _need(errors, f"{key}.path", imp.get("path", ""), "verification .bin")
        bin_name = Path(str(imp.get("path", ""))).name
        users = [d for d, s in datasets.items() if isinstance(s, Mapping)
                 and s.get("kind") == "insightface_bin"
                 and Path(str(s.get("path", ""))).name == bin_name]
        for d in imp.get("datasets") or []:
            if d not in users:
                errors.append(f"{key}.datasets: {d} is not a dataset of kind insightface_bin "
                              f"made from {bin_name}; the pairs name that file's images")
        if not imp.get("datasets") and not users:
            errors.append(f"{key}: no dataset of kind insightface_bin has path {bin_name}; add "
                          f"one (datasets.<name>: {{kind: insightface_bin, path: ...}})")
    return errors
