"""Record what CAST's ``FilterClass`` selects on our hostile arrays (our code).

``record(checkout)`` loads ``dataset_builder/filter.py`` from a CAST checkout outside this
tree (by file path; nothing is copied), builds each case of
:data:`cast_inputs.CASES` in a temporary folder, runs ``FilterClass(...).run(tuples)`` as
CAST's ``run.py`` drives it (from that folder, where CAST reads its train set
``./data/webface12m_idxs.npy``) and writes one record per case under
``tests/data/reference/cast/``: the selected rows as a packed row mask (``mask_hex``) with
their count, or, for the large case, a digest (count, sha256, first and last row). Each
record also keeps a digest of the rows outside any tie a rank cut splits
(``outside_ties``), and the platform of numpy's argsort that ordered the ties.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
from cast_inputs import (
    CASES,
    DIGEST_CASES,
    cut_tie_rows,
    hostile_arrays,
    hostile_columns,
    inputs_digest,
    mask_hex,
    rows_digest,
)
from common import checkout_commit, write_record

from facecast.analysis.cast_tuples import argsort_platform

REPO = "StevenZhou90/CAST"
FILTER_PY = "dataset_builder/filter.py"


def load_filter_class(checkout: Path) -> type:
    """``FilterClass`` of ``dataset_builder/filter.py`` in the CAST checkout."""
    spec = importlib.util.spec_from_file_location("cast_reference_filter",
                                                  Path(checkout) / FILTER_PY)
    if spec is None or spec.loader is None:
        raise FileNotFoundError(f"{checkout}/{FILTER_PY}: not a CAST checkout")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.FilterClass


@contextlib.contextmanager
def _argsort_kind(kind: str) -> Iterator[None]:
    """numpy's ``argsort`` with ``kind`` as its default (``default``: untouched)."""
    original = np.argsort
    if kind == "stable":
        np.argsort = lambda a, **k: original(a, **{"kind": "stable", **k})
    try:
        yield
    finally:
        np.argsort = original


def run_case(filter_class: type, case: dict[str, Any], folder: Path) -> np.ndarray:
    """CAST's selection of ``case`` as a mask over the rows (its paths mapped back)."""
    spec = hostile_arrays(folder, case["n"], case["seed"])
    cwd = os.getcwd()
    os.chdir(folder)                         # CAST reads ./data/webface12m_idxs.npy
    try:
        with _argsort_kind(case["argsort"]):
            tool = filter_class(spec["attributes"], spec["paths"], columns=spec["columns"],
                                train_set=case["train_set"])
            paths = tool.run([tuple(t) for t in case["tuples"]])
    finally:
        os.chdir(cwd)
    every = np.load(spec["paths"])
    row = {p: i for i, p in enumerate(every.tolist())}
    rows = np.array([row[p] for p in paths.tolist()], np.int64)
    if len(row) != len(every) or np.any(np.diff(rows) <= 0):
        raise AssertionError("paths are not unique or CAST's output is not in row order")
    mask = np.zeros(len(every), bool)
    mask[rows] = True
    return mask


def record(checkout: Path) -> list[Path]:
    """Run every case of :data:`cast_inputs.CASES` with CAST's ``FilterClass`` from
    ``checkout`` and write its record; return the record paths."""
    filter_class = load_filter_class(checkout)
    commit = checkout_commit(checkout)
    written = []
    for name, case in CASES.items():
        with tempfile.TemporaryDirectory() as tmp:
            mask = run_case(filter_class, case, Path(tmp))
        attrs = hostile_columns(case["n"], case["seed"])[0]
        tied = cut_tie_rows(attrs, case["tuples"])
        outputs: dict[str, Any] = {"n_selected": int(mask.sum()),
                                   "outside_ties": rows_digest(mask & ~tied)}
        if name in DIGEST_CASES:
            outputs["rows"] = rows_digest(mask)
        else:
            outputs["mask_hex"] = mask_hex(mask)
        inputs = {"builder": "tests/reference/cast_inputs.py hostile_arrays(d, n, seed)",
                  **case, "arrays_sha256": inputs_digest(case["n"], case["seed"]),
                  "argsort_platform": argsort_platform(),
                  "outputs": "mask_hex: np.packbits of the selected-row mask over the n rows "
                             "(hex); rows: count, sha256 of the rows as <i8, first, last; "
                             "outside_ties: the same of the selected rows not tied across "
                             "a rank cut (cast_inputs.cut_tie_rows)"}
        written.append(write_record("cast", f"filterclass_{name}", repo=REPO, commit=commit,
                                    path=FILTER_PY, function="FilterClass.run",
                                    inputs=inputs, outputs=outputs))
    return written
