"""Issue 51: RFW's table (facecast.evaluate.rfw_table), every cell of a row, the average's
STD and SER worked by hand, every status text, the Markdown page line by line, so a mutant
of ``make mutate MODULES=evaluate.rfw_table`` that changes a figure or a word fails here."""

from __future__ import annotations

import logging
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from facecast.evaluate.rfw_table import (
    AVERAGE,
    COLUMNS,
    _count,
    _num,
    _pct,
    _rule_sentence,
    _set_row,
    average_row,
    rfw_markdown,
    rfw_table,
    structure_of,
    write_rfw_table,
)
from facecast.io.parquet_io import read_provenance, write_parquet

SETS = ["Caucasian", "Indian", "Asian", "African"]


def _file(tmp_path: Path, model: str, s: str, **row) -> dict[str, str]:
    path = tmp_path / f"{model}_{s}.parquet"
    write_parquet(pd.DataFrame([row]), path)
    return {"model": model, "set": s, "path": str(path)}


def _metrics(acc: float, **over) -> dict:
    row = {"accuracy": acc, "accuracy_std": 0.01, "n_pairs": 100, "n_genuine": 40,
           "n_impostor": 60, "n_failed": 2, "n_skipped": 1, "skipped_statuses": "x: 1",
           "failed": "nonmatch", "folds": "ten blocks; pairs file structure: as found"}
    row.update(over)
    return row


def test_num_and_count_read_missing_none_and_nan_as_nan_and_zero():
    row = {"a": 2.5, "b": None, "c": np.nan, "d": "3", "e": pd.NA, "f": 7.9}
    assert _num(row, "a") == 2.5 and _num(row, "d") == 3.0
    for key in ("b", "c", "e", "zz"):
        assert math.isnan(_num(row, key)) and _count(row, key) == 0
    assert _count(row, "f") == 7 and _count(row, "d") == 3
    assert isinstance(_count(row, "f"), int) and isinstance(_num(row, "d"), float)
    assert _count({"x": np.inf}, "x") == 0


def test_structure_of_reads_after_the_first_mark():
    assert structure_of("RFW ...; pairs file structure: odd: pairs file structure: x") == \
        "odd: pairs file structure: x"
    assert structure_of("ten blocks") == "" and structure_of(None) == ""
    assert structure_of("pairs file structure:x") == ""      # the mark has its space
    assert structure_of("pairs file structure: ") == ""


def test_set_row_every_field_and_the_three_statuses():
    m = pd.DataFrame([_metrics(0.9), _metrics(0.1)])      # the first row counts
    row = _set_row("m", "Asian", m)
    assert list(row) == ["model", "set", "accuracy", "accuracy_std", "std_across_sets", "ser",
                         "n_pairs", "n_genuine", "n_impostor", "n_failed", "n_skipped",
                         "skipped_statuses", "failed", "structure", "chance_accuracy",
                         "status"]
    assert row["model"] == "m" and row["set"] == "Asian"
    assert (row["accuracy"], row["accuracy_std"]) == (0.9, 0.01)
    assert np.isnan(row["std_across_sets"]) and np.isnan(row["ser"])
    assert (row["n_pairs"], row["n_genuine"], row["n_impostor"], row["n_failed"],
            row["n_skipped"]) == (100, 40, 60, 2, 1)
    assert row["skipped_statuses"] == "x: 1" and row["failed"] == "nonmatch"
    assert row["structure"] == "as found"
    assert row["chance_accuracy"] == 0.6 and row["status"] == "ok"
    nan = _set_row("m", "Asian", pd.DataFrame([_metrics(np.nan, skipped_statuses=None,
                                                         failed=None, folds=None)]))
    assert nan["status"] == "n/a (no scorable genuine and impostor pairs)"
    assert (nan["skipped_statuses"], nan["failed"], nan["structure"]) == ("", "", "")
    for none in (None, pd.DataFrame(columns=["accuracy"])):
        empty = _set_row("m", "Indian", none)
        assert empty["status"] == "n/a (no metrics for this set)"
        assert np.isnan(empty["accuracy"]) and np.isnan(empty["accuracy_std"])
        assert (empty["n_pairs"], empty["n_genuine"], empty["n_failed"]) == (0, 0, 0)
        assert (empty["skipped_statuses"], empty["failed"], empty["structure"]) == ("", "", "")
        assert np.isnan(empty["chance_accuracy"])


def test_average_row_by_hand():
    """Accuracies 0.9, 0.8, 0.95, 0.75: mean 0.85, population std sqrt(0.00625), SER
    0.25 / 0.05 = 5; counts summed, missing counts read as 0; rules named once each."""
    rows = [{"set": "A", "accuracy": 0.9, "n_pairs": 10, "n_skipped": 1, "n_genuine": 4,
             "n_impostor": 6, "n_failed": 1, "failed": "nonmatch"},
            {"set": "B", "accuracy": 0.8, "n_pairs": 20, "n_skipped": 2, "n_genuine": 10,
             "n_impostor": 10, "n_failed": 2, "failed": "drop"},
            {"set": "C", "accuracy": 0.95, "n_pairs": 30, "n_skipped": 0, "failed": "nonmatch"},
            {"set": "D", "accuracy": 0.75, "n_pairs": 5, "n_skipped": 4, "n_genuine": 2,
             "n_impostor": 3, "n_failed": 4, "failed": ""}]
    out = average_row("m", rows)
    assert out["model"] == "m" and out["set"] == AVERAGE == "average"
    assert out["accuracy"] == pytest.approx(0.85)
    assert out["std_across_sets"] == pytest.approx(np.sqrt((0.05**2 + 0.05**2 + 0.1**2
                                                           + 0.1**2) / 4))
    assert out["ser"] == pytest.approx(5.0) and out["status"] == "ok"
    assert np.isnan(out["accuracy_std"])
    assert (out["n_pairs"], out["n_skipped"], out["n_genuine"], out["n_impostor"],
            out["n_failed"]) == (65, 7, 16, 19, 7)
    assert out["failed"] == "nonmatch, drop"
    assert out["skipped_statuses"] == "" and out["structure"] == ""
    assert out["chance_accuracy"] == pytest.approx(19 / 35)
    assert isinstance(out["accuracy"], float) and isinstance(out["ser"], float)


def test_average_row_without_an_accuracy_or_without_an_error():
    rows = [{"set": "A", "accuracy": np.nan, "n_pairs": 0, "n_skipped": 3},
            {"set": "B", "accuracy": 0.9, "n_pairs": 8, "n_skipped": 0},
            {"set": "C", "accuracy": np.nan, "n_pairs": 0, "n_skipped": 0}]
    out = average_row("m", rows)
    assert out["status"] == "n/a (no accuracy on A, C)"
    assert np.isnan(out["accuracy"]) and np.isnan(out["std_across_sets"])
    assert np.isnan(out["ser"]) and out["n_pairs"] == 8 and out["n_skipped"] == 3
    assert out["n_genuine"] == 0 and np.isnan(out["chance_accuracy"])
    none = average_row("m", [])
    assert none["status"] == "n/a (no accuracy on any set)" and np.isnan(none["accuracy"])
    assert none["failed"] == "" and none["n_pairs"] == 0
    perfect = average_row("m", [{"set": "A", "accuracy": 1.0, "n_pairs": 1, "n_skipped": 0},
                                {"set": "B", "accuracy": 0.8, "n_pairs": 1, "n_skipped": 0},
                                {"set": "C", "accuracy": 1.0, "n_pairs": 1, "n_skipped": 0}])
    assert perfect["accuracy"] == pytest.approx(14 / 15)
    assert np.isnan(perfect["ser"])
    assert perfect["status"] == "n/a (SER: no error on A, C, the smallest error is 0)"
    one = average_row("m", [{"set": "A", "accuracy": 0.7, "n_pairs": 1, "n_skipped": 0}])
    assert one["ser"] == 1.0 and one["std_across_sets"] == 0.0 and one["status"] == "ok"


def test_pct_formats_percent_with_and_without_std():
    assert _pct(0.91234) == "91.23" and _pct(0.91234, 0.0051) == "91.23 ± 0.51"
    assert _pct(np.nan) == "n/a" and _pct(np.inf, 0.1) == "n/a"
    assert _pct(0.5, np.nan) == "50.00" and _pct(0.5, None) == "50.00"
    assert _pct(0.5, 0.0) == "50.00 ± 0.00"


def test_rfw_table_rows_per_model_sets_in_order_missing_entries_said(tmp_path):
    entries = [_file(tmp_path, "a", s, **_metrics(acc))
               for s, acc in zip(SETS, (0.96, 0.94, 0.92, 0.89), strict=True)]
    entries += [_file(tmp_path, "b", "Indian", **_metrics(0.5))]
    t = rfw_table(entries, ["b", "a"], SETS)
    assert list(t.columns) == COLUMNS
    assert list(zip(t["model"], t["set"], strict=True)) == [
        *[("b", s) for s in [*SETS, AVERAGE]], *[("a", s) for s in [*SETS, AVERAGE]]]
    b = t[t["model"] == "b"].set_index("set")
    assert b.loc["Indian", "accuracy"] == 0.5 and b.loc["Indian", "status"] == "ok"
    assert b.loc["Asian", "status"] == "n/a (no metrics for this set)"
    assert b.loc[AVERAGE, "status"] == "n/a (no accuracy on Caucasian, Asian, African)"
    a = t[t["model"] == "a"].set_index("set")
    assert a.loc[AVERAGE, "accuracy"] == pytest.approx(0.9275)
    assert a.loc[AVERAGE, "ser"] == pytest.approx(0.11 / 0.04)


def test_rule_sentence_per_rule_with_its_set_rows_failures():
    table = pd.DataFrame({"set": ["A", "B", "C", AVERAGE, "D"],
                          "failed": ["nonmatch", "drop", "nonmatch", "nonmatch", ""],
                          "n_failed": [2, 5, 3, 100, 7]})
    assert _rule_sentence(table) == (
        "5 pair(s) without a feature: pairs without a feature count as non-matches "
        "(evaluate.failed: nonmatch, ISO/IEC 19795-1 generalized FMR/FNMR): a false "
        "non-match when genuine, a correct reject when impostor. 5 pair(s) without a "
        "feature: pairs without a feature are left out (evaluate.failed: drop): each rate "
        "is over the pairs the model scored.")
    assert _rule_sentence(table.assign(failed="")) == ""


def test_markdown_page_line_by_line():
    """Title, prose, the papers' row per model (cells by hand), the sets whose files are
    not RFW's layout, the pairs table with '|' escaped and an en dash for no statuses."""
    rows = [_set_row("m", s, pd.DataFrame([_metrics(acc, accuracy_std=sd, folds=f)]))
            for s, acc, sd, f in (
                ("Caucasian", 0.96, 0.005, "x; pairs file structure: RFW's layout: 10"),
                ("Indian", 0.94, np.nan, "x; pairs file structure: odd one"),
                ("Asian", 0.92, 0.015, ""),
                ("African", 0.89, 0.02, "x; pairs file structure: short"))]
    rows[2]["skipped_statuses"] = "a|b: 2"
    rows[3]["skipped_statuses"] = ""
    other = [_set_row("n", s, None) for s in SETS]
    table = pd.DataFrame([*rows, average_row("m", rows), *other, average_row("n", other)],
                         columns=COLUMNS)
    md = rfw_markdown(table, SETS, "rfw-x")
    lines = md.splitlines()
    assert md.endswith("|\n")
    assert lines[0] == "# RFW: accuracy per set (rfw-x)" and lines[1] == ""
    assert lines[2].startswith("10-fold accuracy (%, mean ± std over the folds: insightface's "
                               "rule) per set in the RFW paper's order (Wang et al., ICCV "
                               "2019), the average over the sets, the standard deviation of "
                               "the sets' accuracies (STD) and the skewed error ratio (SER: "
                               "largest error / smallest error over the sets; 1 = equal "
                               "errors), as Wang & Deng (CVPR 2020) and the later RFW papers "
                               "report them. 8 pair(s) without a feature: pairs without")
    assert lines[3:6] == ["", "| model | Caucasian | Indian | Asian | African | Avg | STD | "
                              "SER |", "|---|---|---|---|---|---|---|---|"]
    assert lines[6] == "| m | 96.00 ± 0.50 | 94.00 | 92.00 ± 1.50 | 89.00 ± 2.00 | 92.75 | " \
                       "2.59 | 2.750 |"
    assert lines[7] == "| n | n/a | n/a | n/a | n/a | n/a | n/a | n/a (no accuracy on " \
                       "Caucasian, Indian, Asian, African) |"
    assert lines[8:14] == [
        "", "## Pairs files that are not in RFW's layout", "",
        "The folds stay insightface's 10 consecutive blocks of the file; RFW's own file has "
        "10 blocks of 300 genuine then 300 impostor lines.", "",
        "- Indian: odd one"]
    assert lines[14] == "- African: short"
    assert lines[15:18] == ["", "## Pairs per set", ""]
    assert lines[18] == (
        "Pairs counted (test folds, under the failure rule), pairs without a feature among "
        "them or left out (n_failed), pairs that are no comparison or were left out "
        "(n_skipped, with their statuses); `status` says why a figure is n/a. Genuine and "
        "impostor pairs, and the accuracy of always giving the majority answer (RFW's blocks "
        "are half genuine: 50 %): an accuracy near it is chance.")
    assert lines[19:22] == [
        "", "| model | set | n_pairs | genuine | impostor | constant answer (%) | n_failed | "
            "n_skipped | skipped statuses | status |", "|---|---|---|---|---|---|---|---|---|---|"]
    assert lines[22] == "| m | Caucasian | 100 | 40 | 60 | 60.00 | 2 | 1 | x: 1 | ok |"
    assert lines[24] == "| m | Asian | 100 | 40 | 60 | 60.00 | 2 | 1 | a\\|b: 2 | ok |"
    assert lines[25] == "| m | African | 100 | 40 | 60 | 60.00 | 2 | 1 | – | ok |"
    assert lines[26] == "| m | average | 400 | 160 | 240 | 60.00 | 8 | 4 | – | ok |"
    assert lines[27] == "| n | Caucasian | 0 | 0 | 0 | n/a | 0 | 0 | – | " \
                        "n/a (no metrics for this set) |"
    assert len(lines) == 32
    # every set in RFW's layout (or unstated): no such section
    plain = table.assign(structure="")
    assert "## Pairs files that are not" not in rfw_markdown(plain, SETS, "d")
    assert "## Pairs files that are not" not in rfw_markdown(
        table.assign(structure="RFW's layout: 10 blocks"), SETS, "d")


def test_markdown_reads_a_sets_structure_from_its_first_row():
    """Two models in the table's order (not sorted by name), the set's structure taken
    from the first model's row."""
    rows = [_set_row(m, "Asian", pd.DataFrame([_metrics(acc, folds=f)])) for m, acc, f in (
        ("b", 0.9, "pairs file structure: first"), ("a", 0.8, "pairs file structure: second"))]
    table = pd.DataFrame([rows[0], average_row("b", rows[:1]), rows[1],
                          average_row("a", rows[1:])], columns=COLUMNS)
    md = rfw_markdown(table, ["Asian"], "d")
    assert "- Asian: first" in md and "second" not in md
    lines = md.splitlines()
    assert lines[6:8] == ["| b | 90.00 ± 1.00 | 90.00 | 0.00 | 1.000 |",
                          "| a | 80.00 ± 1.00 | 80.00 | 0.00 | 1.000 |"]


def test_write_rfw_table_writes_parquet_with_provenance_markdown_html_and_warns(
        tmp_path, caplog):
    entries = [_file(tmp_path, "a", "Asian", **_metrics(0.9)),
               _file(tmp_path, "a", "Indian", **_metrics(1.0))]
    with caplog.at_level(logging.WARNING, logger="facecast.evaluate.rfw_table"):
        t = write_rfw_table(entries, ["a"], ["Asian", "Indian", "African"],
                            tmp_path / "t.parquet", tmp_path / "t.md", tmp_path / "t.html",
                            ds="rfw", provenance={"model": "a", "stage": "x"})
    msgs = [r.getMessage() for r in caplog.records]
    assert msgs == ["RFW a / African: n/a (no metrics for this set)",
                    "RFW a / average: n/a (no accuracy on African)"]
    assert all(r.levelno == logging.WARNING for r in caplog.records)
    back = pd.read_parquet(tmp_path / "t.parquet")
    assert list(back.columns) == COLUMNS and len(back) == 4
    assert back["accuracy"].tolist()[:2] == [0.9, 1.0]
    prov = read_provenance(tmp_path / "t.parquet")
    assert prov["stage"] == "rfw_table" and prov["model"] == "a"
    assert prov["sets"] == ["Asian", "Indian", "African"]
    md = (tmp_path / "t.md").read_text()
    assert md == rfw_markdown(t, ["Asian", "Indian", "African"], "rfw")
    assert "<table>" in (tmp_path / "t.html").read_text()
    write_rfw_table(entries, ["a"], ["Asian"], tmp_path / "u.parquet", tmp_path / "u.md",
                    tmp_path / "u.html")
    assert (tmp_path / "u.md").read_text().startswith("# RFW: accuracy per set ()\n")
    assert read_provenance(tmp_path / "u.parquet")["stage"] == "rfw_table"
