"""Issue 51: `make mutate MODULES=evaluate.bin_suite` - the CC11 and .bin suite tables from
hand-written metrics files (no evaluation run): which rows are ok, missing or without
pairs, cc11.py's averages and printout, the pairs-and-folds table, arcface_torch's log
lines, the Parquet tables and their provenance."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from facecast.config.bin_sets import CC11_LABELS, CC11_NAMES
from facecast.evaluate.bin_suite import (
    _cell,
    _chance_cell,
    block_average,
    cc11_printout,
    cc11_wide,
    read_items,
    suite_rows,
    verification_log,
    write_bin_suite,
    write_cc11_table,
)
from facecast.io.parquet_io import read_provenance

RULE = " --------------------------"


def _metrics(path, acc, std, *, n_gen=40, n_imp=60, n_failed=1, failed="nonmatch",
             failed_statuses="no_face", n_skipped=0, skipped_statuses="",
             folds="10 consecutive"):
    pd.DataFrame([{"accuracy": acc, "accuracy_std": std, "n_pairs": n_gen + n_imp,
                   "n_genuine": n_gen, "n_impostor": n_imp, "n_failed": n_failed,
                   "failed_statuses": failed_statuses, "failed": failed,
                   "n_skipped": n_skipped, "skipped_statuses": skipped_statuses,
                   "folds": folds}]).to_parquet(path)
    return str(path)


def _cc11_items(root, model="m", nan_block=None):
    """Block b of CC11: accuracy 0.90 + 0.01 b, std 0.010 + 0.001 b (mean 0.95, 0.015)."""
    items = []
    for b, name in enumerate(CC11_NAMES):
        acc = np.nan if name == nan_block else 0.90 + 0.01 * b
        path = _metrics(root / f"{model}_{name}.parquet", acc, 0.010 + 0.001 * b)
        items.append({"set": "cc11_val", "dataset": "cc", "protocol": name, "block": name,
                      "model": model, "path": path})
    return items


def test_read_items_ok_no_pairs_and_missing(tmp_path):
    items = [{"set": "lfw", "dataset": "d", "protocol": "p", "model": "m",
              "path": _metrics(tmp_path / "a.parquet", 0.99, 0.005)},
             {"set": "lfw", "dataset": "d", "protocol": "p", "model": "n", "block": None,
              "path": _metrics(tmp_path / "b.parquet", np.nan, np.nan)},
             {"set": "lfw", "dataset": "d", "protocol": "p", "model": "o",
              "path": str(tmp_path / "absent.parquet")}]
    t = read_items(items)
    assert t.columns.tolist() == [
        "set", "dataset", "protocol", "block", "model", "accuracy", "accuracy_std",
        "n_pairs", "n_genuine", "n_impostor", "n_failed", "failed_statuses", "failed",
        "n_skipped", "skipped_statuses", "folds", "status", "message", "path"]
    assert t["status"].tolist() == ["ok", "no_pairs", "missing"]
    assert t["message"].tolist() == ["", "no scorable genuine and impostor pairs",
                                     "no metrics file"]
    assert t["block"].tolist() == ["", "", ""]
    assert t["accuracy"].dtype == np.float64 and t["accuracy_std"].dtype == np.float64
    assert t["accuracy"].iloc[0] == 0.99 and t["accuracy_std"].iloc[0] == 0.005
    assert t["n_pairs"].iloc[0] == 100 and t["folds"].iloc[0] == "10 consecutive"
    assert t["n_pairs"].iloc[1] == 100 and pd.isna(t["n_pairs"].iloc[2])
    assert t["path"].tolist() == [it["path"] for it in items]


def test_block_average_needs_all_eleven_blocks():
    rows = pd.DataFrame({"block": list(CC11_NAMES), "status": ["ok"] * 11,
                         "accuracy": [0.9 + 0.01 * b for b in range(11)],
                         "accuracy_std": [0.01 + 0.001 * b for b in range(11)]})
    avg = block_average(rows)
    assert avg["accuracy"] == pytest.approx(0.95) and avg["accuracy_std"] == pytest.approx(0.015)
    assert (avg["status"], avg["message"]) == ("ok", "")
    rows.loc[3, "status"] = "no_pairs"
    short = block_average(rows)
    assert np.isnan(short["accuracy"]) and np.isnan(short["accuracy_std"])
    assert (short["status"], short["message"]) == ("incomplete",
                                                   "10 of 11 blocks have a figure")


def test_cells_and_chance_cells():
    assert _cell(None) == "n/a (not evaluated)"
    assert _cell({"status": "ok", "accuracy": 0.98765, "accuracy_std": 0.0125}) == \
        "98.77+-1.25"
    assert _cell({"status": "ok", "accuracy": 0.5, "accuracy_std": 0.25}, " ± ") == \
        "50.00 ± 25.00"
    assert _cell({"status": "missing", "message": "a|b"}) == "n/a (a/b)"
    assert _cell({"status": "no_pairs", "message": ""}) == "n/a (no_pairs)"
    assert _chance_cell(40, 60) == "60.00 (different)"
    assert _chance_cell(70, 30) == "70.00 (same)"
    assert _chance_cell(None, 3) == _chance_cell(3, None) == "–"
    assert _chance_cell(np.nan, 3) == _chance_cell(3, np.nan) == "–"
    assert _chance_cell(0, 0) == "–"


def test_cc11_wide_and_printout(tmp_path):
    long = read_items(_cc11_items(tmp_path) + _cc11_items(tmp_path, "x", "random"))
    wide = cc11_wide(long, ["m", "x"]).set_index("model")
    assert wide.loc["m", "black"] == pytest.approx(0.90)
    assert wide.loc["m", "random_std"] == pytest.approx(0.020)
    assert wide.loc["m", "average"] == pytest.approx(0.95)
    assert wide.loc["m", "average_std"] == pytest.approx(0.015)
    assert (wide.loc["m", "status"], wide.loc["m", "message"]) == ("ok", "")
    assert np.isnan(wide.loc["x", "random"]) and np.isnan(wide.loc["x", "random_std"])
    assert np.isnan(wide.loc["x", "average"]) and wide.loc["x", "status"] == "incomplete"
    assert wide.loc["x", "message"] == "10 of 11 blocks have a figure"
    lines = [RULE]
    for b, label in enumerate(CC11_LABELS):
        lines += [f"| {label:<11} | {90 + b:.2f}+-{1 + 0.1 * b:.2f}|", RULE]
    lines += ["", RULE, "| Avg         | 95.00+-1.50|", RULE]
    assert cc11_printout(long, "m").split("\n") == lines
    x = cc11_printout(long, "x").split("\n")
    assert x[-6] == "| Random      | n/a (no scorable genuine and impostor pairs)|"
    assert x[-2] == "| Avg         | n/a (10 of 11 blocks have a figure)|"
    none = cc11_printout(long, "nobody").split("\n")
    assert none[1] == "| Black       | n/a (not evaluated)|"


def test_cc11_table_markdown_and_parquet(tmp_path):
    items = _cc11_items(tmp_path) + [
        {"set": "cc11_val", "dataset": "cc", "protocol": "black", "block": "black",
         "model": "o", "path": str(tmp_path / "absent.parquet")}]
    table = write_cc11_table(items, tmp_path / "t.parquet", tmp_path / "t.md",
                             tmp_path / "t.html", models=["m", "o"], dataset="cc",
                             source="cc11_val.bin", provenance={"run": "r"})
    md = (tmp_path / "t.md").read_text().split("\n")
    assert md[0] == "# CC11: cc (cc11_val.bin)"
    assert "| model | " + " | ".join(CC11_LABELS) + " | Avg |" in md
    cells = [f"{90 + b:.2f}+-{1 + 0.1 * b:.2f}" for b in range(11)]
    assert "| m | " + " | ".join(cells) + " | 95.00+-1.50 |" in md
    assert "| o | n/a (no metrics file) | " + " | ".join(["n/a (not evaluated)"] * 10) \
        + " | n/a (0 of 11 blocks have a figure) |" in md
    at = md.index("## As cc11.py prints it")
    assert md[at + 2:at + 5] == ["### m", "", "```"]
    assert "### o" in md
    # the pairs table: one line per block and model, the missing one says so
    assert "| block | model | n_pairs | genuine | impostor | constant answer (%) | n_failed " \
           "| failed statuses | n_skipped | skipped statuses | folds |" in md
    assert "| black | m | 100 | 40 | 60 | 60.00 (different) | 1 | no_face | 0 | – | " \
           "10 consecutive |" in md
    assert "| black | o | – | – | – | – | – | – | – | (no metrics) | – |" in md
    assert md[-1] == "" and md[-2].startswith("| black | o |")
    assert "Pairs without a feature count as non-matches" in "\n".join(md)
    assert "CC11: cc" in (tmp_path / "t.html").read_text()
    assert table.index.tolist() == list(range(14))
    avg = table[table["block"] == "average"].set_index("model")
    assert avg["protocol"].tolist() == ["average", "average"]
    assert avg["set"].tolist() == ["cc11_val"] * 2 and avg["dataset"].tolist() == ["cc"] * 2
    assert avg.loc["m", "accuracy"] == pytest.approx(0.95)
    assert avg.loc["m", "accuracy_std"] == pytest.approx(0.015)
    assert avg.loc["o", "status"] == "incomplete"
    assert avg.loc["o", "message"] == "0 of 11 blocks have a figure"
    saved = pd.read_parquet(tmp_path / "t.parquet")
    assert len(saved) == 14 and saved["status"].tolist()[-2:] == ["ok", "incomplete"]
    prov = read_provenance(tmp_path / "t.parquet")
    assert (prov["stage"], prov["dataset"], prov["source"], prov["run"]) == (
        "cc11_table", "cc", "cc11_val.bin", "r")


def test_cc11_table_without_a_source_or_items(tmp_path):
    table = write_cc11_table([], tmp_path / "t.parquet", tmp_path / "t.md",
                             tmp_path / "t.html", models=["m"], dataset="cc")
    assert (tmp_path / "t.md").read_text().split("\n")[0] == "# CC11: cc"
    assert table["set"].tolist() == ["cc"] and table["status"].tolist() == ["incomplete"]


def test_suite_rows_log_and_markdown(tmp_path):
    lfw = {"set": "lfw", "dataset": "lfwb", "protocol": "lfw", "block": "", "model": "m",
           "path": _metrics(tmp_path / "lfw.parquet", 0.99, 0.005, n_gen=300, n_imp=300,
                            n_failed=2, n_skipped=4, failed="drop",
                            skipped_statuses="bad_label")}
    cc = _cc11_items(tmp_path)
    nan = {**lfw, "model": "z", "path": _metrics(tmp_path / "z.parquet", np.nan, np.nan)}
    items = [lfw, *cc, nan]
    rows = write_bin_suite(items, tmp_path / "s.parquet", tmp_path / "s.md",
                           tmp_path / "s.html", models=["m", "y", "z"],
                           flips={"m": True}, provenance={"run": "r"})
    assert rows.columns.tolist() == ["set", "model", "accuracy", "accuracy_std", "status",
                                     "message", "n_pairs", "n_failed", "n_skipped",
                                     "failed", "dataset"]
    assert list(zip(rows["set"], rows["model"], strict=True)) == [
        ("lfw", "m"), ("lfw", "y"), ("lfw", "z"), ("cc11_val", "m"), ("cc11_val", "y"),
        ("cc11_val", "z")]
    r = rows.set_index(["set", "model"])
    assert r.loc[("lfw", "m"), "accuracy"] == 0.99 and r.loc[("lfw", "m"), "status"] == "ok"
    assert (r.loc[("lfw", "m"), "n_pairs"], r.loc[("lfw", "m"), "n_failed"],
            r.loc[("lfw", "m"), "n_skipped"]) == (600, 2, 4)
    assert r.loc[("lfw", "m"), "failed"] == "drop" and r.loc[("lfw", "m"), "dataset"] == "lfwb"
    # the CC11 set: the average of its blocks, the counts summed over them
    assert r.loc[("cc11_val", "m"), "accuracy"] == pytest.approx(0.95)
    assert r.loc[("cc11_val", "m"), "accuracy_std"] == pytest.approx(0.015)
    assert (r.loc[("cc11_val", "m"), "n_pairs"], r.loc[("cc11_val", "m"), "n_failed"],
            r.loc[("cc11_val", "m"), "n_skipped"]) == (1100, 11, 0)
    assert r.loc[("cc11_val", "m"), "failed"] == "nonmatch"
    assert r.loc[("cc11_val", "m"), "dataset"] == "cc"
    assert (r.loc[("lfw", "y"), "status"], r.loc[("lfw", "y"), "message"]) == (
        "missing", "not evaluated")
    assert np.isnan(r.loc[("lfw", "y"), "accuracy"]) and np.isnan(r.loc[("lfw", "y"), "n_pairs"])
    assert r.loc[("lfw", "y"), "failed"] == "" and r.loc[("lfw", "y"), "dataset"] == ""
    assert r.loc[("lfw", "z"), "status"] == "no_pairs"
    log = verification_log(rows, {"m": True})
    assert log.split("\n") == [
        "# m", "[lfw]Accuracy-Flip: 0.99000+-0.00500", "[cc11_val]Accuracy-Flip: 0.95000+-0.01500",
        "# y", "[lfw]Accuracy: n/a (not evaluated)", "[cc11_val]Accuracy: n/a (not evaluated)",
        "# z", "[lfw]Accuracy: n/a (no scorable genuine and impostor pairs)",
        "[cc11_val]Accuracy: n/a (not evaluated)"]
    md = (tmp_path / "s.md").read_text().split("\n")
    assert md[0] == "# Verification .bin sets"
    assert "cc11_val: the CC11 average" in md[2]
    assert md[4:7] == ["| model | lfw | cc11_val |", "|---|---|---|",
                       "| m | 99.00 ± 0.50 | 95.00 ± 1.50 |"]
    assert md[7] == "| y | n/a (not evaluated) | n/a (not evaluated) |"
    at = md.index("## As arcface_torch's verification log prints it")
    assert md[at + 2:at + 4] == ["```", "# m"] and md[at + 3 + 9] == "```"
    assert "| lfw | m | 600 | 300 | 300 | 50.00 (different) | 2 | no_face | 4 | bad_label " \
           "| 10 consecutive |" in md
    assert "| set / block | model | n_pairs | genuine | impostor | constant answer (%) " \
           "| n_failed | failed statuses | n_skipped | skipped statuses | folds |" in md
    text = "\n".join(md)
    assert "Pairs without a feature are left out" in text
    assert "Pairs without a feature count as non-matches" in text
    assert "Verification .bin sets" in (tmp_path / "s.html").read_text()
    saved = pd.read_parquet(tmp_path / "s.parquet")
    assert saved["set"].tolist() == rows["set"].tolist()
    prov = read_provenance(tmp_path / "s.parquet")
    assert (prov["stage"], prov["sets"], prov["run"]) == ("bin_suite", ["lfw", "cc11_val"], "r")


def test_suite_without_a_cc11_set_names_none():
    long = pd.DataFrame({"set": ["lfw"], "model": ["m"], "block": [""], "status": ["ok"],
                         "accuracy": [0.9], "accuracy_std": [0.1], "n_pairs": [np.nan],
                         "n_failed": [np.nan], "n_skipped": [np.nan], "failed": [None],
                         "dataset": ["d"], "message": [""]})
    rows = suite_rows(long, ["lfw"], ["m"])
    assert rows["failed"].tolist() == [""] and np.isnan(rows["n_pairs"].iloc[0])


SUITE_PROSE = (
    "10-fold accuracy (%, mean ± std over insightface's 10 consecutive folds: the best "
    "squared-L2 threshold of nine folds applied to the tenth), one row per model. ")
FLIP_PROSE = ("Models with flip: true embed the crop and its mirror image and sum them, as "
              "arcface_torch's Accuracy-Flip.")
PAIRS_PROSE = (
    "Pairs counted, pairs without a feature (n_failed, with their statuses: e.g. an image "
    "that did not decode), pairs left out (n_skipped, with their statuses), and how the "
    "folds were formed. {rules}Beside the counts, the accuracy of always giving the majority "
    "answer (\"different\" where impostors outnumber genuine pairs): a 10-fold accuracy near "
    "it is no better than chance.")
DROP = ("Pairs without a feature are left out (evaluate.failed: drop): each rate is over "
        "the pairs the model scored. ")
NONMATCH = ("Pairs without a feature count as non-matches (evaluate.failed: nonmatch, "
            "ISO/IEC 19795-1 generalized FMR/FNMR): a false non-match when genuine, a "
            "correct reject when impostor. ")
PAIRS_HEAD = ("| {} | model | n_pairs | genuine | impostor | constant answer (%) | n_failed | "
              "failed statuses | n_skipped | skipped statuses | folds |")
PAIRS_RULE = "|---|---|---|---|---|---|---|---|---|---|---|"


def test_suite_page_line_by_line(tmp_path):
    """The whole suite page: title, prose (the CC11 set named), the table, the log lines
    in a code block, the pairs table with both failure rules' sentences (sorted: drop,
    nonmatch), one line per set or block and model."""
    lfw = {"set": "lfw", "dataset": "lfwb", "protocol": "lfw", "block": "", "model": "m",
           "path": _metrics(tmp_path / "lfw.parquet", 0.99, 0.005, n_gen=300, n_imp=300,
                            n_failed=2, n_skipped=4, failed="drop",
                            skipped_statuses="bad_label")}
    write_bin_suite([lfw, *_cc11_items(tmp_path)], tmp_path / "s.parquet", tmp_path / "s.md",
                    tmp_path / "s.html", models=["m"], flips={"m": True})
    md = (tmp_path / "s.md").read_text()
    assert md.endswith("consecutive |\n")
    blocks = [f"| {b} | m | 100 | 40 | 60 | 60.00 (different) | 1 | no_face | 0 | – | "
              "10 consecutive |" for b in CC11_NAMES]
    assert md.split("\n") == [
        "# Verification .bin sets", "",
        SUITE_PROSE + "cc11_val: the CC11 average (mean of the eleven block accuracies ± "
        "mean of their stds, as cc11.py prints it; the blocks are in "
        "results/<dataset>/eval/cc11.md). " + FLIP_PROSE, "",
        "| model | lfw | cc11_val |", "|---|---|---|", "| m | 99.00 ± 0.50 | 95.00 ± 1.50 |",
        "", "## As arcface_torch's verification log prints it", "", "```", "# m",
        "[lfw]Accuracy-Flip: 0.99000+-0.00500", "[cc11_val]Accuracy-Flip: 0.95000+-0.01500",
        "```", "", "## Pairs and folds", "", PAIRS_PROSE.format(rules=DROP + NONMATCH), "",
        PAIRS_HEAD.format("set / block"), PAIRS_RULE,
        "| lfw | m | 600 | 300 | 300 | 50.00 (different) | 2 | no_face | 4 | bad_label | "
        "10 consecutive |", *blocks, ""]


def test_suite_page_names_two_cc11_sets_comma_separated(tmp_path):
    """Two CC11 sets (a user's val and test exports) are both named in the prose, in
    their order, joined by a comma; a plain set between them is not named."""
    lfw = {"set": "lfw", "dataset": "d", "protocol": "lfw", "block": "", "model": "m",
           "path": _metrics(tmp_path / "lfw.parquet", 0.99, 0.005)}
    test = [{**it, "set": "cc11_test", "path": _metrics(tmp_path / f"t{k}.parquet", 0.8, 0.02)}
            for k, it in enumerate(_cc11_items(tmp_path))]
    write_bin_suite([*_cc11_items(tmp_path), lfw, *test], tmp_path / "s.parquet",
                    tmp_path / "s.md", tmp_path / "s.html", models=["m"])
    md = (tmp_path / "s.md").read_text().split("\n")
    assert md[2].startswith(SUITE_PROSE + "cc11_val, cc11_test: the CC11 average (mean")
    assert md[4:7] == ["| model | cc11_val | lfw | cc11_test |", "|---|---|---|---|",
                       "| m | 95.00 ± 1.50 | 99.00 ± 0.50 | 80.00 ± 2.00 |"]


def test_suite_page_without_a_cc11_set_or_a_rule(tmp_path):
    """No CC11 set: the prose names none; metrics without a failure rule: no rule's
    sentence; a model without a flip reads Accuracy."""
    it = {"set": "lfw", "dataset": "d", "protocol": "lfw", "block": "", "model": "m",
          "path": _metrics(tmp_path / "a.parquet", 0.9, 0.1, failed=None)}
    write_bin_suite([it], tmp_path / "s.parquet", tmp_path / "s.md", tmp_path / "s.html",
                    models=["m"])
    md = (tmp_path / "s.md").read_text().split("\n")
    assert md[2] == SUITE_PROSE + FLIP_PROSE
    assert md[12] == "[lfw]Accuracy: 0.90000+-0.10000"
    assert md[17] == PAIRS_PROSE.format(rules=" ")  # two spaces: Markdown shows one


def test_verification_log_keeps_the_models_order():
    """Models in the order of the rows (z before m), not sorted."""
    rows = pd.DataFrame({"set": ["lfw", "lfw"], "model": ["z", "m"], "status": ["ok", "ok"],
                         "accuracy": [0.5, 0.25], "accuracy_std": [0.0, 0.125],
                         "message": ["", ""]})
    assert verification_log(rows, {}).split("\n") == [
        "# z", "[lfw]Accuracy: 0.50000+-0.00000", "# m", "[lfw]Accuracy: 0.25000+-0.12500"]


def test_cc11_page_line_by_line(tmp_path):
    """The CC11 page: title, prose, the table, cc11.py's printout per model in a code
    block, the pairs table (one rule), ending in a newline."""
    write_cc11_table(_cc11_items(tmp_path), tmp_path / "t.parquet", tmp_path / "t.md",
                     tmp_path / "t.html", models=["m"], dataset="cc", source="f.bin")
    md = (tmp_path / "t.md").read_text()
    assert md.endswith("consecutive |\n")
    cells = [f"{90 + b:.2f}+-{1 + 0.1 * b:.2f}" for b in range(11)]
    lines = md.split("\n")
    assert lines[:7] == [
        "# CC11: cc (f.bin)", "",
        "10-fold accuracy (%, mean+-std over the 10 folds of each block: the best squared-L2 "
        "threshold of nine folds applied to the tenth), per CC11 sub-benchmark in CAST's "
        "order, as cc11.py computes and prints it. Avg: mean of the eleven accuracies +- "
        "mean of the eleven stds.", "",
        "| model | " + " | ".join(CC11_LABELS) + " | Avg |", "|---|" + "---|" * 12,
        "| m | " + " | ".join(cells) + " | 95.00+-1.50 |"]
    printout = [RULE]
    for label, cell in zip(CC11_LABELS, cells, strict=True):
        printout += [f"| {label:<11} | {cell}|", RULE]
    printout += ["", RULE, "| Avg         | 95.00+-1.50|", RULE]
    assert lines[7:13] == ["", "## As cc11.py prints it", "", "### m", "", "```"]
    assert lines[13:13 + len(printout)] == printout
    at = 13 + len(printout)
    assert lines[at:at + 9] == ["```", "", "", "## Pairs and folds", "",
                                PAIRS_PROSE.format(rules=NONMATCH), "",
                                PAIRS_HEAD.format("block"), PAIRS_RULE]
    assert len(lines) == at + 9 + 11 + 1 and lines[-1] == ""


def test_partial_metrics_and_odd_cells(tmp_path):
    """A metrics file without some columns reads NaN for them (printed '–'); an empty one
    has no figure (no_pairs); '|' in a status list becomes '/'; a rule that is not a
    failure rule adds no sentence; a CC11 set whose blocks have no counts sums to NaN,
    not 0."""
    pd.DataFrame([{"accuracy": 0.8, "accuracy_std": 0.1, "n_pairs": 10, "n_genuine": 4,
                   "n_impostor": 6, "failed_statuses": "a|b", "failed": "other"}]
                 ).to_parquet(tmp_path / "part.parquet")
    pd.DataFrame({"accuracy": pd.Series([], dtype=float)}).to_parquet(tmp_path / "empty.parquet")
    items = [{"set": "lfw", "dataset": "d", "protocol": "p", "model": "m",
              "path": str(tmp_path / "part.parquet")},
             {"set": "lfw", "dataset": "d", "protocol": "p", "model": "e",
              "path": str(tmp_path / "empty.parquet")},
             {"set": "cc", "dataset": "d", "protocol": "black", "block": "black", "model": "m",
              "path": str(tmp_path / "absent.parquet")}]
    long = read_items(items)
    assert np.isnan(long["n_failed"].iloc[0]) and np.isnan(long["n_skipped"].iloc[0])
    assert long["status"].tolist() == ["ok", "no_pairs", "missing"]
    assert np.isnan(long["n_pairs"].iloc[1])
    rows = suite_rows(long, ["lfw", "cc"], ["m"]).set_index("set")
    assert np.isnan(rows.loc["cc", "n_pairs"]) and np.isnan(rows.loc["cc", "n_failed"])
    assert np.isnan(rows.loc["cc", "n_skipped"]) and rows.loc["cc", "status"] == "incomplete"
    write_bin_suite(items, tmp_path / "s.parquet", tmp_path / "s.md", tmp_path / "s.html",
                    models=["m", "e"])
    md = (tmp_path / "s.md").read_text().split("\n")
    assert "| lfw | m | 10 | 4 | 6 | 60.00 (different) | – | a/b | – | – | – |" in md
    assert "| lfw | e | – | – | – | – | – | – | – | – | – |" in md
    assert "| black | m | – | – | – | – | – | – | – | (no metrics) | – |" in md
    assert PAIRS_PROSE.format(rules=" ") in md


def test_a_missing_row_does_not_end_the_pairs_table(tmp_path):
    """A set whose first model has no metrics file: its row says so, and the next model's
    row still follows."""
    items = [{"set": "lfw", "dataset": "d", "protocol": "p", "model": "m",
              "path": str(tmp_path / "absent.parquet")},
             {"set": "lfw", "dataset": "d", "protocol": "p", "model": "n",
              "path": _metrics(tmp_path / "n.parquet", 0.99, 0.005)}]
    rows = write_bin_suite(items, tmp_path / "s.parquet", tmp_path / "s.md",
                           tmp_path / "s.html", models=["m", "n"])
    md = (tmp_path / "s.md").read_text().split("\n")
    at = md.index("| lfw | m | – | – | – | – | – | – | – | (no metrics) | – |")
    assert md[at + 1] == ("| lfw | n | 100 | 40 | 60 | 60.00 (different) | 1 | no_face | 0 "
                          "| – | 10 consecutive |")
    assert rows["status"].tolist() == ["missing", "ok"]
    page = (tmp_path / "s.html").read_text()
    assert "<title>Verification .bin sets</title>" in page


def test_a_model_without_items_gets_a_not_evaluated_row_and_no_sets_no_rows(tmp_path):
    """Model ``n`` was evaluated on no set: its row is ``missing`` / ``not evaluated`` with
    NaN counts in float columns (as the other rows' counts); no set at all: an empty table
    with the suite's eleven columns."""
    items = [{"set": "lfw", "dataset": "d", "protocol": "p", "model": "m",
              "path": _metrics(tmp_path / "m.parquet", 0.99, 0.005)}]
    long = read_items(items)
    rows = suite_rows(long, ["lfw"], ["n"])
    assert rows[["status", "message", "failed", "dataset"]].iloc[0].tolist() == [
        "missing", "not evaluated", "", ""]
    for c in ("accuracy", "accuracy_std", "n_pairs", "n_failed", "n_skipped"):
        assert rows[c].dtype == np.float64 and np.isnan(rows[c].iat[0]), c
    empty = suite_rows(long, [], ["m"])
    assert len(empty) == 0 and empty.columns.tolist() == [
        "set", "model", "accuracy", "accuracy_std", "status", "message", "n_pairs",
        "n_failed", "n_skipped", "failed", "dataset"]


def test_a_cc11_set_sums_what_its_blocks_counted_and_joins_rules_and_datasets(tmp_path):
    """One CC11 block evaluated (the others absent): the set's pair counts are that
    block's, not NaN; two blocks under two failure rules from two datasets: both named,
    comma separated, in order of appearance."""
    items = _cc11_items(tmp_path)
    for it in items[1:]:
        it["path"] = str(tmp_path / "absent.parquet")
    rows = suite_rows(read_items(items), ["cc11_val"], ["m"])
    assert rows[["n_pairs", "n_failed", "n_skipped"]].iloc[0].tolist() == [100, 1, 0]
    assert rows["status"].iat[0] == "incomplete"
    items = _cc11_items(tmp_path)
    items[1]["path"] = _metrics(tmp_path / "drop.parquet", 0.9, 0.01, failed="drop")
    items[1]["dataset"] = "other"
    rows = suite_rows(read_items(items), ["cc11_val"], ["m"])
    assert rows["failed"].iat[0] == "nonmatch, drop"
    assert rows["dataset"].iat[0] == "cc, other"
    assert rows["n_pairs"].iat[0] == 1100


def test_a_cc11_table_of_one_block_and_its_default_title(tmp_path):
    """One block's item: the average row takes that item's set; cc11_markdown without a
    source titles the dataset alone."""
    from facecast.evaluate.bin_suite import cc11_markdown

    items = _cc11_items(tmp_path)[:1]
    table = write_cc11_table(items, tmp_path / "t.parquet", tmp_path / "t.md",
                             tmp_path / "t.html", models=["m"], dataset="cc", source="x")
    assert table["set"].tolist() == ["cc11_val", "cc11_val"]
    assert table["block"].tolist() == [CC11_NAMES[0], "average"]
    md = cc11_markdown(read_items(items), ["m"], dataset="cc")
    assert md.split("\n")[0] == "# CC11: cc"
