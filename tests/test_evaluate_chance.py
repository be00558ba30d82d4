"""Issue 50, item 3: accuracy next to what chance gives, AUC and TAR@FAR first where the
classes are imbalanced, held-out pairs counted on the page."""

import numpy as np
import pandas as pd
import pytest

from facecast.evaluate.chance import (
    chance_accuracy,
    constant_answer,
    held_out_text,
    imbalanced,
    lead_lines,
)
from facecast.evaluate.summary import summary_markdown


def _long(n_gen=28, n_imp=146, held=16):
    """The issue's run: a random network on 20 photos of 5 people, all_pairs."""
    return pd.DataFrame({
        "model": ["random"], "benchmark": ["all_pairs"], "accuracy": [0.9025],
        "accuracy_std": [0.05], "auc": [0.55], "eer": [0.45], "tar@far=1e-3": [0.0],
        "resolvable@far=1e-3": [False], "n_genuine": [n_gen], "n_impostor": [n_imp],
        "n_pairs": [n_gen + n_imp], "n_protocol_pairs": [n_gen + n_imp],
        "n_held_out": [held], "failed": ["nonmatch"], "n_failed": [0], "n_skipped": [0]})


def test_chance_accuracy_of_the_constant_answer():
    assert chance_accuracy(28, 146) == pytest.approx(146 / 174)  # 83.9 %
    assert constant_answer(28, 146) == "different" and constant_answer(30, 10) == "same"
    assert chance_accuracy(50, 50) == 0.5 and not imbalanced(50, 50)
    assert imbalanced(28, 146) and not imbalanced(60, 40) and imbalanced(61, 39)
    assert np.isnan(chance_accuracy(0, 0))
    assert held_out_text(16, 190) == "16 of 190 pairs held out (val)"


def test_imbalanced_summary_leads_with_auc_and_counts_chance():
    md = summary_markdown(_long(), ["all_pairs"], ["random"], fars=[1e-3])
    lines = md.splitlines()
    assert lines[2] == ("Imbalanced classes on all_pairs (28 genuine, 146 impostor pairs: "
                        "always answering \"different\" scores 83.91 %): AUC and TAR@FAR "
                        "come first, the 10-fold accuracy after them beside what chance "
                        "gives.")
    assert md.index("## TAR at FAR=0.001") < md.index("## AUC (%)") < \
        md.index("## 10-fold accuracy") < md.index("### Accuracy beside chance")
    row = next(x for x in lines if x.startswith("| all_pairs | 28 |"))
    assert row == ("| all_pairs | 28 | 146 | 16 of 190 pairs held out (val) | different | "
                   "83.91 | +6.34 |")


def test_balanced_summary_keeps_accuracy_first():
    long = _long(100, 100, 0).assign(accuracy=0.48)
    md = summary_markdown(long, ["all_pairs"], ["random"], fars=[1e-3])
    assert lead_lines(long, ["all_pairs"]) == []
    assert md.splitlines()[2].startswith("10-fold accuracy")
    assert md.index("### Accuracy beside chance") < md.index("## TAR at FAR")
    row = next(x for x in md.splitlines() if x.startswith("| all_pairs | 100 |"))
    assert row == "| all_pairs | 100 | 100 | 0 | different | 50.00 | -2.00 |"


def test_bin_suite_pairs_table_shows_counts_and_the_constant_answer():
    """The .bin suite / CC11 pairs table: genuine and impostor counts and the constant
    answer's accuracy beside every row (80 % for 2 genuine and 8 impostor pairs)."""
    from facecast.evaluate.bin_suite import _chance_cell, _pairs_lines

    assert _chance_cell(2, 8) == "80.00 (different)"
    assert _chance_cell(9, 1) == "90.00 (same)"
    assert _chance_cell(float("nan"), 3) == "–"
    long = pd.DataFrame([{"set": "lfw", "block": "", "model": "m", "status": "ok",
                          "n_pairs": 10, "n_genuine": 2, "n_impostor": 8, "n_failed": 1,
                          "failed_statuses": "no_face: 1", "n_skipped": 0,
                          "skipped_statuses": "", "folds": "10 blocks", "failed": "nonmatch"}])
    lines = _pairs_lines(long, "set")
    assert "| lfw | m | 10 | 2 | 8 | 80.00 (different) | 1 | no_face: 1 | 0 | – | 10 blocks |" \
        in lines
