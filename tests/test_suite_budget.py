"""tests/suite_budget.py: seconds per test file from pytest's JUnit XML against the budget
table of docs/CONTRIBUTING.md (issue 49)."""

from __future__ import annotations

from pathlib import Path

import suite_budget

JUNIT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" tests="4" time="31.5">
<testcase classname="tests.test_a" name="test_one" time="10.25"/>
<testcase classname="tests.test_a" name="test_two[x]" time="2.5"/>
<testcase classname="tests.test_b.TestGroup" name="test_three" time="7.0"/>
<testcase classname="tests.test_c" name="test_four" time="0.75"/>
</testsuite></testsuites>
"""

TABLE = """# notes
<!-- suite-budget:start -->
| test file | seconds |
|---|---|
| `tests/test_a.py` | 12 |
| any other file | 5 |
<!-- suite-budget:end -->
"""


def test_seconds_are_summed_per_file_classes_included(tmp_path: Path) -> None:
    junit = tmp_path / "suite.xml"
    junit.write_text(JUNIT)
    seconds, wall = suite_budget.file_seconds(junit)
    assert seconds == {"tests/test_a.py": 12.75, "tests/test_b.py": 7.0,
                       "tests/test_c.py": 0.75}
    assert wall == 31.5


def test_files_over_their_budget_or_the_default_are_reported(tmp_path: Path, capsys) -> None:
    md = tmp_path / "CONTRIBUTING.md"
    md.write_text(TABLE)
    budgets = suite_budget.read_budgets(md)
    assert budgets == {"tests/test_a.py": 12, "any other file": 5}
    over = suite_budget.report({"tests/test_a.py": 12.75, "tests/test_b.py": 7.0,
                                "tests/test_c.py": 0.75}, 31.5, budgets, top=2)
    assert over == ["OVER BUDGET tests/test_a.py: 12.8 s > 12 s",
                    "OVER BUDGET tests/test_b.py: 7.0 s > 5 s"]
    out = capsys.readouterr().out
    assert "test files 3, test seconds 20 (all workers), suite wall 32 s" in out
    assert "tests/test_c.py" not in out  # --top 2


def test_the_repository_table_has_a_budget_for_every_other_file() -> None:
    budgets = suite_budget.read_budgets()
    assert budgets[suite_budget.OTHER] > 0
    assert all(name.startswith("tests/test_") and (Path(suite_budget.REPO) / name).is_file()
               for name in budgets if name != suite_budget.OTHER)
