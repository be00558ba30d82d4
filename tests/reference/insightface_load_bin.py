"""Read ``.bin`` files with insightface's own ``load_bin`` (our runner, not insightface's code).

Run by :mod:`insightface_recorder` with a Python that has what insightface's
``recognition/arcface_torch/eval/verification.py`` imports (mxnet 1.9.1, which needs
numpy < 1.24, torch, scikit-learn, scipy)::

    python insightface_load_bin.py CHECKOUT OUT_DIR FILE.bin [FILE.bin ...]

imports ``verification.py`` from the checkout by its path, calls
``load_bin(path, (112, 112))`` on each file and writes, per file, ``<stem>.npy`` (the
un-flipped images as load_bin holds them: N x 3 x 112 x 112, as uint8) and one
``load_bin.json`` (per stem: ``issame``, ``n_images``, ``integral`` - whether every pixel
value load_bin produced is a whole number in 0..255). Imports nothing of facecast.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import sys
from pathlib import Path

import numpy as np

VERIFICATION = "recognition/arcface_torch/eval/verification.py"


def main(argv: list[str]) -> int:
    checkout, out_dir, *bins = argv
    spec = importlib.util.spec_from_file_location("insightface_verification",
                                                  Path(checkout) / VERIFICATION)
    module = importlib.util.module_from_spec(spec)
    with contextlib.redirect_stdout(sys.stderr):
        spec.loader.exec_module(module)
    out = {}
    for path in bins:
        with contextlib.redirect_stdout(sys.stderr):  # load_bin prints its progress
            data_list, issame = module.load_bin(path, (112, 112))
        images = data_list[0].numpy()
        integral = bool(np.all(images == np.round(images)) and images.min() >= 0
                        and images.max() <= 255)
        stem = Path(path).stem
        np.save(Path(out_dir) / f"{stem}.npy", images.astype(np.uint8))
        out[stem] = {"issame": [bool(s) for s in issame], "n_images": int(len(images)),
                     "integral": integral}
    (Path(out_dir) / "load_bin.json").write_text(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
