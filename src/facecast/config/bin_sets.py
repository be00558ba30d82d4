"""The pair protocols an insightface verification ``.bin`` dataset implies (pure config).

A dataset of kind ``insightface_bin`` is evaluated on its own pairs without an
``evaluate.imports`` entry:

* ``layout: pairs`` (the default; lfw.bin, cfp_fp.bin, agedb_30.bin, calfw.bin, cplfw.bin):
  one protocol named after the file stem (``lfw``, ``cfp_fp``, ...), insightface's 10
  consecutive folds over every pair of the file.
* ``layout: cc11`` (CAST's ``cc11.bin`` / ``cc11_val.bin``): eleven protocols, one per
  consecutive block of equal size, in CAST's order (:data:`CC11_NAMES`, the names of
  config/cast11.yaml), each with 10 consecutive folds inside the block, as CAST's
  ``cc11.py`` evaluates it.

An ``evaluate.imports`` entry of format ``insightface_bin`` that names the same file and
applies to the dataset (its ``datasets`` empty or naming it) replaces the implied protocol
of a ``pairs`` layout (older configs keep their protocol name); for a ``cc11`` layout the
eleven blocks stay and the import is one more protocol over the whole file.

Nothing here reads the file: block sizes are checked when the manifest is built
(:func:`facecast.datasets.insightface_bin.read_insightface_bin`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

#: CAST's eleven CC11 sub-benchmarks, in the order of cc11.bin's blocks
CC11_NAMES = ("black", "caucasian", "east_asian", "latinx", "middle_eastern", "young",
              "female", "male", "glasses_facial_hair", "low_p2p", "random")
#: the column names cc11.py prints for them, in the same order
CC11_LABELS = ("Black", "Caucasian", "E. Asian", "Latinx", "M.E.", "Young", "Female", "Male",
               "G&FH", "L-p2p", "Random")
#: layout -> number of consecutive equal blocks the pairs split into
LAYOUT_BLOCKS = {"pairs": 1, "cc11": len(CC11_NAMES)}
#: insightface's verification.py and CAST's cc11.py always use 10 folds
BIN_FOLDS = 10
#: protocol names a file stem may not take (other files of results/<ds>/protocols/ and
#: results/<ds>/eval/ use them)
RESERVED_NAMES = ("pairs", "summary")
NAME_PATTERN = re.compile(r"^[A-Za-z0-9_-]+$")


def _datasets(config: Mapping[str, Any]) -> Mapping[str, Any]:
    value = config.get("datasets")
    return value if isinstance(value, Mapping) else {}


def is_bin_spec(spec: Any) -> bool:
    """Whether a dataset block is of kind ``insightface_bin``."""
    return isinstance(spec, Mapping) and spec.get("kind") == "insightface_bin"


def bin_layout(spec: Mapping[str, Any]) -> str:
    """``datasets.<ds>.layout`` (``pairs`` when unset)."""
    return str(spec.get("layout") or "pairs")


def stem_name(spec: Mapping[str, Any]) -> str:
    """The protocol name of a ``pairs`` layout: the file's stem (``lfw`` for lfw.bin)."""
    return Path(str(spec.get("path", ""))).stem


def implied_protocols(spec: Mapping[str, Any]) -> list[str]:
    """Protocol names a dataset block implies ([] unless kind ``insightface_bin``)."""
    if not is_bin_spec(spec) or not spec.get("path"):
        return []
    return list(CC11_NAMES) if bin_layout(spec) == "cc11" else [stem_name(spec)]


def import_covers(config: Mapping[str, Any], ds: str) -> list[str]:
    """``evaluate.imports`` of format ``insightface_bin`` that pair dataset ``ds``'s file
    and apply to ``ds`` (``datasets`` empty or naming it)."""
    spec = _datasets(config).get(ds)
    if not is_bin_spec(spec):
        return []
    ev = config.get("evaluate")
    imports = (ev.get("imports") if isinstance(ev, Mapping) else None) or {}
    name = Path(str(spec.get("path", ""))).name
    return [n for n, imp in imports.items() if isinstance(imp, Mapping)
            and imp.get("format") == "insightface_bin"
            and Path(str(imp.get("path", ""))).name == name
            and (not imp.get("datasets") or ds in list(imp.get("datasets")))]


def dataset_protocols(config: Mapping[str, Any], ds: str) -> list[str]:
    """The protocols dataset ``ds`` implies (module docstring: an import of the same file
    replaces the implied protocol of a ``pairs`` layout)."""
    spec = _datasets(config).get(ds)
    names = implied_protocols(spec) if is_bin_spec(spec) else []
    if names and bin_layout(spec) == "pairs" and import_covers(config, ds):
        return []
    return names


def all_bin_protocols(config: Mapping[str, Any]) -> list[str]:
    """Every implied protocol name of the config, in dataset order, without repeats."""
    out: list[str] = []
    for ds in _datasets(config):
        out += [n for n in dataset_protocols(config, str(ds)) if n not in out]
    return out


def bin_block(spec: Mapping[str, Any], name: str) -> int | None:
    """Block index of protocol ``name`` in the file (None: the whole file)."""
    return CC11_NAMES.index(name) if bin_layout(spec) == "cc11" else None


def bin_spec_errors(ds: str, spec: Mapping[str, Any]) -> list[str]:
    """``datasets.<ds>.layout`` / ``.path`` mistakes of one dataset block (no file read)."""
    key = f"datasets.{ds}"
    if not isinstance(spec, Mapping):
        return []
    if not is_bin_spec(spec):
        if spec.get("layout") not in (None, "pairs"):
            return [f"{key}.layout: {spec.get('layout')!r} needs kind insightface_bin (got "
                    f"{spec.get('kind')}); the layout says how a verification .bin's pairs "
                    "split into protocols"]
        return []
    if bin_layout(spec) == "pairs" and spec.get("path"):
        name = stem_name(spec)
        if not NAME_PATTERN.match(name) or name in RESERVED_NAMES:
            return [f"{key}.path: the protocol of a .bin is named after its file stem, and "
                    f"{name!r} cannot be one (letters, digits, _ and -; not "
                    f"{', '.join(RESERVED_NAMES)}); rename the file or link it under another "
                    "name"]
    return []
