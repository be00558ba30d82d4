"""Issue 51: the survivors of mutation testing in :mod:`facecast.fairness.group_thresholds`,
each pinned by numbers a mutant changes.

The deviation figure (what each panel draws: points, error bars, crosses, notes, axes,
sizes), the weighted thresholds of :class:`_Ranked` (a target that allows every
impostor, rows without weight, failed pairs at ``-inf``), and the table's columns that
the other tests leave alone (``false_matches_*``, ``failed_rate``, ``confidence``).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from test_mutation_bfw import _ref_threshold as _threshold  # the brute-force definition

from facecast.fairness import group_thresholds as gt

# --- the deviation figure -----------------------------------------------------------


def _plot_table(with_bands: bool = True) -> pd.DataFrame:
    """Two targets, two groups; every deviation distinct. At 0.01 group B is not
    resolvable (40 impostors). Bands: A's global lower end and own upper end on the wrong
    side of the value (the error clipped to 0), B's global upper end NaN (drawn as 0)."""
    rows = []
    for ti, target in enumerate((0.1, 0.01)):
        for gi, group in enumerate(("A", "B")):
            k = 2 * ti + gi
            row = {"target_fmr": target, "group": group, "n_impostor": 500 - 460 * gi,
                   "resolvable": not (ti == 1 and gi == 1),
                   "deviation_global": 0.1 + 0.1 * k, "deviation_group": -0.05 - 0.1 * k}
            if with_bands:
                row.update({"deviation_global_lo": 0.05 + 0.1 * k + 0.1 * (gi == 0),
                            "deviation_global_hi": np.nan if gi else 0.3 + 0.1 * k,
                            "deviation_group_lo": -0.25 - 0.1 * k,
                            "deviation_group_hi": (-0.06 if gi == 0 else 0.02) - 0.1 * k,
                            "deviation_global_cv": 0.7 + 0.01 * k,
                            "deviation_group_cv": -0.7 - 0.01 * k})
            rows.append(row)
    return pd.DataFrame(rows)


def _draw(monkeypatch, tmp_path, table: pd.DataFrame, title: str | None = None):
    """Run :func:`gt.plot_deviation` (its default title unless ``title``), keeping the
    figure it saves (and the PNG)."""
    kept = {}
    real = gt.save_figure

    def keep(fig, path, **kw):
        kept["fig"], kept["kw"] = fig, kw
        return real(fig, path, **kw)

    monkeypatch.setattr(gt, "save_figure", keep)
    path = tmp_path / "dev.png"
    if title is None:
        gt.plot_deviation(table, path)
    else:
        gt.plot_deviation(table, path, title=title)
    return kept["fig"], kept["kw"], path


def _errorbars(ax):
    """label -> (x, y, lower error, upper error, colour, cap size) of each errorbar."""
    from matplotlib.container import ErrorbarContainer

    out = {}
    for c in ax.containers:
        assert isinstance(c, ErrorbarContainer)
        line, caps, bars = c.lines
        x, y = line.get_xdata(), line.get_ydata()
        if bars:
            seg = np.array(bars[0].get_segments())          # (n, 2, 2): bottom, top
            lower, upper = y - seg[:, 0, 1], seg[:, 1, 1] - y
            cap = caps[0].get_markersize() / 2
        else:
            lower = upper = None
            cap = None
        out[c.get_label()] = (np.asarray(x), np.asarray(y), lower, upper,
                              line.get_color(), cap, line.get_marker(),
                              line.get_linestyle())
    return out


def test_deviation_figure_draws_every_figure_of_the_table(monkeypatch, tmp_path):
    """One panel per target (4.8 x 3.8 in each, 100 dpi): global deviations in red at x -
    0.15, the groups' own in blue at x + 0.15, with error bars value - lo and hi - value
    (clipped at 0, NaN as 0), cap size 3; cross-validated values as crosses at the same
    x; an unresolvable group noted at (its x, 0); a zero line; the legend (first panel)."""
    import matplotlib.colors as mc
    import matplotlib.image as mimg

    t = _plot_table()
    fig, kw, path = _draw(monkeypatch, tmp_path, t, title="my title")
    assert kw == {"dpi": 100}
    h, w = mimg.imread(path).shape[:2]
    assert (w, h) == (960, 380)
    assert tuple(fig.get_size_inches()) == pytest.approx((9.6, 3.8))
    assert fig.get_layout_engine().__class__.__name__ == "ConstrainedLayoutEngine"
    assert fig._suptitle.get_text() == "my title" and fig._suptitle.get_fontsize() == 9
    assert len(fig.axes) == 2
    red, blue = mc.to_rgba("tab:red"), mc.to_rgba("tab:blue")
    for ti, (ax, target) in enumerate(zip(fig.axes, (0.1, 0.01), strict=True)):
        sub = t[t["target_fmr"] == target].reset_index(drop=True)
        assert ax.get_title() == f"target FMR {target:g}" and ax.title.get_fontsize() == 9
        assert ax.get_ylabel() == "(FMR_s - f*) / f*"
        assert list(ax.get_xticks()) == [0, 1]
        ticks = ax.get_xticklabels()
        assert [x.get_text() for x in ticks] == ["A", "B"]
        assert {(x.get_rotation(), x.get_ha(), x.get_fontsize()) for x in ticks} == {
            (30.0, "right", 8.0)}
        bars = _errorbars(ax)
        assert set(bars) == {"global threshold", "group threshold"}
        for key, off, colour in (("global", -0.15, red), ("group", 0.15, blue)):
            x, y, lower, upper, col, cap, marker, style = bars[f"{key} threshold"]
            v = sub[f"deviation_{key}"].to_numpy()
            lo, hi = sub[f"deviation_{key}_lo"].to_numpy(), sub[f"deviation_{key}_hi"].to_numpy()
            assert np.allclose(x, [off, 1 + off]) and np.allclose(y, v)
            assert np.allclose(lower, [max(a - b, 0) for a, b in zip(v, lo, strict=True)])
            assert np.allclose(upper, [0 if np.isnan(b) else max(b - a, 0)
                                       for a, b in zip(v, hi, strict=True)])
            assert mc.to_rgba(col) == colour and cap == 3
            assert marker == "o" and style == "None"
            crosses = [ln for ln in ax.lines if ln.get_label() == f"{key} (cross-validated)"]
            assert len(crosses) == 1
            cx = crosses[0]
            assert cx.get_marker() == "x" and mc.to_rgba(cx.get_color()) == colour
            assert np.allclose(cx.get_xdata(), [off, 1 + off])
            assert np.allclose(cx.get_ydata(), sub[f"deviation_{key}_cv"])
        # A's global lower band lies above its value: clipped, not negative
        assert bars["global threshold"][2][0] == 0 and bars["global threshold"][3][1] == 0
        assert bars["group threshold"][3][0] == 0
        zero = [ln for ln in ax.lines if list(ln.get_ydata()) == [0, 0]]
        assert len(zero) == 1 and mc.to_rgba(zero[0].get_color()) == mc.to_rgba("grey")
        assert zero[0].get_linewidth() == 0.8
        grid = ax.xaxis.get_gridlines()[0]
        assert grid.get_visible() and grid.get_alpha() == 0.3
        notes = [(x.get_text(), x.xy, x.get_fontsize(), x.get_ha(), x.get_va())
                 for x in ax.texts]
        assert notes == ([] if ti == 0 else [("n/a (40 imp.)", (1, 0), 6, "center", "bottom")])
        legend = ax.get_legend()
        if ti == 0:
            assert sorted(x.get_text() for x in legend.get_texts()) == sorted(
                ["global threshold", "group threshold", "global (cross-validated)",
                 "group (cross-validated)"])
            assert {x.get_fontsize() for x in legend.get_texts()} == {7}
        else:
            assert legend is None


def test_deviation_figure_without_bands_and_default_title(monkeypatch, tmp_path):
    """Without bootstrap and cross-validated columns: no error bars, no crosses; the
    default title; one target: one panel of 4.8 x 3.8 in."""
    t = _plot_table(with_bands=False)
    t = t[t["target_fmr"] == 0.1]
    fig, _, path = _draw(monkeypatch, tmp_path, t)
    assert fig._suptitle.get_text() == "deviation from the intended FMR"
    assert len(fig.axes) == 1 and tuple(fig.get_size_inches()) == pytest.approx((4.8, 3.8))
    ax = fig.axes[0]
    bars = _errorbars(ax)
    assert bars["global threshold"][2] is None and bars["group threshold"][2] is None
    assert np.allclose(bars["group threshold"][1], [-0.05, -0.15])
    assert not [ln for ln in ax.lines if "cross-validated" in ln.get_label()]
    assert not ax.texts


@pytest.mark.filterwarnings("ignore:No artists with labels")
def test_deviation_figure_of_an_empty_table(monkeypatch, tmp_path):
    """No target: one empty panel (zero line only), still written."""
    fig, _, path = _draw(monkeypatch, tmp_path, _plot_table().iloc[:0])
    assert path.exists() and len(fig.axes) == 1 and not fig.axes[0].containers
    assert tuple(fig.get_size_inches()) == pytest.approx((4.8, 3.8))


# --- weighted thresholds (_Ranked) ----------------------------------------------------


def test_weighted_threshold_without_scores_is_nan_per_row():
    """No impostors: one NaN per weight row (a float NaN, not None)."""
    got = gt.weighted_threshold(np.zeros(0), np.zeros((3, 0)), 0.1)
    assert got.shape == (3,) and got.dtype == np.float64 and np.isnan(got).all()
    assert np.isnan(gt.threshold_at_fmr(np.zeros(0), 0.1))


def test_weighted_threshold_rows_target_one_and_empty_weight():
    """Per weight row: unit weights give the unweighted rule (k = floor(target n) allowed,
    just above the next); a target of 1 allows every impostor: the lowest score itself;
    a row of total weight 1 (quarters) is a threshold, a row of no weight is NaN."""
    s = np.array([0.4, 0.1, 0.3, 0.2])
    w = np.array([[1.0, 1, 1, 1], [0.25, 0.25, 0.25, 0.25], [0, 0, 0, 0], [1, 0, 0, 3]])
    half = gt.weighted_threshold(s, w, 0.5)
    # 2 of 4 allowed: just above the third highest (0.2); row 4: 0.2 weighs 3 of 4
    assert half[0] == half[1] == np.nextafter(0.2, 1) and np.isnan(half[2])
    assert half[3] == np.nextafter(0.2, 1)
    assert gt.threshold_at_fmr(s, 0.5) == np.nextafter(0.2, 1)
    assert gt.threshold_at_fmr(s, 0.25) == np.nextafter(0.3, 1)
    one = gt.weighted_threshold(s, w, 1.0)
    assert one[0] == one[1] == 0.1 and np.isnan(one[2]) and gt.threshold_at_fmr(s, 1.0) == 0.1


def test_weighted_threshold_tolerance_is_relative_to_the_weight():
    """``weight(score > u) <= target * total + 1e-9 * max(total, 1)``: on a total weight
    of 1e9 the slack is 1 (a weight of 5e8 + 1 above 0 still meets 0.5), on a total of 1
    it is 1e-9 (1.5e-9 over half does not)."""
    s = np.array([0.0, 1.0])
    big = gt.weighted_threshold(s, np.array([[5e8 - 1, 5e8 + 1]]), 0.5)[0]
    assert big == np.nextafter(0.0, 1)
    small = gt.weighted_threshold(s, np.array([[0.5 - 1.5e-9, 0.5 + 1.5e-9]]), 0.5)[0]
    assert small == np.nextafter(1.0, 2)
    # well inside the slack on a total of 1: half and a hair allowed
    inside = gt.weighted_threshold(s, np.array([[0.5 - 4e-10, 0.5 + 4e-10]]), 0.5)[0]
    assert inside == np.nextafter(0.0, 1)


# --- the table: bootstrap with failed pairs, rows nobody else reads ------------------


def _four_groups(seed: int = 5):
    """A: impostors and genuines, five impostors and a genuine without a feature (-inf);
    B: impostors far below everyone else's (no global threshold reaches them); C: every
    impostor without a feature (no own threshold: NaN); D: genuine pairs only. Each group
    its own six identities; scores rounded to 0.01 so that they tie."""
    rng = np.random.default_rng(seed)
    rows = []
    for name in "ABCD":
        people = [f"{name}{k}" for k in range(6)]
        for j in range(30 if name != "D" else 0):
            a, b = rng.choice(people, 2, replace=False)
            score = {"A": rng.normal(0.6, 0.1), "B": rng.normal(0.05, 0.02),
                     "C": 0.0}[name]
            bad = (name == "A" and j < 5) or name == "C"
            rows.append((name, False, a, b, -np.inf if bad else score, bad))
        for j in range(8):
            a = rng.choice(people)
            bad = name == "A" and j == 0
            rows.append((name, True, a, a, -np.inf if bad else rng.normal(0.9, 0.05), bad))
    g, y, ida, idb, s, bad = map(np.array, zip(*rows, strict=True))
    return np.round(s.astype(float), 2), y.astype(bool), g.astype(object), \
        ida.astype(str), idb.astype(str), bad.astype(bool)


def test_bootstrap_with_failed_pairs_empty_groups_and_a_confidence():
    """Every replicate re-fits the global threshold on the impostors with a feature and a
    group's own on its impostors with a feature; the FMR counts every impostor of the
    group (failed ones never accepted); a NaN threshold accepts nothing; a threshold above
    every impostor of a group accepts none of them (FMR 0, deviation -1); a group without
    impostors has no interval. The interval is the 10 / 90 % quantile (confidence 0.8)."""
    from facecast.evaluate.bands import replicate_weights

    s, y, g, ida, idb, bad = _four_groups()
    targets, n_boot, seed = [0.1, 0.3], 30, 2
    t = gt.group_threshold_table(s, y, g, targets, identity_a=ida, identity_b=idb,
                                 n_boot=n_boot, seed=seed, confidence=0.8, failed=bad)
    w = np.concatenate(list(replicate_weights(ida, idb, n_boot, seed)))
    fit_glob = ~y & ~bad
    seen = set()
    for _, row in t.iterrows():
        target, sub = row["target_fmr"], (g == row["group"]) & ~y
        devs = {"global": [], "group": []}
        for wb in w:
            thr = {"global": _threshold(s[fit_glob], wb[fit_glob], target),
                   "group": _threshold(s[sub & ~bad], wb[sub & ~bad], target)}
            for key, th in thr.items():
                total = wb[sub].sum()
                fmr = (wb[sub] * (s[sub] >= th)).sum() / total if total else np.nan
                devs[key].append((fmr - target) / target)
        for key, d in devs.items():
            d = np.array(d)
            if np.isnan(d).all():
                lo = hi = np.nan
            else:
                lo, hi = np.nanquantile(d, [0.1, 0.9])
            got = row[f"deviation_{key}_lo"], row[f"deviation_{key}_hi"]
            assert np.allclose(got, (lo, hi), rtol=0, atol=1e-12, equal_nan=True), (
                row["group"], target, key, got, lo, hi)
            seen.add((row["group"], key, round(float(lo), 6), round(float(hi), 6)))
    # what the data make of each group: A's interval spreads and differs from the 2.5 /
    # 97.5 % one; B and C never have a false match; D has no impostor
    a = t[(t["group"] == "A") & (t["target_fmr"] == 0.1)].iloc[0]
    assert a["deviation_group_lo"] < a["deviation_group_hi"]
    assert {("B", "global", -1.0, -1.0), ("C", "global", -1.0, -1.0),
            ("C", "group", -1.0, -1.0)} <= seen
    assert t.loc[t["group"] == "D", ["deviation_global_lo", "deviation_group_hi"]].isna(
    ).all().all()
    wide = gt.group_threshold_table(s, y, g, targets, identity_a=ida, identity_b=idb,
                                    n_boot=n_boot, seed=seed, failed=bad)
    aw = wide[(wide["group"] == "A") & (wide["target_fmr"] == 0.1)].iloc[0]
    assert aw["deviation_group_hi"] - aw["deviation_group_lo"] > (
        a["deviation_group_hi"] - a["deviation_group_lo"])


def test_point_columns_with_failed_pairs():
    """``false_matches_*`` count the group's impostors at or above each threshold,
    ``failed_rate`` its pairs without a feature over its pairs, ``n_failed`` those pairs;
    a group without impostors has NaN rates."""
    s, y, g, _, _, bad = _four_groups()
    t = gt.group_threshold_table(s, y, g, [0.1], failed=bad).set_index("group")
    fit_glob = ~y & ~bad
    t_glob = _threshold(s[fit_glob], np.ones(int(fit_glob.sum())), 0.1)
    for name in "ABCD":
        m = g == name
        row = t.loc[name]
        assert row["n_failed"] == bad[m].sum()
        assert (row["n_impostor"], row["n_genuine"]) == ((m & ~y).sum(), (m & y).sum())
        assert row["failed_rate"] == pytest.approx(bad[m].sum() / m.sum(), abs=1e-15)
        own = _threshold(s[m & ~y & ~bad], np.ones(int((m & ~y & ~bad).sum())), 0.1)
        assert row["global_threshold"] == t_glob
        assert np.array_equal(row["group_threshold"], own, equal_nan=True)
        assert row["false_matches_global"] == int((s[m & ~y] >= t_glob).sum())
        assert row["false_matches_group"] == int((s[m & ~y] >= own).sum())
        assert row["n_impostor_global"] == fit_glob.sum()
    assert t.loc["A", "false_matches_global"] > 0 and t.loc["A", "false_matches_group"] > 0
    assert t.loc["A", "n_failed"] == 6 and t.loc["A", "failed_rate"] == pytest.approx(6 / 38)
    assert np.isnan(t.loc["D", "fmr_global"]) and t.loc["D", "tar_global"] > 0


def test_bootstrap_only_with_replicates_and_identities_and_its_defaults():
    """Bands need ``n_boot > 0`` and identities: identities alone (the default ``n_boot``
    is 0) or replicates alone give no band; one replicate gives a band of its one
    deviation; the default seed is 0. Without two folds there are no ``*_cv`` columns."""
    s, y, g, ida, idb, bad = _four_groups()
    plain = gt.group_threshold_table(s, y, g, [0.1], identity_a=ida, identity_b=idb)
    assert "deviation_group_lo" not in plain and (plain["n_boot"] == 0).all()
    assert not [c for c in plain if c.endswith("_cv")]
    alone = gt.group_threshold_table(s, y, g, [0.1], n_boot=5)
    assert "deviation_group_lo" not in alone and (alone["n_boot"] == 5).all()
    one_fold = gt.group_threshold_table(s, y, g, [0.1], folds=np.full(len(s), "1"))
    assert not [c for c in one_fold if c.endswith("_cv")]
    one = gt.group_threshold_table(s, y, g, [0.1], identity_a=ida, identity_b=idb,
                                   n_boot=1, seed=4).set_index("group")
    from facecast.evaluate.bands import replicate_weights

    (wb,) = list(replicate_weights(ida, idb, 1, 4))[0]
    sub = (g == "A") & ~y
    th = _threshold(s[sub], wb[sub], 0.1)
    dev = ((wb[sub] * (s[sub] >= th)).sum() / wb[sub].sum() - 0.1) / 0.1
    assert one.loc["A", "deviation_group_lo"] == pytest.approx(dev, abs=1e-12)
    assert one.loc["A", "deviation_group_hi"] == pytest.approx(dev, abs=1e-12)
    kw = {"identity_a": ida, "identity_b": idb, "n_boot": 15}
    a = gt.group_threshold_table(s, y, g, [0.1], **kw)
    b = gt.group_threshold_table(s, y, g, [0.1], seed=0, **kw)
    c = gt.group_threshold_table(s, y, g, [0.1], seed=1, **kw)
    pd.testing.assert_frame_equal(a, b)
    assert not a["deviation_global_lo"].equals(c["deviation_global_lo"]) or not a[
        "deviation_global_hi"].equals(c["deviation_global_hi"])


def test_masks_given_as_numbers_are_masks():
    """``failed`` and ``global_mask`` as 0 / 1 numbers read as the booleans they are."""
    s, y, g, _, _, bad = _four_groups()
    mask = pd.notna(g) & (g != "B")
    want = gt.group_threshold_table(s, y, g, [0.1], failed=bad, global_mask=mask)
    got = gt.group_threshold_table(s, y, g, [0.1], failed=bad.astype(int),
                                   global_mask=mask.astype(np.int64))
    pd.testing.assert_frame_equal(got, want)
    assert want["n_impostor_global"].iat[0] == int((~y & ~bad & mask).sum())


def test_a_score_at_the_threshold_is_accepted_and_a_fold_without_training_impostors():
    """The global threshold fitted on X's impostors (``global_mask``) is just above X's
    third highest (0.45 at FMR 0.2); a Y impostor and a Y genuine pair score exactly that
    threshold and are accepted (``score >= t``). Y's impostors all lie in fold 1: held out
    fold 1, Y's own threshold has no training impostor (NaN) and accepts nothing."""
    t45 = float(np.nextafter(0.45, 1))
    xs = [0.1, 0.2, 0.3, 0.4, 0.5, 0.15, 0.25, 0.35, 0.45, 0.55, 0.6, 0.7, 0.65, 0.75]
    xf = ["1"] * 5 + ["2"] * 5 + ["1", "1", "2", "2"]
    ys = [0.2, t45, 0.9, 0.8, t45, 0.95]
    yf = ["1", "1", "1", "1", "2", "2"]
    s = np.array(xs + ys)
    y = np.array([False] * 10 + [True] * 4 + [False] * 3 + [True] * 3)
    g = np.array(["X"] * 14 + ["Y"] * 6, dtype=object)
    folds = np.array(xf + yf)
    mask = g == "X"
    t = gt.group_threshold_table(s, y, g, [0.2], folds=folds, global_mask=mask)
    row = t.set_index("group").loc["Y"]
    t_glob = _threshold(s[mask & ~y], np.ones(10), 0.2)
    assert t_glob == t45 and row["global_threshold"] == t45
    yi, yg = (g == "Y") & ~y, (g == "Y") & y
    assert row["fmr_global"] == pytest.approx((s[yi] >= t_glob).mean()) == pytest.approx(2 / 3)
    assert row["tar_global"] == pytest.approx((s[yg] >= t_glob).mean()) == 1.0
    fm = {"global": 0, "group": 0}
    ta = {"global": 0, "group": 0}
    for f in ("1", "2"):
        train, test = folds != f, folds == f
        thr = {"global": _threshold(s[train & mask & ~y], np.ones(int((train & mask & ~y).sum())),
                                    0.2),
               "group": _threshold(s[train & yi], np.ones(int((train & yi).sum())), 0.2)}
        assert np.isnan(thr["group"]) == (f == "1")
        for key, th in thr.items():
            fm[key] += int((s[test & yi] >= th).sum())
            ta[key] += int((s[test & yg] >= th).sum())
    for key in ("global", "group"):
        assert row[f"fmr_{key}_cv"] == pytest.approx(fm[key] / 3, abs=1e-15)
        assert row[f"tar_{key}_cv"] == pytest.approx(ta[key] / 3, abs=1e-15)
    assert ta["group"] == 1 and fm["group"] == 0   # fold 2 only: 0.95 above 0.9
