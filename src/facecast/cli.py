"""The ``facecast`` console script."""

from __future__ import annotations

import argparse
import sys

from facecast import __version__


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="facecast", description=__doc__)
    parser.add_argument("--version", action="version", version=f"facecast {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    p_inspect = sub.add_parser("inspect", help="describe a Parquet artifact or a folder of shards")
    p_inspect.add_argument("path")
    p_inspect.add_argument("--rows", type=int, default=1000,
                           help="rows summarised: the first ROWS, or ROWS at random (--random)")
    p_inspect.add_argument("--head", type=int, default=5, help="rows shown")
    p_inspect.add_argument("--random", type=int, metavar="SEED", default=None,
                           help="draw the rows uniformly at random with this seed")
    p_slices = sub.add_parser(
        "slices", help="find the attribute slices where a model errs most (any scored pairs)",
        description="Slice discovery on scored pairs: writes slices.parquet/.csv, "
                    "discovered.yaml, search.json, report.html and figures into --out.")
    p_slices.add_argument("--pairs", required=True,
                          help="Parquet: image_a, image_b, label (1 genuine / 0 impostor), "
                               "score, optional identity_a, identity_b")
    p_slices.add_argument("--attributes", required=True,
                          help="Parquet: image_id + attribute columns (optional status, "
                               "exclude select the pool as benchmarks do)")
    p_slices.add_argument("--out", required=True, help="output folder")
    p_slices.add_argument("--fdr", type=float, default=0.05, help="false-discovery rate")
    p_slices.add_argument("--fdr-method", choices=["bh", "by"], default="bh")
    p_slices.add_argument("--error", choices=["fnmr", "fmr"], default="fnmr")
    p_slices.add_argument("--policy", choices=["fmr", "eer"], default="fmr",
                          help="the one global threshold: at an FMR, or the EER")
    p_slices.add_argument("--fmr", type=float, default=1e-3, help="FMR of --policy fmr")
    p_slices.add_argument("--max-depth", type=int, choices=[1, 2, 3], default=2)
    p_slices.add_argument("--columns", nargs="*", default=[], help="fnmatch patterns")
    p_slices.add_argument("--exclude", nargs="*", default=[], help="fnmatch patterns")
    p_slices.add_argument("--n-boot", type=int, default=1000)
    p_slices.add_argument("--seed", type=int, default=0)
    p_slices.add_argument("--name", default="model", help="model name in the outputs")
    args = parser.parse_args(argv)
    if args.command == "slices":
        import logging

        from facecast.slices.stage import run_slices

        logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
        cfg = {"fdr": args.fdr, "fdr_method": args.fdr_method, "error": args.error,
               "threshold": {"policy": args.policy, "value": args.fmr},
               "max_depth": args.max_depth, "columns": args.columns,
               "exclude": args.exclude, "n_boot": args.n_boot}
        if not 0 < args.fdr < 1 or not 0 < args.fmr < 1 or args.n_boot < 2:
            parser.exit(2, "facecast slices: --fdr and --fmr lie in (0, 1); --n-boot >= 2\n")
        try:
            table = run_slices(args.pairs, args.attributes, args.out, cfg, model=args.name,
                               protocol="pairs", seed=args.seed)
        except (FileNotFoundError, KeyError, ValueError) as exc:
            parser.exit(2, f"facecast slices: {exc}\n")
        top = table[table["rank"].notna()]
        sys.stdout.write(f"{int(table['significant'].sum())} significant slices of "
                         f"{len(table)}; outputs in {args.out}\n")
        for row in top.head(10).itertuples(index=False):
            sys.stdout.write(f"{int(row.rank):3d}. {row.slice}: {row.error_rate:.4g} vs "
                             f"{row.rest_rate:.4g} (q = {row.q:.3g})\n")
        return 0
    if args.command == "inspect":
        from facecast.io.inspect import describe

        try:
            sys.stdout.write(describe(args.path, sample_rows=args.rows, head=args.head,
                                      random_seed=args.random))
        except FileNotFoundError as exc:
            parser.exit(2, f"facecast inspect: {exc}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
