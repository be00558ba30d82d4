"""Issue 51: the BFW survivors of mutation testing, each pinned by numbers a mutant changes.

The datatable reader (a fractional fold, an infinite score, an image whose first pair is an
impostor pair), the per-group thresholds (folds whose data differ, so a threshold fitted
on the held-out fold gives other numbers; the bootstrap interval recomputed from its own
draws) and the BFW table (a table whose every cell is distinct, read block by block).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from facecast.config.fair_sets import BFW_COLUMNS
from facecast.datasets.bfw import bfw_pairs, parse_scores, read_bfw, read_table
from facecast.evaluate.bands import replicate_weights
from facecast.fairness.bfw_table import bfw_markdown
from facecast.fairness.group_thresholds import group_threshold_table

# --- the datatable ------------------------------------------------------------------


def _datatable(tmp_path, rows: list[dict], scores: dict[str, list[str]] | None = None):
    """A BFW datatable CSV of ``rows`` (BFW's columns; absent ones empty) and score columns
    given as text."""
    df = pd.DataFrame([{c: r.get(c, "") for c in BFW_COLUMNS} for r in rows])
    for name, cells in (scores or {}).items():
        df[name] = cells
    path = tmp_path / "bfw-datatable.csv"
    df.to_csv(path, index=False)
    return path


def _pair(p1: str, p2: str, id1: str, id2: str, a1: str, a2: str, *, fold="1",
          label="0") -> dict:
    return {"fold": fold, "p1": p1, "p2": p2, "label": label, "id1": id1, "id2": id2,
            "a1": a1, "a2": a2, "g1": a1[1], "g2": a2[1], "e1": a1[0], "e2": a2[0],
            "att1": a1, "att2": a2}


def test_an_image_first_seen_in_an_impostor_pair_takes_its_own_side(tmp_path):
    """p1's identity and labels come from id1 / a1 / g1 / e1, p2's from the *2 columns:
    the first pair here is an impostor pair, so a swap gives the other person's id."""
    path = _datatable(tmp_path, [
        _pair("x/a.jpg", "y/b.jpg", "17", "42", "AF", "WM"),
        _pair("y/b.jpg", "y/c.jpg", "42", "42", "WM", "WM", label="1"),
        _pair("z/d.jpg", "x/a.jpg", "5", "17", "BM", "AF")])
    raw = read_bfw(path)
    assert raw["path"].tolist() == ["x/a.jpg", "y/b.jpg", "y/c.jpg", "z/d.jpg"]
    assert raw["identity"].tolist() == ["17", "42", "42", "5"]
    assert raw["label_bfw_subgroup"].tolist() == ["AF", "WM", "WM", "BM"]
    assert raw["label_bfw_gender"].tolist() == ["F", "M", "M", "M"]
    assert raw["label_bfw_ethnicity"].tolist() == ["A", "W", "W", "B"]


def test_a_fold_that_is_not_an_integer_is_a_bad_fold(tmp_path):
    folds = ["1", "2.5", "3.0", "", "x", "4"]
    path = _datatable(tmp_path, [_pair(f"a{i}.jpg", f"b{i}.jpg", "1", "2", "AF", "AM",
                                       fold=f) for i, f in enumerate(folds)])
    p = bfw_pairs(read_table(path))
    assert p["status"].tolist() == ["ok", "bad_fold", "ok", "bad_fold", "bad_fold", "ok"]
    assert p["fold"].tolist() == ["1", "none", "3", "none", "none", "4"]
    assert p["message"].iloc[1] == "datatable line 3: fold is empty or not an integer"


@pytest.mark.parametrize("extra", [[], ["abc"]], ids=["numbers", "with-text"])
def test_an_infinite_score_is_nan_with_a_note(tmp_path, extra):
    """Both parsing paths (every cell a number; a cell of text) turn +-inf into NaN."""
    cells = ["0.5", "inf", "-inf", "", "-0.25", *extra]
    path = _datatable(tmp_path, [_pair(f"a{i}.jpg", f"b{i}.jpg", "1", "2", "AF", "AM")
                                 for i in range(len(cells))], {"m": cells})
    values, notes = parse_scores(read_table(path, ["m"]), "m")
    assert np.array_equal(values, [0.5, np.nan, np.nan, np.nan, -0.25] + [np.nan] * len(extra),
                          equal_nan=True)
    assert notes.tolist() == (["", "m: score is not finite", "m: score is not finite",
                               "m: score missing", ""]
                              + ["m: score is not a number"] * len(extra))


# --- per-group thresholds -----------------------------------------------------------


def _ref_threshold(scores: np.ndarray, weights: np.ndarray, target: float) -> float:
    """The definition, by brute force: the lowest ``nextafter(u)`` over the distinct scores
    u with ``weight(score > u) <= target * weight`` (NaN without weight)."""
    total = weights.sum()
    if total <= 0:
        return np.nan
    for u in np.unique(scores[weights > 0]):
        if weights[scores > u].sum() <= target * total + 1e-9 * max(total, 1):
            return float(np.nextafter(u, np.inf))
    raise AssertionError("unreachable: nothing scores above the highest score")


def _three_folds(seed: int = 3):
    """Two groups and pairs across them (group None) in three folds whose scores differ
    (fold k shifts every score by 0.15 k), rounded to 0.01 so that scores tie."""
    rng = np.random.default_rng(seed)
    rows = []
    for fold in (1, 2, 3):
        for gi, name in enumerate(("A", "B")):
            people = np.arange(8) + 100 * gi + 10 * fold
            for _ in range(40):
                a, b = rng.choice(people, 2, replace=False)
                rows.append((str(fold), name, 0, a, b,
                             rng.normal(0.15 * fold + 0.1 * gi, 0.1)))
            for _ in range(15):
                a = rng.choice(people)
                rows.append((str(fold), name, 1, a, a, rng.normal(0.5 + 0.15 * fold, 0.1)))
        for _ in range(10):
            rows.append((str(fold), None, 0, 10 * fold, 100 + 10 * fold,
                         rng.normal(0.15 * fold, 0.1)))
    folds, group, label, ida, idb, score = map(np.array, zip(*rows, strict=True))
    return (np.round(score.astype(float), 2), label.astype(bool), group.astype(object),
            folds.astype(str), ida.astype(str), idb.astype(str))


TARGETS = [0.1, 0.05]


def _twinned(s: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Every second impostor scores the next float above the one before it: a threshold
    fitted just above a score (``nextafter``) then often equals another pair's score, so
    ``score >= threshold`` and ``score > threshold`` count differently."""
    out = s.copy()
    imp = np.flatnonzero(~y)
    out[imp[1::2]] = np.nextafter(out[imp[0:-1:2]][: len(imp[1::2])], np.inf)
    return out


def test_cross_validated_rates_use_thresholds_of_the_other_folds():
    """Every ``*_cv`` figure recomputed: thresholds from the other two folds' impostors
    (global: every impostor; group: the group's), counted on the held-out fold, pooled.
    A threshold fitted on the held-out fold, or a deviation not divided by the target,
    gives other numbers (the folds differ)."""
    s, y, g, folds, _, _ = _three_folds()
    t = group_threshold_table(s, y, g, TARGETS, folds=folds)
    assert len(t) == 4 and (t["n_folds_cv"] == 3).all()
    for _, row in t.iterrows():
        target, in_g = row["target_fmr"], g == row["group"]
        fm = {"global": 0, "group": 0}
        tp = {"global": 0, "group": 0}
        for f in ("1", "2", "3"):
            train, test = folds != f, (folds == f) & in_g
            ones = np.ones(int((train & ~y).sum()))
            thr = {"global": _ref_threshold(s[train & ~y], ones, target),
                   "group": _ref_threshold(s[train & ~y & in_g],
                                           np.ones(int((train & ~y & in_g).sum())), target)}
            for key, th in thr.items():
                fm[key] += int((s[test & ~y] >= th).sum())
                tp[key] += int((s[test & y] >= th).sum())
        n_imp, n_gen = int((in_g & ~y).sum()), int((in_g & y).sum())
        assert (n_imp, n_gen) == (120, 45)
        for key in ("global", "group"):
            fmr = fm[key] / n_imp
            assert row[f"fmr_{key}_cv"] == pytest.approx(fmr, abs=1e-12)
            assert row[f"tar_{key}_cv"] == pytest.approx(tp[key] / n_gen, abs=1e-12)
            assert row[f"deviation_{key}_cv"] == pytest.approx((fmr - target) / target,
                                                               abs=1e-12)
    # the held-out fold's own threshold would give other figures: the data make them differ
    a = t[(t["group"] == "A") & (t["target_fmr"] == 0.1)].iloc[0]
    assert a["fmr_global_cv"] != a["fmr_global"] and a["deviation_group_cv"] != 0


def test_point_figures_follow_the_definition():
    s, y, g, folds, _, _ = _three_folds()
    t = group_threshold_table(s, y, g, TARGETS, folds=folds)
    for _, row in t.iterrows():
        target, in_g = row["target_fmr"], g == row["group"]
        t_glob = _ref_threshold(s[~y], np.ones(int((~y).sum())), target)
        t_own = _ref_threshold(s[~y & in_g], np.ones(int((~y & in_g).sum())), target)
        assert row["global_threshold"] == t_glob and row["group_threshold"] == t_own
        for key, th in (("global", t_glob), ("group", t_own)):
            fmr = (s[~y & in_g] >= th).mean()
            assert row[f"fmr_{key}"] == pytest.approx(fmr, abs=1e-12)
            assert row[f"deviation_{key}"] == pytest.approx((fmr - target) / target, abs=1e-12)
            assert row[f"tar_{key}"] == pytest.approx((s[y & in_g] >= th).mean(), abs=1e-12)


def test_bootstrap_interval_recomputed_from_its_own_draws():
    """The replicates are the identity-clustered weights of ``replicate_weights`` (same
    seed); in each, both thresholds are re-fitted on the weighted impostors and the group's
    deviation is its weighted impostors' FMR - genuine pairs have no say. The interval is
    the 2.5 / 97.5 % quantile of those deviations (confidence 0.95), lower below upper."""
    s, y, g, folds, ida, idb = _three_folds()
    s = _twinned(s, y)
    n_boot, seed = 40, 11
    t = group_threshold_table(s, y, g, TARGETS, identity_a=ida, identity_b=idb,
                              n_boot=n_boot, seed=seed)
    w = np.concatenate(list(replicate_weights(ida, idb, n_boot, seed)))
    assert w.shape == (n_boot, len(s)) and (t["n_boot"] == n_boot).all()
    for _, row in t.iterrows():
        target, sub = row["target_fmr"], (g == row["group"]) & ~y
        devs = {"global": [], "group": []}
        for wb in w:
            thr = {"global": _ref_threshold(s[~y], wb[~y], target),
                   "group": _ref_threshold(s[sub], wb[sub], target)}
            for key, th in thr.items():
                fmr = (wb[sub] * (s[sub] >= th)).sum() / wb[sub].sum()
                devs[key].append((fmr - target) / target)
        for key, d in devs.items():
            lo, hi = np.nanquantile(np.array(d), [0.025, 0.975])
            assert lo < hi
            assert row[f"deviation_{key}_lo"] == pytest.approx(lo, abs=1e-9)
            assert row[f"deviation_{key}_hi"] == pytest.approx(hi, abs=1e-9)


# --- the BFW table ------------------------------------------------------------------


def _distinct_table() -> pd.DataFrame:
    """Two subgroups, two intended FMRs, every figure column distinct from every other, so
    a block that prints another column (global for own, in-sample for cross-validated)
    prints other numbers. BM has 50 impostors: its own threshold and deviations at FMR
    0.01 are n/a, its TAR under the global threshold (1,000 impostors) is not."""
    rows = []
    for ti, target in enumerate((0.1, 0.01)):
        for gi, group in enumerate(("AF", "BM")):
            k = 10 * ti + gi  # 0, 1, 10, 11
            rows.append({"model": "m", "target_fmr": target, "group": group,
                         "global_pairs": "all", "n_impostor": 500 - 450 * gi, "n_genuine": 40,
                         "n_failed": 0, "n_impostor_global": 1000,
                         "resolvable": not (gi == 1 and ti == 1),
                         "global_threshold": 0.31 + 0.2 * ti,
                         "group_threshold": 0.3012 + 0.2 * ti + 0.02 * gi,
                         "fmr_global": np.nan, "fmr_group": np.nan,
                         "deviation_global": 0.111 + 0.01 * k,
                         "deviation_group": -0.222 - 0.01 * k,
                         "deviation_global_cv": 0.333 + 0.01 * k,
                         "deviation_group_cv": -0.444 - 0.01 * k,
                         "tar_global": 0.501 + 0.01 * k, "tar_group": 0.602 + 0.01 * k,
                         "tar_global_cv": 0.703 + 0.01 * k, "tar_group_cv": 0.804 + 0.01 * k})
    return pd.DataFrame(rows)


def _blocks(md: str) -> dict[str, list[str]]:
    """``### heading`` -> the table rows under it (header and rule lines dropped)."""
    out = {}
    for part in md.split("\n### ")[1:]:
        head, _, body = part.partition("\n")
        out[head] = [line for line in body.splitlines()
                     if line.startswith("| ") and not line.startswith(("| intended", "| subgroup"))]
    return out


def test_bfw_table_prints_each_column_in_its_block():
    t = _distinct_table()
    blocks = _blocks(bfw_markdown(t, "bfw"))
    assert blocks["Thresholds (accept iff score >= threshold)"] == [
        "| 0.1 | 0.3100 | 0.3012 | 0.3212 |", "| 0.01 | 0.5100 | 0.5012 | n/a (50 impostors) |"]
    cv = ", cross-validated over the protocol's folds"
    dev = {("Deviation (%) under the global threshold", "deviation_global"):
           ["| 0.1 | +11.1 | +12.1 |", "| 0.01 | +21.1 | n/a (50 impostors) |"],
           ("Deviation (%) under each subgroup's own threshold", "deviation_group"):
           ["| 0.1 | -22.2 | -23.2 |", "| 0.01 | -32.2 | n/a (50 impostors) |"],
           (f"Deviation (%) under the global threshold{cv}", "deviation_global_cv"):
           ["| 0.1 | +33.3 | +34.3 |", "| 0.01 | +43.3 | n/a (50 impostors) |"],
           (f"Deviation (%) under each subgroup's own threshold{cv}", "deviation_group_cv"):
           ["| 0.1 | -44.4 | -45.4 |", "| 0.01 | -54.4 | n/a (50 impostors) |"]}
    for (head, _), rows in dev.items():
        assert blocks[head] == rows, head
    tar = blocks["TAR at the intended FMR: the global threshold (global) and the "
                 "subgroup's own (own)"]
    assert tar == ["| AF | global | 0.501 | 0.601 |", "| AF | own | 0.602 | 0.702 |",
                   "| BM | global | 0.511 | 0.611 |", "| BM | own | 0.612 | n/a (50 impostors) |",
                   "| Avg. | global | 0.506 | 0.606 |",
                   "| Avg. | own | 0.607 | n/a (a subgroup is n/a) |"]
    tar_cv = blocks["TAR at the intended FMR, cross-validated over the protocol's folds"]
    assert tar_cv == ["| AF | global | 0.703 | 0.803 |", "| AF | own | 0.804 | 0.904 |",
                      "| BM | global | 0.713 | 0.813 |",
                      "| BM | own | 0.814 | n/a (50 impostors) |",
                      "| Avg. | global | 0.708 | 0.808 |",
                      "| Avg. | own | 0.809 | n/a (a subgroup is n/a) |"]
    # without cross-validated figures (a protocol of one fold) the cv blocks are absent
    one = _blocks(bfw_markdown(t.assign(deviation_group_cv=np.nan), "bfw"))
    assert not [h for h in one if "cross-validated" in h] and len(one) == 4
