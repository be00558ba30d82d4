"""benchmarks/compare_runs.py (issue 40.5): two runs' metric tables within the stated
tolerance, and wall time per stage from the runtime TSVs. Small run trees built here."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import load_benchmark

cr = load_benchmark("compare_runs")

METRICS = "results/demo/eval/dlib/fair_pool/metrics.parquet"
RATES = "results/demo/fairness/dlib/fair_pool/rates.parquet"


def build_run(root: Path) -> Path:
    """A run with two metric tables, a table outside the metric stages and runtime TSVs."""
    metrics = pd.DataFrame({
        "metric": ["accuracy", "tar@far=1e-3", "threshold_sq_l2", "n_pairs"],
        "value": [0.9125, 0.5, 1234.5, 20000.0],
        "band": [[0.90, 0.92], [0.45, 0.55], [1200.0, 1300.0], [20000.0, 20000.0]],
        "resolvable": [True, True, True, False],
    })
    rates = pd.DataFrame({
        "group": ["female/light", "male/dark", "male/light"],
        "fnmr": [0.125, np.nan, 0.25],
        "note": [None, "n/a (2 identities)", None],
        "flag": pd.Series([None, False, True], dtype=object),
        "n": np.array([40, 2, 35], dtype=np.int64),
    })
    for rel, df in ((METRICS, metrics), (RATES, rates)):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        df.to_parquet(root / rel)
    # embeddings are not a metric stage: a change there is not compared
    emb = root / "results/demo/embed/dlib/00000.parquet"
    emb.parent.mkdir(parents=True)
    pd.DataFrame({"x": [1.0]}).to_parquet(emb)
    return root


def write_tsv(path: Path, seconds: float, end: float) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"s\th:m:s\tmax_rss\n{seconds}\t0:00:00\t1.0\n")
    os.utime(path, (end, end))


def edit(run: Path, rel: str, column: str, row: int, value) -> None:
    df = pd.read_parquet(run / rel)
    df.at[row, column] = value
    df.to_parquet(run / rel)


@pytest.fixture
def runs(tmp_path: Path) -> tuple[Path, Path]:
    a = build_run(tmp_path / "cpu")
    b = tmp_path / "gpu"
    shutil.copytree(a, b)
    return a, b


def test_identical_runs_pass_and_count_every_value(runs):
    a, b = runs
    cmp = cr.compare_runs(a, b)
    assert cmp.ok and cmp.tables == 2
    # metrics: 4 metric + 4 value + 8 band + 4 resolvable; rates: 3 x 5 columns
    assert cmp.values == 20 + 15
    assert cmp.max_diff == 0.0
    assert cr.metric_tables(a) == sorted([METRICS, RATES])


@pytest.mark.parametrize(("row", "value", "ok"), [
    (0, 0.9125 + 5e-5, True),     # a rate within the 4th decimal
    (0, 0.9125 + 2e-4, False),    # beyond it
    (2, 1234.5 * (1 + 5e-5), True),   # unbounded numbers: relative 1e-4
    (2, 1234.5 + 0.2, False),
    (3, 20001.0, True),           # a count of 20,000 may move by one (relative 5e-5)
    (3, 20003.0, False),
])
def test_numeric_cells_follow_the_stated_tolerance(runs, row, value, ok):
    a, b = runs
    edit(b, METRICS, "value", row, value)
    cmp = cr.compare_runs(a, b)
    assert cmp.ok is ok
    if not ok:
        assert cmp.beyond == 1
        cell = cmp.cells[0]
        assert (cell.table, cell.column, cell.row) == (METRICS, "value", row)
        text = cr.report(cmp, ("cpu", "gpu"), cr.TOL)
        assert f"BEYOND {METRICS} [value] row {row}" in text
        assert text.splitlines()[-1].startswith("metrics cpu vs gpu within 0.0001: FAIL")


def test_list_cells_are_compared_element_by_element(runs):
    a, b = runs
    df = pd.read_parquet(b / METRICS)
    df.at[1, "band"] = [0.45, 0.55 + 3e-4]
    df.to_parquet(b / METRICS)
    cmp = cr.compare_runs(a, b)
    assert not cmp.ok and [(c.column, c.row) for c in cmp.cells] == [("band", 1)]
    assert cmp.cells[0].diff == pytest.approx(3e-4)


def test_missing_values_match_only_missing_values(runs):
    a, b = runs
    assert cr.compare_runs(a, b).ok     # NaN == NaN, None == None (object and text columns)
    edit(b, RATES, "fnmr", 1, 0.5)      # a figure where the CPU run had n/a
    cmp = cr.compare_runs(a, b)
    assert not cmp.ok and cmp.cells[0].diff == np.inf
    assert (cmp.cells[0].column, cmp.cells[0].row) == ("fnmr", 1)


@pytest.mark.parametrize(("column", "row", "value"), [
    ("note", 0, "n/a (1 identity)"),    # text
    ("flag", 0, False),                 # None -> False in an object column
    ("resolvable", 3, True),            # booleans are exact
])
def test_text_and_boolean_cells_must_be_equal(runs, column, row, value):
    a, b = runs
    edit(b, RATES if column in ("note", "flag") else METRICS, column, row, value)
    cmp = cr.compare_runs(a, b)
    assert not cmp.ok and [(c.column, c.row) for c in cmp.cells] == [(column, row)]


def test_missing_tables_rows_and_columns_are_problems(runs):
    a, b = runs
    (b / RATES).unlink()
    df = pd.read_parquet(b / METRICS)
    df.iloc[:3].to_parquet(b / METRICS)
    cmp = cr.compare_runs(a, b)
    assert not cmp.ok
    assert cmp.problems == [f"{RATES}: only in {a}", f"{METRICS}: 4 rows vs 3"]
    df.assign(extra=1).to_parquet(b / METRICS)
    assert "columns differ: ['extra']" in cr.compare_runs(a, b).problems[-1]
    # an empty run is never a silent PASS
    empty = a.parent / "empty"
    empty.mkdir()
    assert not cr.compare_runs(empty, empty).ok


def test_other_stages_are_not_compared(runs):
    a, b = runs
    pd.DataFrame({"x": [2.0]}).to_parquet(b / "results/demo/embed/dlib/00000.parquet")
    assert cr.compare_runs(a, b).ok


def test_stage_times_from_runtime_tsvs(tmp_path: Path):
    rt = tmp_path / "run/results/demo/runtime"
    write_tsv(rt / "faces/00000.tsv", 10.0, 1000.0)    # 990 .. 1000
    write_tsv(rt / "faces/00001.tsv", 4.0, 1003.0)     # 999 .. 1003
    write_tsv(rt / "embed/dlib/00000.tsv", 2.5, 1010.0)
    write_tsv(rt / "manifest.tsv", 1.0, 980.0)
    times = cr.stage_times(tmp_path / "run")
    assert list(times.index) == ["embed/dlib", "faces", "manifest"]
    assert times.loc["faces"].tolist() == [2, 14.0, 13.0]
    assert times.loc["embed/dlib"].tolist() == [1, 2.5, 2.5]
    table = cr.times_table(tmp_path / "run", tmp_path / "run", ("cpu", "gpu"))
    assert table.splitlines()[0].split()[:2] == ["stage", "jobs"]
    assert "faces" in table and table.splitlines()[-1].startswith("all stages")


def test_main_prints_the_verdict_and_sets_the_exit_status(runs, capsys):
    a, b = runs
    assert cr.main([str(a), str(b)]) == 0
    assert capsys.readouterr().out.splitlines()[-1].startswith(
        "metrics cpu vs gpu within 0.0001: PASS (35 values in 2 tables")
    edit(b, METRICS, "value", 1, 0.51)
    assert cr.main([str(a), str(b), "--tol", "0.02"]) == 0
    assert cr.main([str(a), str(b)]) == 1


def test_a_table_left_as_copied_is_not_recomputed(runs, tmp_path):
    """issue 48 item 1: the GPU run is a copy of the CPU run with embed and what follows
    rerun; a metric table the rerun did not rewrite must not pass as equal."""
    a, b = runs
    marker = tmp_path / "copied"
    marker.write_text("")
    old = os.path.getmtime(marker) - 10
    for rel in (METRICS, RATES):
        os.utime(b / rel, (old, old))
    cmp = cr.compare_runs(a, b, newer_than=marker)
    assert not cmp.ok and cmp.beyond == 0 and len(cmp.problems) == 2
    assert cmp.problems[0] == (f"{METRICS}: not recomputed in {b} (not newer than {marker})")
    new = os.path.getmtime(marker) + 10
    os.utime(b / METRICS, (new, new))
    cmp = cr.compare_runs(a, b, newer_than=marker)
    assert [p.split(":")[0] for p in cmp.problems] == [RATES]
    assert cr.main([str(a), str(b), "--newer-than", str(marker)]) == 1
    os.utime(b / RATES, (new, new))
    assert cr.main([str(a), str(b), "--newer-than", str(marker)]) == 0
