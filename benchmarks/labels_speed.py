"""Speed of the issue-14 label stages on generated data (no images, no model downloads).

- measurements + batched PnP pose of N 68-point shapes (:mod:`facecast.attributes.landmarks68`)
- the label audit's core: out-of-fold logistic regression + cleanlab + suspect ranking on a
  generated label table (identities x images, 6 attributes, 64-D simulated embeddings)
- descriptions: composing + parsing + caption verification + retrieval

Run: .venv/bin/python benchmarks/labels_speed.py [--identities 240] [--images 8]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

from facecast.attributes.landmarks68 import head_pose, measurements
from facecast.datasets.label_noise import DEMO_LABEL_NOISE, plant_label_noise
from facecast.labels.agreement import fleiss_kappa_by_group
from facecast.labels.describe import run_describe
from facecast.labels.rules import DEMO_RULES, evaluate_rules
from facecast.labels.suspects import oof_probabilities, rank_suspects

ATTRS = ["male", "beard", "hair_long", "bald", "glasses", "hat"]


def table(n_ids: int, per_id: int, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    male = (rng.random(n_ids) < 0.5).astype(float)
    bald = male * (rng.random(n_ids) < 0.2)
    rep = np.repeat(np.arange(n_ids), per_id)
    n = rep.size
    return pd.DataFrame({
        "image_id": [f"i{i}" for i in range(n)], "identity": [f"id{i:05d}" for i in rep],
        "split": "test", "label_male": male[rep],
        "label_dark_skin": (rng.random(n_ids) < 0.5).astype(float)[rep],
        "label_beard": (male * (rng.random(n_ids) < 0.4))[rep],
        "label_bald": bald[rep],
        "label_hair_long": ((1 - bald) * (rng.random(n_ids) < 0.5))[rep],
        "label_glasses": (rng.random(n) < 0.4).astype(float),
        "label_hat": (rng.random(n) < 0.15).astype(float)})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--identities", type=int, default=240)
    ap.add_argument("--images", type=int, default=8)
    args = ap.parse_args()
    t = table(args.identities, args.images)
    n = len(t)
    rng = np.random.default_rng(1)
    shapes = rng.normal(0, 2, (n, 68, 2)) + np.linspace(20, 140, 68)[None, :, None]
    t0 = time.perf_counter()
    measurements(shapes)
    t1 = time.perf_counter()
    head_pose(shapes, 160.0)
    t2 = time.perf_counter()
    print(f"{n} shapes: measurements {1e3 * (t1 - t0):.1f} ms, pose (batched PnP) "
          f"{t2 - t1:.2f} s")
    noisy, _ = plant_label_noise(t, DEMO_LABEL_NOISE, 3)
    labels = pd.DataFrame({a: noisy[f"label_noisy_{a}"].to_numpy() for a in ATTRS})
    x = np.concatenate([labels.to_numpy() * 2 - 1 + rng.normal(0, 0.8, labels.shape),
                        rng.normal(0, 1, (n, 58))], axis=1)
    t0 = time.perf_counter()
    probs = oof_probabilities(x, labels, noisy["identity"].to_numpy(), folds=3)
    t1 = time.perf_counter()
    kappas = {a: fleiss_kappa_by_group(labels[a].to_numpy(), noisy["identity"].to_numpy())[0]
              for a in ATTRS}
    flags, _ = evaluate_rules(labels, DEMO_RULES)
    rank_suspects(noisy["image_id"], noisy["identity"], labels, probs, kappas, ATTRS[:4], flags,
                  DEMO_RULES)
    t2 = time.perf_counter()
    print(f"audit core on {n} images x {len(ATTRS)} attributes: out-of-fold model "
          f"{t1 - t0:.2f} s, kappa + rules + cleanlab ranking {t2 - t1:.2f} s")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "attributes.parquet"
        noisy.to_parquet(path)
        t0 = time.perf_counter()
        run_describe(path, Path(tmp) / "d", {"source": "labels", "oracle_prefix": "label_",
                                             "drop_rate": 0.1},
                     {"label_prefix": "label_noisy_", "invariant": ATTRS[:4],
                      "rule_set": "demo"}, seed=1)
        print(f"describe (2 variants, evaluation included): {time.perf_counter() - t0:.2f} s")


if __name__ == "__main__":
    main()
