"""Benchmark: recovery and interval coverage of the covariate model on known truth.

Repeats :func:`facecast.covariates.synthetic.recovery_trial` (5,000 pairs per class, the
issue's two-component covariate-dependent mixtures) on ``--repeats`` data sets (default 20,
the issue's check; the unit test runs fewer) and prints, at the five fixed covariate points,
the largest |posterior mean - truth| of FNMR at FMR = 1e-2 per data set and the share of
(data set, point) cases whose 90 % interval covers the truth (goal: >= 75 % for SVI).
``--nuts`` runs the small reference case instead
(:func:`facecast.covariates.synthetic.small_case_trial`: one covariate, one component per
class, 300 pairs per class, NUTS; goal: >= 85 % coverage).

    python benchmarks/covariate_recovery.py [--repeats 20] [--steps 1500] [--threads 1]
    python benchmarks/covariate_recovery.py --nuts [--repeats 20]
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np
import torch

from facecast.covariates.synthetic import recovery_trial, small_case_trial


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--pairs", type=int, default=5000, help="pairs per class")
    ap.add_argument("--steps", type=int, default=1500)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--nuts", action="store_true",
                    help="the small reference case with NUTS (300 pairs per class)")
    ap.add_argument("--linear", action="store_true",
                    help="add the global linear term (covariates.linear: true)")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    hits, errors = [], []
    goal = 0.85 if args.nuts else 0.75
    for seed in range(args.repeats):
        t0 = time.perf_counter()
        if args.nuts:
            r = small_case_trial(seed, cfg={"linear": args.linear})
        else:
            r = recovery_trial(seed, args.pairs, 1e-2, {"steps": args.steps,
                                                        "linear": args.linear})
        hit = (r["q05"] <= r["truth"]) & (r["truth"] <= r["q95"])
        hits.append(hit)
        errors.append(float(np.max(np.abs(r["mean"] - r["truth"]))))
        print(f"data set {seed}: max |mean - truth| {errors[-1]:.3f}, covered "
              f"{hit.sum()}/{hit.size}, "
              f"{time.perf_counter() - t0:.0f} s", flush=True)
    print(f"coverage of 90 % intervals: {np.mean(hits):.1%} of {np.size(hits)} cases "
          f"(goal >= {goal:.0%}); max error <= 0.07 in "
          f"{np.mean(np.array(errors) <= 0.07):.0%} of data sets, median max error "
          f"{np.median(errors):.3f}")


if __name__ == "__main__":
    sys.exit(main())
