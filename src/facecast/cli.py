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
    args = parser.parse_args(argv)
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
