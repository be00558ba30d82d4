"""`make mutate` (issue 51) covers the modules that compute published figures: every module
listed in tests/mutation/run.py exists, every test file it names exists (run.py skips a
missing one, so a renamed test file would silently leave its mutants untested), every
module has its line in docs/CONTRIBUTING.md's scores and its section in
tests/mutation_survivors.md, and the mutmut section run.py writes mutates that one file
and runs those tests."""

from __future__ import annotations

import importlib.util
import tomllib

from conftest import REPO

_spec = importlib.util.spec_from_file_location("mutation_run",
                                               REPO / "tests" / "mutation" / "run.py")
run = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(run)

#: issue 51's list: evaluate, fairness, mitigation, labels, analysis, compare, slices
LISTED = {"evaluate.metrics", "evaluate.folds", "evaluate.rfw_table", "evaluate.bin_suite",
          "fairness.bias", "fairness.assess", "fairness.threshold",
          "fairness.group_thresholds", "fairness.bfw_table", "fairness.demographics",
          "mitigation.metrics", "mitigation.replicates", "mitigation.methods",
          "mitigation.calibrate", "labels.estimators", "labels.estimators_stats",
          "analysis.cast_filters", "analysis.filtering", "analysis.mining", "compare.paired",
          "slices.testing", "slices.findings"}


def test_every_listed_module_and_its_tests_exist():
    assert set(run.MODULES) == LISTED
    for module, tests in run.MODULES.items():
        assert (REPO / run.module_path(module)).is_file(), module
        assert tests, module
        for t in tests:
            assert (REPO / t).is_file(), f"{module}: {t} does not exist"
        assert len(set(tests)) == len(tests), module


def test_every_module_has_a_score_and_a_survivors_section():
    contributing = (REPO / "docs" / "CONTRIBUTING.md").read_text()
    survivors = (REPO / "tests" / "mutation_survivors.md").read_text()
    for module in run.MODULES:
        assert f"\n| {module} | " in contributing, module
        assert f"\n## {module}\n" in survivors, module


def test_the_mutmut_section_mutates_one_file_and_runs_its_tests():
    text = run.mutmut_section("fairness.demographics", run.MODULES["fairness.demographics"],
                              ("tests/test_demographics.py::test_x",))
    cfg = tomllib.loads(text)["tool"]["mutmut"]
    assert cfg["only_mutate"] == ["src/facecast/fairness/demographics.py"]
    assert cfg["source_paths"] == ["src"] and cfg["use_git_change_detection"] is False
    sel = cfg["pytest_add_cli_args_test_selection"]
    assert sel == ["tests/test_mutation_demographics.py", "tests/test_demographics.py",
                   "-k", run.NOT_UNIT, "--deselect", "tests/test_demographics.py::test_x"]
    assert set(cfg["also_copy"]) == set(run.TREE)
