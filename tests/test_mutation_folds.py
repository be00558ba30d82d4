"""Issue 51: the fold rule of the 10-fold accuracy (facecast.evaluate.folds), every branch
pinned by its folds and its note, so a mutant of `make mutate MODULES=evaluate.folds` that
changes a fold, a default or a word of the note fails here."""

from __future__ import annotations

import numpy as np
import pandas as pd

from facecast.evaluate.folds import accuracy_test_mask, evaluation_folds, scored_folds
from facecast.evaluate.protocols import stratified_folds


def _pairs(folds: list[str] | None, n: int = 12) -> pd.DataFrame:
    df = pd.DataFrame({"label": [1, 0] * (n // 2),
                       "identity_a": [f"p{i // 4}" for i in range(n)]})
    if folds is not None:
        df["fold"] = folds
    return df


def test_the_held_out_fold_is_outside_the_test_unless_included():
    p = _pairs(["1", "val", "2", "val", "1", "2"], 6)
    assert accuracy_test_mask(p).tolist() == [True, False, True, False, True, True]
    assert accuracy_test_mask(p, True).tolist() == [True] * 6
    assert accuracy_test_mask(p, include_val=False).tolist() == accuracy_test_mask(p).tolist()
    assert accuracy_test_mask(_pairs(None, 4)).tolist() == [True] * 4


def test_the_protocols_own_folds_are_kept_with_their_note():
    folds = ["2", "val", "10", "1", "2", "val"]
    out, note = evaluation_folds(_pairs(folds, 6))
    assert out.tolist() == ["2", "", "10", "1", "2", ""]
    assert note == "from the protocol's folds 1, 2, 10"
    out, note = evaluation_folds(_pairs(["0", "1", "1", "0"], 4), note="CAST's lists")
    assert out.tolist() == ["0", "1", "1", "0"] and note == "CAST's lists"
    # with the held-out fold included, `val` is one more protocol fold
    out, note = evaluation_folds(_pairs(folds, 6), include_val=True)
    assert out.tolist() == folds and note == "from the protocol's folds 1, 2, 10, val"


def test_one_fold_is_dealt_over_n_folds_stratified_by_label_and_identity():
    p = _pairs(["a"] * 10 + ["val"] * 2)
    out, note = evaluation_folds(p, n_folds=3, seed=5)
    test = np.arange(12) < 10
    want = stratified_folds(p["label"].to_numpy()[test],
                            p["identity_a"].to_numpy()[test], 3, 5)
    assert out[test].tolist() == want.tolist() and out[~test].tolist() == ["", ""]
    assert sorted(set(want)) == ["0", "1", "2"]  # 10 pairs over three folds
    assert note == "stratified by label and identity over the protocol's single fold (a), " \
                   "3 folds, seed 5"
    # another seed deals them otherwise; the defaults are 10 folds, seed 0
    assert evaluation_folds(p, n_folds=3, seed=6)[0].tolist() != out.tolist()
    out10, note10 = evaluation_folds(p)
    assert out10[test].tolist() == stratified_folds(
        p["label"].to_numpy()[test], p["identity_a"].to_numpy()[test], 10, 0).tolist()
    assert note10.endswith("(a), 10 folds, seed 0")


def test_without_identities_the_folds_are_stratified_by_label_only():
    p = _pairs(["x"] * 8, 8).assign(identity_a="")
    out, note = evaluation_folds(p, n_folds=2, seed=1)
    assert out.tolist() == stratified_folds(p["label"].to_numpy(), None, 2, 1).tolist()
    assert note == "stratified by label over the protocol's single fold (x), 2 folds, seed 1"
    out2, note2 = evaluation_folds(p.drop(columns="identity_a"), n_folds=2, seed=1)
    assert out2.tolist() == out.tolist() and note2 == note
    # every pair held out: no fold at all
    none, note = evaluation_folds(_pairs(["val"] * 4, 4))
    assert none.tolist() == [""] * 4
    assert note == "stratified by label over the protocol's single fold (-), 10 folds, seed 0"


def test_scored_folds_read_back_or_form_with_the_given_settings():
    p = _pairs(["a"] * 10 + ["val"] * 2)
    assert scored_folds(p.assign(eval_fold=[3] * 6 + [""] * 6)).tolist() == \
        ["3"] * 6 + [""] * 6
    one = _pairs(["a"] * 30, 30)
    got = scored_folds(one, n_folds=3, seed=5)
    assert got.tolist() == evaluation_folds(one, n_folds=3, seed=5)[0].tolist()
    assert sorted(set(got)) == ["0", "1", "2"]
    assert scored_folds(one, n_folds=3, seed=6).tolist() != got.tolist()  # the seed is used
    assert sorted(set(scored_folds(one)), key=int) == [str(k) for k in range(10)]
    assert scored_folds(one).tolist() == evaluation_folds(one)[0].tolist()
    # the held-out pairs get folds only with include_val (the defaults keep them out)
    assert scored_folds(p)[10:].tolist() == ["", ""]
    assert scored_folds(p, include_val=True).tolist() == \
        evaluation_folds(p, include_val=True)[0].tolist() == ["a"] * 10 + ["val"] * 2


def test_pairs_without_a_fold_column_are_one_unnamed_fold():
    p = _pairs(None, 8)
    out, note = evaluation_folds(p, n_folds=2, seed=1)
    assert out.tolist() == stratified_folds(p["label"].to_numpy(), p["identity_a"].to_numpy(),
                                            2, 1).tolist()
    assert note == "stratified by label and identity over the protocol's single fold (), " \
                   "2 folds, seed 1"
