"""Throughput of the attribute scorers on one in-memory shard of aligned crops.

Prints images/second for the native measures (image part, geometry part) and the
age_gender ONNX models. Usage: python benchmarks/attributes_throughput.py [N]
"""

from __future__ import annotations

import sys
import time

import numpy as np
from skimage import data

from facecast.attributes.age_gender import AgeGenderModel
from facecast.attributes.align import ARCFACE_TEMPLATE_112, warp_batch
from facecast.attributes.native import geometry_measures, image_measures
from facecast.attributes.pose import project_face


def main(n: int = 1024) -> None:
    rng = np.random.default_rng(0)
    lm = np.array([[[205.5, 117.7], [249.6, 107.5], [232.8, 136.6], [215.6, 163.1],
                    [253.3, 155.6]]])
    crop = warp_batch(data.astronaut()[None], lm, ARCFACE_TEMPLATE_112, 112)[0]
    crops = np.clip(crop[None].astype(int) + rng.integers(-10, 10, (n, 112, 112, 3)), 0,
                    255).astype(np.uint8)
    lms = np.repeat(ARCFACE_TEMPLATE_112[None], n, 0) + rng.normal(0, 1, (n, 5, 2))
    rows = []
    t = time.perf_counter()
    image_measures(crops)
    rows.append(("native image measures", n / (time.perf_counter() - t)))
    t = time.perf_counter()
    geometry_measures(np.stack([project_face(yaw=10)] * n), np.tile([0, 0, 100, 100.0], (n, 1)),
                      np.full(n, 200.0), np.full(n, 200.0), np.ones(n))
    rows.append(("native geometry + pose", n / (time.perf_counter() - t)))
    model = AgeGenderModel(threads=2)
    t = time.perf_counter()
    model.predict(crops, lms)
    rows.append(("age_gender (chips + 2 ONNX models)", n / (time.perf_counter() - t)))
    print(f"{'scorer':40s} images/s   (N={n})")
    for name, ips in rows:
        print(f"{name:40s} {ips:10.0f}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 1024)
