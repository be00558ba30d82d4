"""Bootstrap intervals that hold their estimate (issue 50, item 2): BCa with a jackknife
acceleration, basic and percentile; coverage of a planted gap over repeated draws."""

import numpy as np
import pandas as pd
import pytest

from facecast.fairness.bootstrap import bootstrap
from facecast.fairness.groups import annotate_pairs, image_labels, parse_specs
from facecast.fairness.intervals import (
    acceleration,
    few_false_matches,
    interval_bounds,
    interval_rows,
    jackknife_counts,
    jackknife_pair_weights,
    limits_of,
)
from facecast.fairness.simulate import simulate


def _range(r: np.ndarray) -> np.ndarray:
    """The max - min gap of group error rates, one per row (a statistic resampling biases
    upwards)."""
    return r.max(axis=1) - r.min(axis=1)


def _coverage(p, n, draws, n_boot, seed):
    """Share of ``draws`` data sets whose interval holds the true gap, per method, and the
    share whose interval holds its own estimate. Groups of ``n`` Bernoulli errors at rates
    ``p``; bootstrap within groups; jackknife = delete-one observation."""
    rng = np.random.default_rng(seed)
    p = np.asarray(p, dtype=np.float64)
    true = _range(p[None])[0]
    hits = {m: 0 for m in ("bca", "basic", "percentile")}
    holds = {m: 0 for m in hits}
    for _ in range(draws):
        x = rng.binomial(n, p)
        ph = x / n
        est = _range(ph[None])[0]
        reps = _range(rng.binomial(n, ph, size=(n_boot, len(p))) / n)
        jack, mult = [], []
        for g in range(len(p)):
            for drop, count in ((1, x[g]), (0, n - x[g])):
                if count:
                    q = ph.copy()
                    q[g] = (x[g] - drop) / (n - 1)
                    jack.append(_range(q[None])[0])
                    mult.append(count)
        a = acceleration(np.repeat(jack, mult)[:, None])[0]
        for m in hits:
            lo, hi, _ = interval_bounds(est, reps, method=m, accel=a)
            hits[m] += lo <= true <= hi
            holds[m] += lo <= est <= hi
    return ({m: h / draws for m, h in hits.items()},
            {m: h / draws for m, h in holds.items()})


def test_bca_covers_a_planted_gap_within_tolerance():
    # 4 groups, one 10 points worse: the true gap is 0.10; 95 % intervals
    cover, holds = _coverage([0.10, 0.10, 0.10, 0.20], 1000, 300, 999, seed=3)
    assert abs(cover["bca"] - 0.95) <= 0.04, cover
    assert abs(cover["basic"] - 0.95) <= 0.04, cover
    assert holds["bca"] == 1.0 and holds["basic"] == 1.0, holds
    assert cover == {"bca": pytest.approx(0.9567, abs=1e-3),
                     "basic": pytest.approx(0.9633, abs=1e-3),
                     "percentile": pytest.approx(0.92, abs=1e-3)}


def test_no_gap_only_the_basic_interval_reaches_it():
    # 8 equal groups: the true gap is 0, every replicate's range is above it; percentile
    # and BCa (quantiles of those replicates) never hold 0, the basic interval often does
    cover, holds = _coverage([0.10] * 8, 400, 200, 999, seed=5)
    assert cover == {"bca": 0.0, "basic": pytest.approx(0.75), "percentile": 0.0}
    assert holds == {"bca": pytest.approx(0.945), "basic": pytest.approx(0.935),
                     "percentile": pytest.approx(0.935)}


def test_acceleration_by_hand():
    jack = np.array([[1.0, 5.0], [2.0, 5.0], [3.0, 5.0], [10.0, 5.0]])
    # mean 4, deviations 3, 2, 1, -6: sum^3 = -180, sum^2 = 50
    np.testing.assert_allclose(acceleration(jack), [-180 / (6 * 50 ** 1.5), 0.0])


def test_bca_without_bias_or_acceleration_is_the_percentile_interval():
    reps = np.linspace(-1.0, 1.0, 2001)  # symmetric around the estimate 0
    lo, hi, note = interval_bounds(0.0, reps, method="bca", accel=0.0)
    plo, phi, _ = interval_bounds(0.0, reps, method="percentile")
    assert (lo, hi, note) == (pytest.approx(plo), pytest.approx(phi), "")
    assert (plo, phi) == (pytest.approx(-0.95), pytest.approx(0.95))
    blo, bhi, _ = interval_bounds(0.3, reps, method="basic")
    assert (blo, bhi) == (pytest.approx(0.6 - 0.95), pytest.approx(0.6 + 0.95))
    # a bound outside the figure's range is clipped to it (GARBE in [0, 1])
    assert interval_bounds(0.3, reps, method="basic", limits=limits_of("garbe@fmr=0.001")) \
        == (0.0, 1.0, "")
    assert limits_of("fmr_max_min") == (1.0, np.inf) and limits_of("x") == (-np.inf, np.inf)


def test_bca_shifts_down_when_replicates_sit_above():
    reps = np.linspace(0.3, 0.6, 101)  # 1 replicate below or at 0.3 (half counted)
    lo, hi, note = interval_bounds(0.3, reps, method="bca")
    # share below = 0.5 / 101: z0 = Phi^-1(0.00495); both bounds near the bottom
    assert lo == pytest.approx(0.3) and hi == pytest.approx(0.300208, abs=1e-6)
    assert note == ""
    lo, hi, note = interval_bounds(0.2, reps, method="bca")
    assert note == "all 101 replicates above the estimate"


def test_interval_rows_say_which_interval_and_flag_a_miss():
    reps = pd.DataFrame({"gap": np.linspace(0.32, 0.56, 50), "acc": np.linspace(0.7, 0.9, 50)})
    rows = interval_rows({"gap": 0.2976, "acc": 0.8}, reps, method="percentile",
                         confidence=0.95).set_index("metric")
    assert rows.loc["gap", "interval"] == "percentile (50 replicates)"
    assert not rows.loc["gap", "covers"] and rows.loc["acc", "covers"]
    assert rows.loc["gap", "note"] == "interval misses the estimate (bootstrap mean 0.44): unstable"
    assert rows.loc["acc", "note"] == ""
    bca = interval_rows({"gap": 0.2976}, reps, method="bca").set_index("metric")
    assert bca.loc["gap", "interval"] == "bc (50 replicates, no acceleration)"
    assert bca.loc["gap", "note"].startswith("all 50 replicates above the estimate; interval "
                                             "misses the estimate")


def test_jackknife_leaves_out_identity_blocks():
    counts = jackknife_counts(5, 2)
    np.testing.assert_array_equal(counts, [[0, 1, 0, 1, 0], [1, 0, 1, 0, 1]])
    assert jackknife_counts(3, 100).shape == (3, 3)
    ida = np.array(["a", "b", "a", "c"])
    idb = np.array(["a", "b", "b", "c"])
    w = np.concatenate(list(jackknife_pair_weights(ida, idb, 10, chunk=2)))
    # delete a, delete b, delete c: a pair weighs 0 when either identity is out
    np.testing.assert_array_equal(w, [[0, 1, 0, 1], [1, 0, 0, 1], [1, 1, 1, 0]])


def test_fairness_bootstrap_reports_bca_with_identity_jackknife():
    protected = parse_specs({"gender": {"column": "label_male", "bins": [0.5]}})
    legit = parse_specs({"pose": {"column": "label_yaw", "abs": True, "bins": [15]}})
    attrs, pairs = simulate(30, 5, seed=4)
    ann = annotate_pairs(pairs, image_labels(attrs, protected, legit), protected, legit)
    kw = dict(targets=[1e-2], alpha=0.5, min_pairs=3, min_groups=1)
    _, summ = bootstrap(ann, n_boot=60, seed=1, jackknife_blocks=10, **kw)
    s = summ.set_index("metric")
    bca = "bca (60 replicates, jackknife over 10 identity blocks)"
    assert s["interval"].to_dict() == {
        "accuracy": bca, "bias_pos": "basic (60 replicates)",
        "bias_neg": "basic (60 replicates)", "threshold@fmr=0.01": bca, "tar@fmr=0.01": bca,
        "fdr@fmr=0.01": "basic (60 replicates)", "garbe@fmr=0.01": "basic (60 replicates)"}
    assert s.loc["accuracy", "covers"] and s.loc["accuracy", "note"] == ""
    # basic: the percentile interval mirrored around the estimate
    b = s.loc["bias_pos"]
    _, pct0 = bootstrap(ann, n_boot=60, seed=1, interval="percentile", **kw)
    q = pct0.set_index("metric").loc["bias_pos"]
    assert (b["lo"], b["hi"]) == (pytest.approx(2 * b["estimate"] - q["hi"]),
                                  pytest.approx(2 * b["estimate"] - q["lo"]))
    _, pct = bootstrap(ann, n_boot=60, seed=1, interval="percentile", **kw)
    p = pct.set_index("metric")
    assert set(p["interval"]) == {"percentile (60 replicates)"}
    # same replicates, other interval: the percentile bounds are the replicates' quantiles
    np.testing.assert_allclose(p["boot_mean"], s["boot_mean"])
    assert (s["covers"] | (s["note"].str.contains("misses the estimate"))).all()
    assert (s.loc[~s["covers"], "note"] != "").all()


def test_figures_on_a_handful_of_false_matches_say_so():
    unc = pd.DataFrame({"metric": ["accuracy", "garbe@fmr=0.001", "garbe@fmr=0.0001"],
                        "note": ["", "", "interval misses the estimate (bootstrap mean "
                                     "0.148): unstable"]})
    thr = pd.DataFrame({"name": ["fmr=0.001", "fmr=0.0001"], "false_matches": [20, 2]})
    out = few_false_matches(unc, thr, 10)
    assert out["note"].tolist() == [
        "", "", "interval misses the estimate (bootstrap mean 0.148): unstable; rests on "
                "2 false matches"]
    assert few_false_matches(unc, thr, 21)["note"].tolist()[1] == "rests on 20 false matches"


def test_mitigation_garbe_gets_the_basic_interval_and_a_miss_is_said():
    from facecast.mitigation.report import table_markdown
    from facecast.mitigation.table import build_tables

    # the issue's `fsn GARBE 0.1519 [0.1608, 0.5197]`: replicates all above the value
    reps_g = np.linspace(0.1608, 0.5197, 100)
    point = {"raw": {"accuracy": 0.9, "garbe": 0.3}, "fsn": {"accuracy": 0.9, "garbe": 0.1519}}
    reps = {"raw": {"accuracy": np.linspace(0.88, 0.92, 100), "garbe": reps_g + 0.15},
            "fsn": {"accuracy": np.linspace(0.88, 0.92, 100), "garbe": reps_g}}
    table, _ = build_tables(point, reps, notes={"accuracy": "", "garbe": ""},
                            n_identities=40, confidence=0.95, alpha=0.05,
                            counts={"n_pairs": 100})
    fsn = table.set_index("method").loc["fsn"]
    qlo, qhi = np.quantile(reps_g, [0.025, 0.975])
    # basic: mirrored around the value, the lower bound clipped at GARBE's floor 0
    assert 2 * 0.1519 - qhi < 0
    assert (fsn["garbe_lo"], fsn["garbe_hi"]) == (0.0, pytest.approx(2 * 0.1519 - qlo))
    assert fsn["note"] == "garbe: interval misses the estimate"
    md = table_markdown(table, pd.DataFrame(columns=["method", "metric"]), title="t",
                        intro="i", sentences=[])
    assert "(interval misses it)" in next(s for s in md.splitlines() if s.startswith("| fsn |"))
