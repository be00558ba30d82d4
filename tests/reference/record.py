"""Record what the reference implementations return on our hostile inputs.

Run from the repository root with the paths of reference checkouts *outside* this tree
(work trees, e.g. ``git clone`` of each reference)::

    python tests/reference/record.py --cast /path/to/CAST --insightface /path/to/insightface

Each reference's recorders (the modules named in ``RECORDERS``, beside this file: our
code) build the inputs, run the reference from its checkout and write JSON records under
``tests/data/reference/<name>/`` with the repository, commit and command (:mod:`common`).
The tests only read those records. Name only the references you want to re-record; the
others' records stay as they are.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

#: option -> recorder modules beside this file (each has
#: ``record(checkout: Path) -> list[Path]``)
RECORDERS = {"cast": ["cast_recorder", "cc11_recorder"],
             "insightface": ["insightface_recorder"],
             "ofiq": ["ofiq_recorder"],
             "faircal": ["faircal_recorder"]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    for name in RECORDERS:
        parser.add_argument(f"--{name}", type=Path, metavar="CHECKOUT",
                            help=f"a checkout of the {name} reference, outside this tree")
    args = parser.parse_args(argv)
    chosen = {n: getattr(args, n) for n in RECORDERS if getattr(args, n) is not None}
    if not chosen:
        parser.error("name at least one reference checkout")
    for name, checkout in chosen.items():
        if not checkout.is_dir():
            parser.error(f"--{name}: {checkout} is not a directory")
        for module_name in RECORDERS[name]:
            module = importlib.import_module(module_name)
            for path in module.record(checkout.resolve()):
                print(f"{name}: wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
