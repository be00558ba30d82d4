"""What every reference recorder shares: which checkout ran, and how a record is written.

A record is one small JSON file under ``tests/data/reference/<reference>/``. It holds the
reference's outputs on inputs *our* recorder built, and says where they came from:

``{"reference": "StevenZhou90/CAST", "commit": "<40 hex>", "path": "dataset_builder/filter.py",
  "function": "FilterClass.run", "command": "python tests/reference/record.py --cast ...",
  "recorded": "<ISO date>", "inputs": {...}, "outputs": {...}}``

The tests read records only; no reference code is in this repository. Re-recording is
described in docs/CONTRIBUTING.md ("Reference records").
"""

from __future__ import annotations

import datetime as _dt
import json
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[2]
#: where the records live
RECORDS = REPO / "tests" / "data" / "reference"


def checkout_commit(checkout: Path) -> str:
    """The commit a reference checkout (a work tree or a bare git directory) is at."""
    checkout = Path(checkout)
    out = subprocess.run(["git", "-C", str(checkout), "rev-parse", "HEAD"],
                         capture_output=True, text=True, check=True)
    return out.stdout.strip()


def _plain(value: Any) -> Any:
    """JSON-ready copies of numpy values; floats keep every bit (NaN/inf as strings)."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, np.ndarray):
        return _plain(value.tolist())
    if isinstance(value, np.generic):
        return _plain(value.item())
    if isinstance(value, float) and not np.isfinite(value):
        return "NaN" if np.isnan(value) else ("inf" if value > 0 else "-inf")
    return value


def write_record(reference: str, name: str, *, repo: str, commit: str, path: str,
                 function: str, inputs: Any, outputs: Any) -> Path:
    """Write ``tests/data/reference/<reference>/<name>.json`` and return its path.

    ``repo`` is ``owner/name``, ``path`` the file inside it and ``function`` what ran;
    ``inputs`` say how the tests rebuild the inputs (a seed and a builder's name, or
    the values themselves when small); ``outputs`` are what the reference returned."""
    out = RECORDS / reference / f"{name}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    record = {"reference": repo, "commit": commit, "path": path, "function": function,
              "command": " ".join(shlex.quote(a) for a in ["python", *sys.argv]),
              "recorded": _dt.date.today().isoformat(),
              "inputs": _plain(inputs), "outputs": _plain(outputs)}
    out.write_text(json.dumps(record, indent=1, sort_keys=False, allow_nan=False) + "\n")
    return out


def read_record(reference: str, name: str) -> dict:
    """A record written by :func:`write_record` (what the tests call)."""
    path = RECORDS / reference / f"{name}.json"
    return json.loads(path.read_text())


def as_float(value: Any) -> float:
    """A recorded float back (``"NaN"``, ``"inf"`` and ``"-inf"`` included)."""
    return float(value) if isinstance(value, str) else value
