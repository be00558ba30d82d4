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
* ``layout: blocks`` (a facecast ``export.bins`` file, :mod:`facecast.analysis.bins`): one
  protocol per block named in the ``<stem>.json`` sidecar beside the file (the benchmark
  the block was exported from), each with 10 consecutive folds inside the block.

An ``evaluate.imports`` entry of format ``insightface_bin`` that names the same file and
applies to the dataset (its ``datasets`` empty or naming it) replaces the implied protocol
of a ``pairs`` layout (older configs keep their protocol name); for a ``cc11`` layout the
eleven blocks stay and the import is one more protocol over the whole file.

Nothing here reads the ``.bin``: block sizes are checked when the manifest is built
(:func:`facecast.datasets.insightface_bin.read_insightface_bin`). A ``blocks`` layout's
names come from its small ``.json`` sidecar (:func:`sidecar_blocks`), read when the config
is checked and the DAG is built.
"""

from __future__ import annotations

import json
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
#: layout -> number of consecutive equal blocks the pairs split into (``blocks``: as many
#: as its sidecar lists, not necessarily equal: :func:`sidecar_blocks`)
LAYOUT_BLOCKS = {"pairs": 1, "cc11": len(CC11_NAMES), "blocks": 0}
#: the layouts whose protocols are blocks of the file (one protocol per block)
BLOCK_LAYOUTS = ("cc11", "blocks")
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


def sidecar_path(path: str | Path) -> Path:
    """The ``.json`` sidecar of a ``.bin`` (``<stem>.json`` beside it)."""
    p = Path(path)
    return p.with_name(p.stem + ".json")


class SidecarError(ValueError):
    """A ``layout: blocks`` file's ``.json`` sidecar is missing or does not list blocks."""


def sidecar_blocks(path: str | Path) -> list[dict[str, Any]]:
    """The blocks (``name``, ``first_pair``, ``n_pairs``) a ``.bin``'s ``.json`` sidecar
    lists, in file order; SidecarError naming the sidecar when it is missing, unreadable,
    lists no blocks, or names one that cannot be a protocol (or twice)."""
    side = sidecar_path(path)
    try:
        blocks = json.loads(side.read_text())["blocks"]
        out = [{"name": str(b["name"]), "first_pair": int(b["first_pair"]),
                "n_pairs": int(b["n_pairs"])} for b in blocks]
    except FileNotFoundError:
        raise SidecarError(f"{side} does not exist: layout blocks reads the blocks from the "
                           ".json facecast's export.bins writes beside the .bin") from None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise SidecarError(f"{side}: not a facecast .bin sidecar with a blocks list "
                           f"({type(exc).__name__}: {exc})") from None
    names = [b["name"] for b in out]
    bad = [n for n in names if not NAME_PATTERN.match(n) or n in RESERVED_NAMES
           or names.count(n) > 1]
    if not out or bad:
        raise SidecarError(f"{side}: " + ("lists no blocks" if not out else
                           f"block names {sorted(set(bad))} cannot be protocol names (letters, "
                           f"digits, _ and -, unique, not {', '.join(RESERVED_NAMES)})"))
    return out


def cc11_refusal(path: str | Path) -> str | None:
    """Why ``layout: cc11`` must not read the ``.bin`` at ``path``: its facecast sidecar
    says ``cc11_compatible: false`` (an export of other than eleven blocks, which CAST's
    eleven equal slices would cut across); None when there is no sidecar, it cannot be
    read, or it does not say so."""
    side = sidecar_path(path)
    try:
        meta = json.loads(side.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(meta, dict) or meta.get("cc11_compatible") is not False:
        return None
    names = [str(b.get("name")) for b in meta.get("blocks") or [] if isinstance(b, dict)]
    return (f"its sidecar {side} says cc11_compatible: false (an export of {len(names)} "
            f"block(s): {', '.join(names) or 'none listed'}): CAST's eleven equal slices "
            "would cut across its blocks and mislabel every pair; read it with layout: "
            "blocks")


def implied_protocols(spec: Mapping[str, Any]) -> list[str]:
    """Protocol names a dataset block implies ([] unless kind ``insightface_bin``; [] for a
    ``blocks`` layout whose sidecar cannot be read: :func:`bin_spec_errors` says why)."""
    if not is_bin_spec(spec) or not spec.get("path"):
        return []
    if bin_layout(spec) == "blocks":
        try:
            return [b["name"] for b in sidecar_blocks(spec["path"])]
        except SidecarError:
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
    if bin_layout(spec) == "blocks":
        return implied_protocols(spec).index(name)
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
    if bin_layout(spec) == "blocks" and spec.get("path"):
        try:
            sidecar_blocks(spec["path"])
        except SidecarError as exc:
            return [f"{key}.layout: blocks: {exc}"]
    if bin_layout(spec) == "cc11" and spec.get("path"):
        refusal = cc11_refusal(spec["path"])
        if refusal:
            return [f"{key}.layout: cc11: {refusal}"]
    if bin_layout(spec) == "pairs" and spec.get("path"):
        name = stem_name(spec)
        if not NAME_PATTERN.match(name) or name in RESERVED_NAMES:
            return [f"{key}.path: the protocol of a .bin is named after its file stem, and "
                    f"{name!r} cannot be one (letters, digits, _ and -; not "
                    f"{', '.join(RESERVED_NAMES)}); rename the file or link it under another "
                    "name"]
    return []
