"""compare's tests keep their level when errors cluster by identity (issue 32): a small,
fast version of benchmarks/compare_null.py (which runs 1,000 benchmarks per scenario)."""

from __future__ import annotations

import numpy as np

from facecast.compare.simulate import NullDesign, level_study, null_pair, summarise


def test_null_benchmarks_have_identity_random_effects_and_equal_models() -> None:
    a, b = null_pair(np.random.default_rng(0))
    assert len(a) == len(b) == 1200 and (a["label"] == 1).sum() == 600
    assert (a[["image_a", "image_b", "label"]] == b[["image_a", "image_b", "label"]]).all().all()
    assert a["identity_a"].nunique() == 40
    # each model's genuine scores carry an identity effect: identity means spread more
    # than pair noise alone would make them (15 genuine pairs per identity)
    gen = a[a["label"] == 1]
    assert gen.groupby("identity_a")["score"].mean().std() > 2 * 0.085 / np.sqrt(15)


def test_clustered_test_keeps_its_level_where_mcnemar_does_not() -> None:
    """40 benchmarks with two equally good models (40 identities x 6 images each): the
    clustered test's raw p rejects at 5 % rarely and its 95 % intervals cover 0; on the
    same benchmarks the unclustered McNemar test rejects in about half (the issue: 67 %),
    so the simulation is a real check."""
    table = summarise(level_study(40, seed=0, n_boot=100, fars=(1e-2,), fmr=1e-2,
                                  design=NullDesign())).set_index(["method", "metric"])
    ours = table.loc["t"]
    assert len(ours) == 4 and (ours["n"] == 40).all()
    assert (ours["rejected"] <= 0.15).all(), ours
    assert ours["rejected"].mean() <= 0.08, ours
    assert (ours["covered"] >= 0.85).all() and ours["covered"].mean() >= 0.92, ours
    assert table.loc[("mcnemar", "decisions@fmr=0.01"), "rejected"] >= 0.3
