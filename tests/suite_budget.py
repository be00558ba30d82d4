"""Seconds per test file against the budgets in docs/CONTRIBUTING.md (issue 49).

``make test`` writes pytest's JUnit XML (``build/suite.xml``) and runs this script on it:
it prints each test file's seconds (its tests' setup + call + teardown; a shared run's
setup counts in the file whose test made it first), the total, and every file over its
budget in the table between ``<!-- suite-budget:start -->`` and ``<!-- suite-budget:end -->``
of docs/CONTRIBUTING.md (a file not in the table has the ``any other file`` budget). It
only reports: timings vary between machines, so an overrun is a warning to act on (move
the work into a shared run), never a failed suite.

    python tests/suite_budget.py build/suite.xml [--top 30]
"""

from __future__ import annotations

import argparse
import re
import sys
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CONTRIBUTING = REPO / "docs" / "CONTRIBUTING.md"
START, END = "<!-- suite-budget:start -->", "<!-- suite-budget:end -->"
#: the table row that holds the budget of every file not named
OTHER = "any other file"
ROW = re.compile(r"^\|\s*`?([^|`]+?)`?\s*\|\s*(\d+)\s*\|")


def read_budgets(path: Path = CONTRIBUTING) -> dict[str, int]:
    """``file -> seconds`` from the budget table (``OTHER`` for the rest)."""
    text = path.read_text(encoding="utf-8")
    if START not in text or END not in text:
        raise SystemExit(f"{path}: no budget table between {START} and {END}")
    block = text.split(START, 1)[1].split(END, 1)[0]
    budgets = {m.group(1).strip(): int(m.group(2)) for m in map(ROW.match, block.splitlines())
               if m}
    if OTHER not in budgets:
        raise SystemExit(f"{path}: the budget table has no '{OTHER}' row")
    return budgets


def file_of(classname: str, name: str) -> str:
    """``tests/test_x.py`` of a JUnit test case (pytest's classname is the dotted module
    path, ``tests.test_x``, then the class, if any)."""
    parts = classname.split(".")
    for k, part in enumerate(parts):
        if part.startswith("test_"):
            return "/".join([*parts[:k], part]) + ".py"
    return f"{classname} ({name})"


def file_seconds(junit: Path) -> tuple[dict[str, float], float | None]:
    """Seconds per test file and the suite's wall time (the testsuite's ``time``)."""
    root = ET.parse(junit).getroot()
    suites = [root] if root.tag == "testsuite" else list(root.iter("testsuite"))
    seconds: dict[str, float] = defaultdict(float)
    for case in root.iter("testcase"):
        seconds[file_of(case.get("classname", ""), case.get("name", ""))] += float(
            case.get("time", 0.0))
    wall = sum(float(s.get("time", 0.0)) for s in suites) if suites else None
    return dict(seconds), wall


def report(seconds: dict[str, float], wall: float | None, budgets: dict[str, int],
           top: int) -> list[str]:
    """Print the figures; return the over-budget lines."""
    total = sum(seconds.values())
    print(f"test files {len(seconds)}, test seconds {total:,.0f} (all workers)"
          + (f", suite wall {wall:,.0f} s" if wall else ""))
    over = []
    for name, sec in sorted(seconds.items(), key=lambda kv: -kv[1]):
        budget = budgets.get(name, budgets[OTHER])
        if sec > budget:
            over.append(f"OVER BUDGET {name}: {sec:.1f} s > {budget} s")  # 65.4 > 65
    print(f"{'file':<52}{'seconds':>9}{'budget':>8}")
    for name, sec in sorted(seconds.items(), key=lambda kv: -kv[1])[:top]:
        print(f"{name:<52}{sec:>9.0f}{budgets.get(name, budgets[OTHER]):>8}")
    for line in over:
        print(line)
    return over


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("junit", type=Path)
    ap.add_argument("--top", type=int, default=30)
    args = ap.parse_args(argv)
    if not args.junit.is_file():
        print(f"no {args.junit}: nothing to report", file=sys.stderr)
        return 0
    seconds, wall = file_seconds(args.junit)
    report(seconds, wall, read_budgets(), args.top)
    return 0


if __name__ == "__main__":
    sys.exit(main())
