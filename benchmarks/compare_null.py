"""Level and coverage of compare's tests when errors cluster by identity (issue 32).

Many simulated benchmarks (:mod:`facecast.compare.simulate`) on which two models are
equally good in expectation, but each model's scores carry identity random effects. For
each test: the share of benchmarks where its raw p rejects "A = B" at 5 % (should be at
most ~5 %) and the share of its 95 % intervals that cover 0 (should be ~95 %), per metric.
Methods: ``t`` (what the stage uses: identity-clustered paired bootstrap, Wald with the
G/(G-1)-corrected SE and t(G-1)), ``normal`` (the same, normal reference), ``percentile``
(percentile interval, p from the replicates' shares either side of 0) and ``mcnemar``
(the exact McNemar test on the accept decisions at the shared FMR, unclustered: the test
the stage used to report).

Scenarios: ``issue`` (40 identities x 6 images, 600 genuine + 600 impostor pairs, as in
the issue), ``few`` (12 identities), ``strong`` (stronger identity effects) and ``pairs``
(no identity effects: pair-level noise only).

Usage: python benchmarks/compare_null.py          (quick: 150 benchmarks per scenario)
       python benchmarks/compare_null.py --full   (1,000 per scenario, 1,000 replicates)
"""

from __future__ import annotations

import argparse
import time

import pandas as pd

from facecast.compare.simulate import NullDesign, level_study, summarise

SCENARIOS = {
    "issue": NullDesign(),
    "few": NullDesign(n_identities=12, n_impostor=300),
    "strong": NullDesign(identity_sd=0.12, impostor_identity_sd=0.06, noise_sd=0.02),
    "pairs": NullDesign(identity_sd=0.0, impostor_identity_sd=0.0, noise_sd=0.06),
}


def main(argv: list[str] | None = None) -> pd.DataFrame:
    """Run every scenario; print and return the summary table."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--full", action="store_true", help="1,000 benchmarks, 1,000 replicates")
    ap.add_argument("--sims", type=int, default=None, help="benchmarks per scenario")
    ap.add_argument("--n-boot", type=int, default=None)
    ap.add_argument("--scenarios", nargs="*", default=list(SCENARIOS), choices=list(SCENARIOS))
    args = ap.parse_args(argv)
    sims = args.sims or (1000 if args.full else 150)
    n_boot = args.n_boot or (1000 if args.full else 200)
    out = []
    for name in args.scenarios:
        t0 = time.perf_counter()
        study = level_study(sims, seed=11, n_boot=n_boot, fars=(1e-2,), fmr=1e-2,
                            methods=("t", "normal", "percentile"), design=SCENARIOS[name])
        table = summarise(study).assign(scenario=name)
        out.append(table)
        print(f"== {name}: {sims} benchmarks, {n_boot} replicates, "
              f"{time.perf_counter() - t0:.0f} s")
        show = table.assign(rejected=[f"{100 * r:.1f} % +- {100 * s:.1f}" for r, s in
                                      zip(table["rejected"], table["rejected_se"],
                                          strict=True)],
                            covered=[("-" if pd.isna(c) else f"{100 * c:.1f} %")
                                     for c in table["covered"]])
        print(show[["method", "metric", "rejected", "covered"]].to_string(index=False))
    return pd.concat(out, ignore_index=True)


if __name__ == "__main__":
    main()
