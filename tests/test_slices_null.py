"""Slice discovery under complete nulls (issue 33.3): with BH at 0.05 the probability of
any discovery must stay <= 0.05 - on real score structure, where errors cluster by
identity. The full estimate over 100+ seeds: benchmarks/slices_null.py."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from facecast.slices.discover import find_slices
from facecast.slices.null import naive_discoveries, permute_identities, permute_scores

DATA = Path(__file__).parent / "data" / "slices"
#: the demo config's slices section, on the label columns (a fast search)
CFG = {"exclude": ["label_low_contrast_group"], "threshold": {"policy": "eer"},
       "n_boot": 50, "columns": ["label_*"]}


def _demo() -> tuple[pd.DataFrame, pd.DataFrame]:
    return (pd.read_parquet(DATA / "dlib_fair_pool.parquet"),
            pd.read_parquet(DATA / "attributes.parquet"))


def test_permute_identities_moves_whole_identities_and_keeps_the_images() -> None:
    _, attrs = _demo()
    out = permute_identities(attrs, seed=3)
    assert out["image_id"].tolist() == attrs["image_id"].tolist()
    assert out["status"].tolist() == attrs["status"].tolist()
    # an identity-level label stays constant within each identity, and moved
    per_id = out.groupby("identity")["label_dark_skin"].nunique()
    assert (per_id == 1).all()
    assert not out["label_dark_skin"].equals(attrs["label_dark_skin"])
    assert sorted(out["label_dark_skin"]) == sorted(attrs["label_dark_skin"])


def test_identity_permutation_null_keeps_any_discovery_rare() -> None:
    """dlib's demo scores, attributes permuted by whole identities (16 seeds, FNMR and FMR
    in one family): at most 2 runs may report any discovery (under a level-0.05 rule,
    P(X >= 3) = 0.043 for 16 runs). The bound can fail: a test that treats pairs as
    independent reports discoveries in almost every run on the same nulls."""
    pairs, attrs = _demo()
    runs, with_discovery, naive = 16, 0, 0
    for seed in range(runs):
        res = find_slices(pairs, permute_identities(attrs, seed), CFG, seed=seed)
        assert res.info["family"] > 20000 and res.info["tested"] > 500
        with_discovery += bool(res.table["significant"].any())
        naive += naive_discoveries(res) > 0
    assert with_discovery <= 2
    assert naive >= runs - 2


def test_score_permutation_null_discovers_nothing() -> None:
    """Scores shuffled within each label (the clustering gone too): no discovery."""
    pairs, attrs = _demo()
    for seed in range(3):
        res = find_slices(permute_scores(pairs, seed), attrs, CFG, seed=seed)
        assert not res.table["significant"].any(), res.table.loc[
            res.table["significant"], "slice"].tolist()
        assert res.findings.empty


def test_synthetic_null_over_many_seeds_stays_at_most_005() -> None:
    """No planted effect, identities with 4 images: at most 1 of 30 runs (both error
    types) may report any discovery (P(X >= 2) = 0.45 under exactly 0.05, so this also
    bounds the rate well below it)."""
    from test_slices import planted

    runs, with_discovery = 30, 0
    for seed in range(runs):
        pairs, attrs = planted(n_ids=40, per_id=4, seed=seed, effect=0.0)
        res = find_slices(pairs, attrs, {"threshold": {"policy": "eer"}, "n_boot": 50,
                                         "min_genuine": 10, "min_impostor": 10}, seed=seed)
        with_discovery += bool(res.table["significant"].any())
    assert with_discovery <= 1
