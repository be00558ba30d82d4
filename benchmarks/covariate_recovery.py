"""Benchmark: recovery and interval coverage of the covariate model on known truth.

Repeats :func:`facecast.covariates.synthetic.recovery_trial` (5,000 pairs per class, the
issue's two-component covariate-dependent mixtures) on ``--repeats`` data sets (default 20,
the issue's check; the unit test runs fewer) and prints, at the five fixed covariate points,
the largest |posterior mean - truth| of FNMR at FMR = 1e-2 per data set and the share of
(data set, point) cases whose 90 % interval covers the truth (goal: >= 75 % for SVI).

    python benchmarks/covariate_recovery.py [--repeats 20] [--steps 1500] [--threads 1]
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np
import torch

from facecast.covariates.synthetic import recovery_trial


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--pairs", type=int, default=5000, help="pairs per class")
    ap.add_argument("--steps", type=int, default=1500)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    hits, errors = [], []
    for seed in range(args.repeats):
        t0 = time.perf_counter()
        r = recovery_trial(seed, args.pairs, 1e-2, {"steps": args.steps})
        hit = (r["q05"] <= r["truth"]) & (r["truth"] <= r["q95"])
        hits.append(hit)
        errors.append(float(np.max(np.abs(r["mean"] - r["truth"]))))
        print(f"data set {seed}: max |mean - truth| {errors[-1]:.3f}, covered {hit.sum()}/5, "
              f"{time.perf_counter() - t0:.0f} s", flush=True)
    print(f"coverage of 90 % intervals: {np.mean(hits):.1%} of {np.size(hits)} cases; "
          f"max error <= 0.07 in {np.mean(np.array(errors) <= 0.07):.0%} of data sets")


if __name__ == "__main__":
    sys.exit(main())
