"""Speed of the ``ofiq`` scorer from stored crops with landmarks (goal: >= 100 images/s per
CPU core).

A faces shard of the Yale photos in tests/data (MTCNN boxes and landmarks, 160 px facenet
crops, as the faces stage stores them) is repeated to ``--images`` rows; the timed part is
what an ``attributes_score`` job for scorer ``ofiq`` does per shard: PNG decoding, dlib's
68-point fit, the 308 px alignment, the pixel and landmark components and their OFIQ
mappings (:func:`facecast.attributes.scoring.score_shard`), on ONE thread (OpenCV and BLAS
pinned to one), so the figure is per core. dlib's predictor load (~1 s, once per job) is
reported apart.

Run: .venv/bin/python benchmarks/ofiq_speed.py [--images 1000]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

REPO = Path(__file__).resolve().parents[1]


def yale_shard(n: int, path: Path) -> None:
    """A faces shard of ``n`` rows cycling through the Yale photos of tests/data."""
    from facecast.attributes.inputs import faces_table
    from facecast.faces.align import crop_facenet
    from facecast.faces.decode import read_image
    from facecast.faces.detect import FaceDetector, select_face

    paths = sorted((REPO / "tests/data").glob("yale*/*/*.gif"))
    images = [read_image(p).array for p in paths]
    crops, lms, boxes = [], [], []
    for img, det in zip(images, FaceDetector({"device": "cpu"}).detect(images), strict=True):
        k = select_face(det, "largest", img.shape[1], img.shape[0])
        crops.append(crop_facenet(img, det.boxes[k][:4]))
        lms.append(det.landmarks[k])
        boxes.append(det.boxes[k][:4])
    idx = np.arange(n) % len(paths)
    table = faces_table([f"img{i}" for i in range(n)], [crops[i] for i in idx],
                        np.array(lms)[idx], np.array(boxes)[idx],
                        image_size=images[0].shape[1::-1], crop="facenet")
    table["n_faces"] = 1
    table.to_parquet(path)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--images", type=int, default=1000)
    args = ap.parse_args()
    import cv2

    cv2.setNumThreads(1)
    from facecast.attributes.ofiq_landmarks import load_predictor
    from facecast.attributes.scoring import score_shard

    with tempfile.TemporaryDirectory() as tmp:
        faces = Path(tmp) / "faces.parquet"
        yale_shard(args.images, faces)
        t0 = time.perf_counter()
        load_predictor()
        load_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        out = score_shard("ofiq", faces, Path(tmp) / "ofiq.parquet", {"chunk_rows": 512})
        total = time.perf_counter() - t0
    scored = int((out["status"] == "ok").sum())
    rate = args.images / max(total - load_s, 1e-9)
    print(f"ofiq scorer: {args.images} images ({scored} ok) in {total:.2f} s on one thread "
          f"(dlib predictor load {load_s:.2f} s of it)")
    print(f"  {rate:.0f} images/s per CPU core without the load "
          f"({args.images / total:.0f} with it); goal >= 100")
    print(pd.Series({c: out[c].median() for c in out.columns[3:] if not c.endswith("_native")
                     }).to_string())


if __name__ == "__main__":
    main()
