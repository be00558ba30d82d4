"""`make mutate`: mutation testing of the modules that compute published figures (issue 51).

Each module runs on its own: mutmut (3.x) mutates that one file and runs only the tests
listed for it in :data:`MODULES`, one worker by default, so a run fits a working session on
two cores. mutmut reads its settings from ``pyproject.toml`` in its working directory, so
each module gets a folder ``mutants/<module>/`` (git-ignored) holding links to the tree and
a ``pyproject.toml`` that is ours plus a generated ``[tool.mutmut]`` section; mutmut writes
its mutated copy under ``mutants/<module>/mutants/``.

    python tests/mutation/run.py                       # every module, one after another
    python tests/mutation/run.py evaluate.folds compare.paired
    python tests/mutation/run.py --list                # the modules and their tests
    python tests/mutation/run.py --resume evaluate.folds   # keep mutmut's finished results

Each module prints ``killed / total`` and every mutant that was not killed (``mutmut show
<name>`` in its folder prints the diff). The score is killed (timeouts included: a mutant
that hangs the tests is caught) over all mutants; "no tests" counts as not killed.
Survivors are either killed by a new test or listed in ``tests/mutation_survivors.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
WORK = REPO / "mutants"
#: What the tests read besides src/ and tests/ (conftest's REPO is the mutated copy's root).
TREE = ("config.yaml", "config", "workflow", "Snakefile", "scripts", "benchmarks", "docs",
        "profiles", "envs", "README.md")
#: Tests that start Snakemake or a demo run: no mutant reaches them in-process.
#: (-k matches file names too: "demo" alone would drop every test of test_demographics.py)
NOT_UNIT = ("not workflow and not (demo and not demographics) and not dag "
            "and not snakemake")

#: mutmut's statuses that count as caught (a mutant that hangs the tests is caught)
KILLED = ("killed", "timeout", "caught by type check")

#: module (under facecast.) -> its own test files (a `-k` filter may follow after `|`).
MODULES: dict[str, tuple[str, ...]] = {
    "evaluate.metrics": ("tests/test_mutation_metrics.py", "tests/test_evaluate_metrics.py",
                         "tests/test_evaluate_honest.py"),
    "evaluate.folds": ("tests/test_mutation_folds.py", "tests/test_evaluate_metrics.py",
                       "tests/test_evaluate_honest.py", "tests/test_evaluate_protocols.py",
                       "tests/test_one_rule.py"),
    "evaluate.rfw_table": ("tests/test_mutation_rfw_table.py", "tests/test_rfw.py"),
    "evaluate.bin_suite": ("tests/test_mutation_bin_suite.py", "tests/test_cc11.py"),
    "fairness.bias": ("tests/test_mutation_bias.py", "tests/test_fairness_bias.py",
                      "tests/test_fairness_bootstrap.py", "tests/test_fairness_min_groups.py"),
    "fairness.assess": ("tests/test_mutation_assess.py", "tests/test_mutation_assess_run.py",
                        "tests/test_fairness_threshold.py",
                        "tests/test_fairness_bias.py", "tests/test_fairness_race.py"),
    "fairness.threshold": ("tests/test_mutation_threshold.py", "tests/test_fairness_threshold.py",
                           "tests/test_evaluate_honest.py", "tests/test_fairness_bootstrap.py"),
    "fairness.group_thresholds": ("tests/test_mutation_group_thresholds.py", "tests/test_bfw.py",
                                  "tests/test_demographics.py", "tests/test_mutation_bfw.py"),
    "fairness.bfw_table": ("tests/test_mutation_bfw_table.py", "tests/test_bfw.py",
                           "tests/test_mutation_bfw.py"),
    "fairness.demographics": ("tests/test_mutation_demographics.py",
                              "tests/test_demographics.py"),
    "mitigation.metrics": ("tests/test_mutation_mitigation.py",
                           "tests/test_mitigation_bootstrap.py", "tests/test_mitigation.py"),
    "mitigation.replicates": ("tests/test_mutation_mitigation.py",
                              "tests/test_mitigation_bootstrap.py"),
    "mitigation.methods": ("tests/test_mutation_methods.py", "tests/test_mitigation.py",
                           "tests/test_mitigation_auto.py"),
    "mitigation.calibrate": ("tests/test_mutation_calibrate.py", "tests/test_mitigation.py",
                             "tests/test_mitigation_reference.py",
                             "tests/test_mitigation_crossfit.py"),
    "labels.estimators": ("tests/test_mutation_estimators.py", "tests/test_estimators.py",
                          "tests/test_estimators_strata.py", "tests/test_estimator_imports.py"),
    "labels.estimators_stats": ("tests/test_mutation_estimators_stats.py",
                                "tests/test_estimators.py", "tests/test_estimators_strata.py"),
    "analysis.cast_filters": ("tests/test_mutation_cast_filters.py",
                              "tests/test_cast_filters_reference.py",
                              "tests/test_cast_float32_and_nan_rows.py",
                              "tests/test_cast_arrays.py"),
    "analysis.filtering": ("tests/test_mutation_filtering.py", "tests/test_analysis_filtering.py",
                           "tests/test_cast_filters_reference.py",
                           "tests/test_cast_float32_and_nan_rows.py"),
    "analysis.mining": ("tests/test_mutation_mining.py", "tests/test_analysis_mining.py",
                        "tests/test_analysis_exhaustive.py"),
    "compare.paired": ("tests/test_mutation_paired.py", "tests/test_compare.py"),
    "slices.testing": ("tests/test_mutation_slices_testing.py", "tests/test_slices.py",
                       "tests/test_slices_null.py"),
    "slices.findings": ("tests/test_mutation_slices_findings.py", "tests/test_slices.py",
                        "tests/test_slices_null.py"),
}


def module_path(module: str) -> str:
    """``evaluate.folds`` -> ``src/facecast/evaluate/folds.py`` (relative to the repo)."""
    return "src/facecast/" + module.replace(".", "/") + ".py"


def mutmut_section(module: str, tests: tuple[str, ...], deselect: tuple[str, ...] = ()) -> str:
    """The ``[tool.mutmut]`` table for one module: mutate that file, run those tests."""
    present = [t for t in tests if (REPO / t).exists()]
    selection = present + ["-k", NOT_UNIT] + [a for d in deselect for a in ("--deselect", d)]
    lines = ["", "[tool.mutmut]",
             'source_paths = ["src"]',
             f"only_mutate = {json.dumps([module_path(module)])}",
             f"pytest_add_cli_args_test_selection = {json.dumps(selection)}",
             'pytest_add_cli_args = ["-p", "no:cacheprovider"]',
             f"also_copy = {json.dumps(list(TREE))}",
             "use_git_change_detection = false", ""]
    return "\n".join(lines)


def failing_tests(module: str) -> tuple[str, ...]:
    """The module's selected tests that fail on the unmutated tree (mutmut refuses to start
    while one does): they are left out of the run and named in its output."""
    tests = [t for t in MODULES[module] if (REPO / t).exists()]
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "-rf", *tests, "-k", NOT_UNIT], cwd=REPO,
                          capture_output=True, text=True)
    return tuple(line.split()[1] for line in proc.stdout.splitlines()
                 if line.startswith("FAILED "))


def prepare(module: str, resume: bool, deselect: tuple[str, ...] = ()) -> Path:
    """Make ``mutants/<module>/``: links to the tree and the module's pyproject.toml."""
    work = WORK / module
    if not resume and (work / "mutants").exists():
        shutil.rmtree(work / "mutants")
    work.mkdir(parents=True, exist_ok=True)
    for name in ("src", "tests", *TREE):
        link = work / name
        if (REPO / name).exists() and not link.is_symlink():
            link.symlink_to(REPO / name)
    text = (REPO / "pyproject.toml").read_text()
    assert "[tool.mutmut]" not in text, "pyproject.toml has its own [tool.mutmut]"
    (work / "pyproject.toml").write_text(text + mutmut_section(module, MODULES[module], deselect))
    return work


def statuses(work: Path, module: str) -> dict[str, str]:
    """mutant name -> mutmut's status, read from mutmut's record of the mutated file."""
    from mutmut.stats import status_by_exit_code

    meta = work / "mutants" / (module_path(module) + ".meta")
    if not meta.exists():
        return {}
    codes = json.loads(meta.read_text())["exit_code_by_key"]
    return {name: status_by_exit_code[code] for name, code in codes.items()}


def run_module(module: str, jobs: int, resume: bool,
               deselect: tuple[str, ...] = ()) -> tuple[int, int, list[str]]:
    """Run mutmut on one module; return (killed, total, lines for what was not killed)."""
    failing = failing_tests(module)
    if failing:
        print(f"{module}: {len(failing)} test(s) fail on the unmutated tree and are left out:"
              f" {' '.join(failing)}", flush=True)
    work = prepare(module, resume, deselect + failing)
    # --resume: test again only what the last run did not kill (new tests join mutmut's
    # record of which test runs which function first)
    before = statuses(work, module)
    again = [name for name, s in before.items() if s not in KILLED]
    if resume:
        # mutmut's record of which test reaches which function predates the tests edited
        # since: without it mutmut maps them again, so an edited test reaches its mutants
        (work / "mutants" / "mutmut-stats.json").unlink(missing_ok=True)
        # mutmut copies tests/ into its tree once and keeps a file it finds there: without
        # this, an edited test file would run in its old version
        shutil.rmtree(work / "mutants" / "tests", ignore_errors=True)
    mutmut = Path(sys.executable).parent / "mutmut"
    # mutmut forks a worker per mutant from a process that has imported the tests; torch's
    # OpenMP pool does not survive a fork (the analysis.mining mutants died with SIGSEGV,
    # which mutmut does not count as killed), so one OpenMP thread
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "OMP_NUM_THREADS": "1"}
    start = time.monotonic()
    proc = subprocess.run([str(mutmut), "run", "--max-children", str(jobs), *again], cwd=work,
                          env=env, capture_output=True, text=True)
    # a changed test selection makes mutmut forget every verdict; one that killed a mutant
    # still does (tests were only added), so --resume keeps those kills
    status = {name: before[name] if s == "not checked" and before.get(name) in KILLED else s
              for name, s in statuses(work, module).items()}
    if proc.returncode != 0:
        sys.stdout.write(proc.stdout[-4000:] + proc.stderr[-4000:])
        raise SystemExit(f"{module}: mutmut failed (exit {proc.returncode}) in {work}")
    killed = sum(s in KILLED for s in status.values())
    rest = sorted(f"    {s:<10} {name}" for name, s in status.items() if s not in KILLED)
    minutes = (time.monotonic() - start) / 60
    print(f"{module}: {killed} / {len(status)} killed"
          f" ({100 * killed / max(len(status), 1):.1f} %, {minutes:.1f} min)", flush=True)
    for line in rest:
        print(line, flush=True)
    return killed, len(status), rest


def main(argv: list[str] | None = None) -> int:
    """Run the named modules (all of :data:`MODULES` by default) and print the scores."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("modules", nargs="*", help="e.g. evaluate.folds (default: all)")
    parser.add_argument("--jobs", type=int, default=1, help="mutmut workers (default 1)")
    parser.add_argument("--resume", action="store_true",
                        help="keep an earlier run's results; test again only the mutants "
                             "it did not kill")
    parser.add_argument("--deselect", action="append", default=[], metavar="NODEID",
                        help="leave out a test (one that fails on the clean tree: mutmut "
                             "needs every selected test green before it mutates)")
    parser.add_argument("--list", action="store_true", help="print the modules and stop")
    args = parser.parse_args(argv)
    modules = [m for arg in args.modules for m in arg.replace(",", " ").split()] or list(MODULES)
    unknown = [m for m in modules if m not in MODULES]
    if unknown:
        parser.error(f"unknown module(s) {unknown}; known: {', '.join(MODULES)}")
    if args.list:
        for m in modules:
            print(f"{m}: {' '.join(MODULES[m])}")
        return 0
    total_killed = total = 0
    for module in modules:
        killed, n, _ = run_module(module, args.jobs, args.resume, tuple(args.deselect))
        total_killed, total = total_killed + killed, total + n
    print(f"overall: {total_killed} / {total} killed"
          f" ({100 * total_killed / max(total, 1):.1f} %)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
