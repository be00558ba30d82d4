"""Benchmark: SVI fit of the covariate model (stage covariates) on many synthetic pairs.

Quick by default (100,000 pairs); ``--full`` runs the issue's size, 1,000,000 pairs (half
match, half non-match) with 3 covariates. Prints, per class, the time to converge (relative
ELBO change < 1e-3 over the last 10 % of steps, see facecast.covariates.infer.converged),
the total fit time, and the peak memory (process RSS; CUDA: peak allocated).
Goal (issue 13): under 10 minutes and 4 GB on 2 CPU cores; under 1 minute with --device cuda.

    python benchmarks/covariate_fit.py [--full] [--device cuda] [--steps 3000] [--threads 1]
"""

from __future__ import annotations

import argparse
import resource
import sys
import time

import numpy as np
import torch

from facecast.covariates.basis import build_basis
from facecast.covariates.infer import fit_class
from facecast.covariates.synthetic import sample_class


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=100_000, help="pairs in all (both classes)")
    ap.add_argument("--full", action="store_true", help="1,000,000 pairs")
    ap.add_argument("--covariates", type=int, default=3)
    ap.add_argument("--grid", type=int, default=4)
    ap.add_argument("--components", type=int, default=2)
    ap.add_argument("--steps", type=int, default=3000)
    ap.add_argument("--batch-size", type=int, default=2048)
    ap.add_argument("--draws", type=int, default=200)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--threads", type=int, default=1,
                    help="torch threads; SVI minibatch ops are small: 1 is fastest on 2 cores")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    n = 1_000_000 if args.full else args.pairs
    torch.set_num_threads(args.threads)
    rng = np.random.default_rng(args.seed)
    print(f"pairs {n:,} ({n // 2:,} per class), covariates {args.covariates}, grid "
          f"{args.grid}, H {args.components}, steps {args.steps}, batch {args.batch_size}, "
          f"device {args.device}, threads {args.threads}")
    t_all = time.perf_counter()
    for k, cls in enumerate(("match", "nonmatch")):
        x, y = sample_class(n // 2, cls, rng, n_covariates=args.covariates)
        t0 = time.perf_counter()
        basis = build_basis(x, args.grid, 1.0, seed=args.seed)
        t_basis = time.perf_counter() - t0
        _, info = fit_class(x, y, n_components=args.components, basis=basis,
                            cfg={"steps": args.steps, "batch_size": args.batch_size,
                                 "draws": args.draws, "device": args.device},
                            seed=args.seed + k, label=cls)
        conv = (f"{info['seconds_to_converge']:.1f} s (step {info['converged_at_step']})"
                if info["converged_at_step"] else "not converged")
        print(f"{cls}: {basis.n_basis} basis functions (built in {t_basis:.1f} s); converged "
              f"after {conv}; fit + {args.draws} draws {info['seconds']:.1f} s; final "
              f"relative ELBO change {info['elbo_relative_change']:.2g}", flush=True)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 ** 2
    print(f"total {time.perf_counter() - t_all:.1f} s; peak RSS {peak:.2f} GB")
    if args.device.startswith("cuda"):
        print(f"peak CUDA allocated {torch.cuda.max_memory_allocated() / 1024 ** 3:.2f} GB")


if __name__ == "__main__":
    sys.exit(main())
