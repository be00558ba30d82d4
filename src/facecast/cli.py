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
        description="Slice discovery on scored pairs (FNMR and FMR): prints the findings "
                    "and the top slices; writes findings.parquet/.csv, slices.parquet/.csv, "
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
    p_slices.add_argument("--error-types", nargs="+", choices=["fnmr", "fmr"],
                          default=["fnmr", "fmr"], help="error types searched (one family)")
    p_slices.add_argument("--pair", choices=["both", "either"], default=None,
                          help="a pair is in a slice when both / either of its images "
                               "satisfy it (default: either for FNMR, both for FMR)")
    p_slices.add_argument("--policy", choices=["fmr", "eer"], default="fmr",
                          help="the one global threshold: at an FMR (the EER where the "
                               "impostors cannot resolve it), or the EER")
    p_slices.add_argument("--fmr", type=float, default=1e-3, help="FMR of --policy fmr")
    p_slices.add_argument("--max-depth", type=int, choices=[1, 2, 3], default=2)
    p_slices.add_argument("--columns", nargs="*", default=[], help="fnmatch patterns")
    p_slices.add_argument("--exclude", nargs="*", default=[], help="fnmatch patterns")
    p_slices.add_argument("--n-boot", type=int, default=1000)
    p_slices.add_argument("--seed", type=int, default=0)
    p_slices.add_argument("--name", default="model", help="model name in the outputs")
    p_slices.add_argument("--failed", choices=["nonmatch", "drop"], default="nonmatch",
                          help="a pair without a feature (status not ok or no score): nonmatch "
                        "(ISO/IEC 19795-1 generalized rates, score -inf) or drop (left out); "
                        "evaluate.failed")
    _compare_parser(sub)
    args = parser.parse_args(argv)
    if args.command == "compare":
        return _compare(parser, args)
    if args.command == "slices":
        import logging

        from facecast.slices.report import terminal_report
        from facecast.slices.stage import run_slices

        logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
        cfg = {"fdr": args.fdr, "fdr_method": args.fdr_method,
               "error_types": list(dict.fromkeys(args.error_types)),
               "threshold": {"policy": args.policy, "value": args.fmr},
               "max_depth": args.max_depth, "columns": args.columns,
               "exclude": args.exclude, "n_boot": args.n_boot,
               **({"pair": args.pair} if args.pair else {})}
        if not 0 < args.fdr < 1 or not 0 < args.fmr < 1 or args.n_boot < 2:
            parser.exit(2, "facecast slices: --fdr and --fmr lie in (0, 1); --n-boot >= 2\n")
        try:
            result = run_slices(args.pairs, args.attributes, args.out, cfg,
                                model=args.name, protocol="pairs", seed=args.seed,
                                accuracy={"failed": args.failed})
        except (FileNotFoundError, KeyError, ValueError) as exc:
            parser.exit(2, f"facecast slices: {exc}\n")
        sys.stdout.write(terminal_report(result) + f"\noutputs in {args.out}\n")
        return 0
    if args.command == "inspect":
        from facecast.io.inspect import describe

        try:
            sys.stdout.write(describe(args.path, sample_rows=args.rows, head=args.head,
                                      random_seed=args.random))
        except FileNotFoundError as exc:
            parser.exit(2, f"facecast inspect: {exc}\n")
    return 0


def _compare_parser(sub: argparse._SubParsersAction) -> None:
    """The ``compare`` subcommand's options (defaults: the schema's compare/evaluate)."""
    p = sub.add_parser(
        "compare", help="compare two or more models' scores on the same pairs (any files)",
        description="Paired model comparison: identity-clustered paired bootstrap, Holm "
                    "across every test; writes differences.parquet/.csv, "
                    "leaderboard.parquet/.csv/.md and report.html into --out.")
    p.add_argument("--scores", nargs="+", required=True, metavar="NAME=PATH",
                   help="one Parquet file per model: image_a, image_b, label (1 genuine / "
                        "0 impostor), score; optional identity_a, identity_b, fold, "
                        "benchmark")
    p.add_argument("--out", required=True, help="output folder")
    p.add_argument("--fars", type=float, nargs="*", default=[1e-3, 1e-4],
                   help="TAR@FAR targets")
    p.add_argument("--fmr", type=float, default=1e-3, help="shared FMR of the FNMR row")
    p.add_argument("--n-boot", type=int, default=1000)
    p.add_argument("--confidence", type=float, default=0.95)
    p.add_argument("--alpha", type=float, default=0.05, help="family-wise level (Holm)")
    p.add_argument("--thresholds", choices=["insightface", "exact"], default="insightface",
                   help="threshold grid of the 10-fold accuracy")
    p.add_argument("--n-folds", type=int, default=10,
                   help="folds dealt when a file has fewer than two fold names")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--failed", choices=["nonmatch", "drop"], default="nonmatch",
                   help="a pair without a feature (status not ok or no score): nonmatch "
                        "(ISO/IEC 19795-1 generalized rates, score -inf) or drop (left out); "
                        "evaluate.failed")


def _compare(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    """Run ``facecast compare``; print the leaderboard; exit 2 on bad input."""
    import logging

    from facecast.compare.stage import compare_files

    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    named = dict(item.split("=", 1) for item in args.scores if "=" in item)
    if len(named) != len(args.scores) or "" in named:
        parser.exit(2, "facecast compare: --scores takes NAME=PATH, one distinct NAME each\n")
    if not (0 < args.fmr < 1 and all(0 < f < 1 for f in args.fars)
            and 0 < args.alpha < 1 and 0 < args.confidence < 1) or args.n_boot < 2:
        parser.exit(2, "facecast compare: --fmr, --fars, --alpha, --confidence lie in "
                       "(0, 1); --n-boot >= 2\n")
    cfg = {"fmr": args.fmr, "n_boot": args.n_boot, "confidence": args.confidence,
           "alpha": args.alpha}
    accuracy = {"thresholds": args.thresholds, "n_folds": args.n_folds, "seed": args.seed,
                "failed": args.failed}
    try:
        diff = compare_files(named, args.out, cfg, fars=args.fars, seed=args.seed,
                             accuracy=accuracy)
    except (FileNotFoundError, KeyError, ValueError) as exc:
        parser.exit(2, f"facecast compare: {exc}\n")
    tested = diff["p"].notna()
    sys.stdout.write(f"{int(tested.sum())} tests, {int(diff['significant'].sum())} "
                     f"significant (Holm across all, alpha {args.alpha:g}); outputs in "
                     f"{args.out}\n")
    for row in diff[diff["metric"] == "accuracy"].itertuples(index=False):
        sys.stdout.write(f"{row.benchmark}: {row.model_a} - {row.model_b} accuracy "
                         f"{row.difference:+.4f}: {row.verdict}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
