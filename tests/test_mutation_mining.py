"""Issue 51: C11 band mining (facecast.analysis.mining) pinned by numbers derived here from
the embeddings and the pairs themselves: the pool sample, the fold assignment, every count
of the report and the shortfall paragraph, so a mutant of `make mutate
MODULES=analysis.mining` that changes a count, a fold or a word fails here."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from facecast.analysis.mining import (
    MiningConfig,
    MiningShortfall,
    _assign_folds,
    mine_pairs,
    pool_sample,
    shortfall_message,
)
from facecast.analysis.simulate import synthetic_embeddings


def _walk(sizes: dict[str, int], order: list[str], max_images: int) -> set[str]:
    """Whole identities in ``order`` until at least ``max_images`` images are in."""
    kept: set[str] = set()
    total = 0
    for name in order:
        if total >= max_images:
            break
        kept.add(name)
        total += sizes[name]
    return kept


@pytest.mark.parametrize("seed", [0, 1, 2, 3, 4])
@pytest.mark.parametrize("max_images", [1, 3, 5, 6, 9])
def test_pool_sample_keeps_whole_identities_in_a_seeded_order(seed, max_images):
    """The identities are walked in ``rng.permutation`` of their *sorted* names (not the
    order they first appear in) and kept until ``max_images`` images are in; an identity
    that reaches the count exactly ends the walk."""
    ident = np.array(["c", "c", "c", "a", "d", "d", "d", "d", "b", "b"])
    sizes = {"a": 1, "b": 2, "c": 3, "d": 4}
    names = sorted(sizes)
    order = [names[k] for k in np.random.default_rng(seed).permutation(len(names))]
    want = _walk(sizes, order, max_images)
    keep = pool_sample(ident, max_images, np.random.default_rng(seed))
    assert keep.dtype == bool
    assert keep.tolist() == [x in want for x in ident]


def test_pool_sample_keeps_everything_when_small_enough_or_unlimited():
    """``max_images`` 0 or at least the subset's size keeps every image; one image fewer
    than the subset samples."""
    ident = np.array(["b", "a", "a", "c"])
    for m in (0, 4, 5):
        keep = pool_sample(ident, m, np.random.default_rng(0))
        assert keep.dtype == bool and keep.tolist() == [True] * 4
    # 3 of 4: sampled, whole identities until 3 images are in
    order = [sorted("abc")[k] for k in np.random.default_rng(0).permutation(3)]
    want = _walk({"a": 2, "b": 1, "c": 1}, order, 3)
    assert pool_sample(ident, 3, np.random.default_rng(0)).tolist() == [x in want
                                                                         for x in ident]


def test_assign_folds_fills_folds_in_order_or_spreads_a_shortfall():
    """A full set: ``per_fold`` pairs per fold, in fold order; a shortfall: pair ``k`` of
    ``n`` goes to fold ``floor(k * folds / n)``; none: an empty object array."""
    folds = ["0", "1", "val"]
    assert _assign_folds(6, folds, 2).tolist() == ["0", "0", "1", "1", "val", "val"]
    assert _assign_folds(3, folds, 1).tolist() == ["0", "1", "val"]
    assert _assign_folds(4, folds, 2).tolist() == ["0", "0", "1", "val"]
    assert _assign_folds(7, folds, 3).tolist() == ["0", "0", "0", "1", "1", "val", "val"]
    assert _assign_folds(1, folds, 5).tolist() == ["0"]
    empty = _assign_folds(0, folds, 2)
    assert len(empty) == 0 and empty.dtype == object
    assert _assign_folds(0, folds, 0).dtype == object


def _report(**kw) -> dict:
    rep = {"band": [0.1, 0.25], "band_mode": "absolute",
           "pool": {"n_images": 80, "n_identities": 10},
           "genuine": {"selected": 3, "needed": 20, "candidates": 280, "in_band": 3,
                       "acceptance_rate": 3 / 280, "rejected_by_image_cap": 2},
           "impostor": {"selected": 5, "needed": 20, "candidates_scored": 3000, "in_band": 5,
                        "acceptance_rate": 5 / 3000, "all_candidates_seen": True}}
    for part, fields in kw.items():
        rep[part] = {**rep[part], **fields} if isinstance(fields, dict) else fields
    return rep


ADVICE = (". Widen the band, lower n_genuine/n_impostor, raise max_image_uses, or set "
          "on_shortfall: write to keep what was achieved.")


def test_shortfall_message_names_both_sides_and_the_cause():
    """The paragraph, word for word: the band to four decimals, the pool, each short
    side's counts (acceptance to 4 and 5 decimals) and why the impostors stopped."""
    head = "mining shortfall in band [0.1000, 0.2500] (absolute) on a pool of 80 images / " \
           "10 identities: "
    gen = ("genuine: 3/20 (of 280 within-identity pairs 3 are in band, acceptance 0.0107; "
           "2 refused by the image-use cap)")
    imp = ("impostor: 5/20 (3000 candidates scored, 5 in band, acceptance 0.00167; "
           "all candidate pairs were scored)")
    assert shortfall_message(_report()) == head + gen + "; " + imp + ADVICE
    budget = imp.replace("all candidate pairs were scored",
                         "the candidate budget (mining.max_candidates) ran out")
    rep = _report(impostor={"all_candidates_seen": False})
    assert shortfall_message(rep) == head + gen + "; " + budget + ADVICE
    # only the short side is named; a side exactly met is not short
    rep = _report(impostor={"selected": 20})
    assert shortfall_message(rep) == head + gen + ADVICE
    rep = _report(genuine={"selected": 20}, band_mode="impostor_quantile")
    assert shortfall_message(rep) == head.replace("absolute", "impostor_quantile") + imp + ADVICE
    # a band that could not be fixed prints as nan
    rep = _report(band=[None, None], impostor={"selected": 21})
    assert shortfall_message(rep) == head.replace("0.1000, 0.2500", "nan, nan") + gen + ADVICE
    rep = _report(band=[None, 0.3], impostor={"selected": 21})
    assert shortfall_message(rep).startswith("mining shortfall in band [nan, 0.3000]")


@pytest.fixture(scope="module")
def small():
    """11 identities of 4 images and one of a single image (49 images), labels given in a
    shuffled order."""
    emb, ident = synthetic_embeddings(12, 4, dim=32, seed=11, rank=8)
    emb, ident = emb[:45], ident[:45]           # identity 11 keeps one image
    names = np.array([f"p{(7 * i) % 12:02d}" for i in range(12)])
    ids = np.array([f"img{k:03d}" for k in range(len(ident))])
    return emb, names[ident], ids


def _independent(emb, ident, lo, hi):
    s = emb.astype(np.float64) @ emb.astype(np.float64).T
    iu = np.triu_indices(len(ident), 1)
    same = ident[iu[0]] == ident[iu[1]]
    band = (s[iu] >= lo) & (s[iu] <= hi)
    return int(same.sum()), int((same & band).sum()), int((~same).sum()), \
        int((~same & band).sum())


def _check_pairs_against_report(res, emb, ident, ids, folds):
    p, rep = res.pairs, res.report
    index = pd.Index(ids)
    a, b = index.get_indexer(p.image_a), index.get_indexer(p.image_b)
    np.testing.assert_allclose(p.ref_score, (emb[a] * emb[b]).sum(1), atol=1e-5)
    assert (p.identity_a.to_numpy() == ident[a]).all()
    assert (p.identity_b.to_numpy() == ident[b]).all()
    assert p.label.tolist() == (p.identity_a == p.identity_b).astype(int).tolist()
    assert p.label.dtype == np.int8 and p.ref_score.dtype == np.float32
    # fold by fold in config order, genuine first within each fold
    rank = p.fold.map({f: k for k, f in enumerate(folds)}).to_numpy()
    key = list(zip(rank, -p.label.to_numpy(), strict=True))
    assert key == sorted(key)
    counts = {f: {"genuine": int(((p.fold == f) & (p.label == 1)).sum()),
                  "impostor": int(((p.fold == f) & (p.label == 0)).sum())} for f in folds}
    assert rep["fold_counts"] == counts
    assert list(rep["fold_counts"]) == folds
    uses = pd.concat([p.image_a, p.image_b]).value_counts()
    assert rep["images_used"] == len(uses)
    assert rep["max_uses_observed"] == (int(uses.max()) if len(uses) else 0)
    assert rep["genuine"]["selected"] == int((p.label == 1).sum())
    assert rep["impostor"]["selected"] == int((p.label == 0).sum())


def test_report_counts_are_the_pairs_and_the_pool(small):
    """Every count of the report recomputed: the pool (12 identities, 11 with a pair), the
    within-identity candidates (11 x 6) and those in band from the embeddings, the
    acceptance rates as their ratios, the folds and image uses read off the pairs."""
    emb, ident, ids = small
    lo, hi = 0.1, 0.6
    cfg = MiningConfig(band=(lo, hi), n_folds=2, n_genuine=3, n_impostor=4, val_fold=True,
                       genuine_oversample=0, max_image_uses=7, device="cpu")
    res = mine_pairs(emb, ident, ids, cfg, seed=5)
    rep = res.report
    folds = ["0", "1", "val"]
    n_gen, g_in, n_imp, i_in = _independent(emb, ident, lo, hi)
    assert n_gen == 66 and g_in >= 9 and i_in >= 12       # the pool can fill every fold
    assert not rep["shortfall"] and len(res.pairs) == 3 * (3 + 4)
    _check_pairs_against_report(res, emb, ident, ids, folds)
    assert set(res.pairs.fold) == set(folds)
    assert all(v == {"genuine": 3, "impostor": 4} for v in rep["fold_counts"].values())
    assert rep["band"] == [lo, hi] and rep["band_config"] == [lo, hi]
    assert rep["band_note"] in ("", None) and rep["band_mode"] == "absolute"
    assert rep["device"] == "cpu" and rep["max_image_uses"] == 7
    assert rep["pool"] == {"n_images": 45, "n_identities": 12, "n_identities_2plus": 11}
    g = rep["genuine"]
    assert g["needed"] == 9 and g["candidates"] == 66 and g["in_band"] == g_in
    assert g["acceptance_rate"] == pytest.approx(g_in / 66, rel=1e-12)
    assert g["identities_visited"] == 11 and g["rejected_by_image_cap"] == 0
    i = rep["impostor"]
    assert i["needed"] == 12 and i["candidates_scored"] > 0
    assert i["acceptance_rate"] == pytest.approx(i["in_band"] / i["candidates_scored"],
                                                 rel=1e-12)
    assert 0 < i["estimated_acceptance_rate"] < 1
    assert not i["all_candidates_seen"] and not i["candidate_budget_hit"]
    assert "extra" not in rep["config"] and rep["config"]["n_genuine"] == 3
    assert rep["config"]["band"] == (lo, hi) or list(rep["config"]["band"]) == [lo, hi]


def test_a_shortfall_of_one_side_is_reported_and_raised(small):
    """All 66 within-identity pairs in band but 70 asked: ``write`` keeps 66 spread over
    the folds (22 each), says shortfall and what was needed; ``fail`` raises with the same
    report and its paragraph."""
    emb, ident, ids = small
    cfg = MiningConfig(band=(-1.0, 1.0), n_folds=2, n_genuine=35, n_impostor=1,
                       val_fold=False, genuine_oversample=0, max_image_uses=1000,
                       on_shortfall="write", device="cpu")
    res = mine_pairs(emb, ident, ids, cfg, seed=2)
    rep = res.report
    assert rep["shortfall"] is True
    assert rep["genuine"]["needed"] == 70 and rep["genuine"]["selected"] == 66
    assert rep["genuine"]["in_band"] == 66
    assert rep["genuine"]["acceptance_rate"] == 1.0
    assert rep["impostor"]["needed"] == 2 and rep["impostor"]["selected"] == 2
    assert rep["impostor"]["estimated_acceptance_rate"] == 1.0
    _check_pairs_against_report(res, emb, ident, ids, ["0", "1"])
    assert rep["fold_counts"] == {"0": {"genuine": 33, "impostor": 1},
                                  "1": {"genuine": 33, "impostor": 1}}
    cfg.on_shortfall = "fail"
    with pytest.raises(MiningShortfall) as exc:
        mine_pairs(emb, ident, ids, cfg, seed=2)
    assert str(exc.value) == shortfall_message(rep)
    assert exc.value.report["genuine"]["selected"] == 66
    # the impostor side short alone is a shortfall too
    cfg = MiningConfig(band=(-1.0, 1.0), n_folds=2, n_genuine=1, n_impostor=600,
                       val_fold=False, genuine_oversample=0, max_image_uses=1000,
                       on_shortfall="write", device="cpu")
    rep = mine_pairs(emb, ident, ids, cfg, seed=2).report
    n_imp = _independent(emb, ident, -1.0, 1.0)[2]
    assert rep["shortfall"] is True and rep["genuine"]["selected"] == 2
    assert rep["impostor"]["selected"] == n_imp == 924
    # every cell of the pool is scored once (same-identity cells too), 924 are impostors
    assert rep["impostor"]["candidates_scored"] == 45 * 44 // 2
    assert rep["impostor"]["in_band"] == 924
    assert rep["impostor"]["acceptance_rate"] == pytest.approx(924 / 990, rel=1e-12)
    assert rep["impostor"]["all_candidates_seen"] is True


def test_an_empty_pool_reports_zeros():
    """No image: every count is 0 (no division by zero), the band is kept as configured."""
    cfg = MiningConfig(band=(0.1, 0.2), n_folds=2, n_genuine=1, n_impostor=1,
                       val_fold=False, on_shortfall="write", device="cpu")
    res = mine_pairs(np.zeros((0, 8), np.float32), np.array([], str), np.array([], str),
                     cfg, seed=0)
    rep = res.report
    assert rep["shortfall"] is True and len(res.pairs) == 0
    assert rep["pool"] == {"n_images": 0, "n_identities": 0, "n_identities_2plus": 0}
    assert rep["max_uses_observed"] == 0 and rep["images_used"] == 0
    assert rep["genuine"]["acceptance_rate"] == 0.0
    assert rep["impostor"]["acceptance_rate"] == 0.0
    assert rep["impostor"]["estimated_acceptance_rate"] == 0.0
    assert rep["fold_counts"] == {"0": {"genuine": 0, "impostor": 0},
                                  "1": {"genuine": 0, "impostor": 0}}


def test_a_tensor_in_any_float_dtype_is_mined_as_its_float32_values(small):
    """A torch tensor (bfloat16, which numpy cannot hold, or float64) is mined exactly as
    the float32 array of its values: the same pairs and float32 scores."""
    import torch

    emb, ident, ids = small
    cfg = MiningConfig(band=(0.1, 0.6), n_folds=2, n_genuine=3, n_impostor=4,
                       val_fold=False, genuine_oversample=0, device="cpu")
    for dtype in (torch.bfloat16, torch.float64):
        t = torch.from_numpy(emb).to(dtype)
        as_array = t.to(torch.float32).numpy()
        want = mine_pairs(as_array, ident, ids, cfg, seed=3).pairs
        got = mine_pairs(t, ident, ids, cfg, seed=3).pairs
        pd.testing.assert_frame_equal(got, want)
        index = pd.Index(ids)
        a, b = index.get_indexer(got.image_a), index.get_indexer(got.image_b)
        prod = (as_array[a].astype(np.float64) * as_array[b]).sum(1)
        np.testing.assert_allclose(got.ref_score, prod, rtol=0, atol=2e-6)


def test_the_impostor_rate_is_estimated_on_2048_draws_or_the_quantile_sample(small):
    """An absolute band estimates its acceptance on 2048 impostor draws (the estimate is a
    multiple of 1/2048); an impostor-quantile band on ``quantile_sample`` draws."""
    emb, ident, ids = small
    base = dict(n_folds=2, n_genuine=1, n_impostor=2, val_fold=False, device="cpu",
                genuine_oversample=0, quantile_sample=1000)
    rep = mine_pairs(emb, ident, ids, MiningConfig(band=(0.1, 0.3), **base), seed=4).report
    est = rep["impostor"]["estimated_acceptance_rate"]
    assert 0 < est < 1 and est * 2048 == pytest.approx(round(est * 2048), abs=1e-9)
    assert abs(est * 2049 - round(est * 2049)) > 1e-6
    assert abs(est * 1000 - round(est * 1000)) > 1e-6
    cfg = MiningConfig(band=(0.2, 0.7), band_mode="impostor_quantile", **base)
    rep = mine_pairs(emb, ident, ids, cfg, seed=4).report
    est = rep["impostor"]["estimated_acceptance_rate"]
    assert est == pytest.approx(0.5, abs=0.01)         # half the sample between its quantiles
    assert est * 1000 == pytest.approx(round(est * 1000), abs=1e-9)
    assert abs(est * 2048 - round(est * 2048)) > 1e-6


def test_an_unestimable_band_fails_with_its_note(small):
    """A quantile band on a pool of one identity cannot be estimated: ``fail`` raises
    with the note in the message and a report that says so."""
    emb, ident, ids = small
    rows = slice(0, 4)
    assert len(set(ident[rows])) == 1
    cfg = MiningConfig(band=(0.5, 1.0), band_mode="impostor_quantile", n_folds=2,
                       n_genuine=1, n_impostor=1, val_fold=False, device="cpu")
    with pytest.raises(MiningShortfall) as exc:
        mine_pairs(emb[rows], ident[rows], ids[rows], cfg, seed=1)
    note = exc.value.report["band_note"]
    assert "no impostor pairs" in note
    assert exc.value.report == {"shortfall": True, "band_note": note}
    assert str(exc.value) == f"mining: {note} (4 images)"


def _one_hot_pool():
    """6 identities x 3 images on one-hot embeddings (dimension 5): every score is exactly
    0 or 1, so a band's ends are hit exactly."""
    code = np.repeat(np.arange(6), 3)
    emb = np.eye(5, dtype=np.float32)[(code + np.tile(np.arange(3), 6)) % 5]
    return emb, np.array([f"q{c}" for c in code]), np.array([f"im{k:02d}" for k in range(18)])


@pytest.mark.parametrize("end", [0.0, 1.0])
def test_the_estimated_acceptance_counts_scores_on_the_band_ends(end):
    """A band [x, x] on scores that are exactly x: the estimate counts them (inclusive
    ends), as the picks do (all in band exactly)."""
    emb, ident, ids = _one_hot_pool()
    s = emb @ emb.T
    iu = np.triu_indices(18, 1)
    imp = ident[iu[0]] != ident[iu[1]]
    share = float((s[iu][imp] == end).mean())
    assert 0.1 < share < 0.9
    cfg = MiningConfig(band=(end, end), n_folds=2, n_genuine=0, n_impostor=2, val_fold=False,
                       device="cpu")
    res = mine_pairs(emb, ident, ids, cfg, seed=6)
    est = res.report["impostor"]["estimated_acceptance_rate"]
    assert est == pytest.approx(share, abs=0.05)      # 2048 draws of the same scores
    assert (res.pairs.ref_score == end).all() and len(res.pairs) == 4


def test_image_cap_refusals_are_split_between_the_sides(small, caplog):
    """With one use per image the genuine side refuses pairs (11 identities of 4 images
    hold at most 22 disjoint pairs, 30 are asked); the impostor side, asked for none,
    refuses none. The impostor blocks: a pool scored to the end in one pass is every pair
    of slices once. The shortfall warning is the report's paragraph."""
    emb, ident, ids = small
    cfg = MiningConfig(band=(-1.0, 1.0), n_folds=2, n_genuine=15, n_impostor=0,
                       val_fold=False, genuine_oversample=0, max_image_uses=1,
                       on_shortfall="write", device="cpu")
    with caplog.at_level("WARNING", logger="facecast.analysis.mining"):
        rep = mine_pairs(emb, ident, ids, cfg, seed=8).report
    assert rep["genuine"]["selected"] == 22 and rep["genuine"]["rejected_by_image_cap"] > 0
    assert rep["impostor"]["rejected_by_image_cap"] == 0
    assert rep["max_uses_observed"] == 1 and rep["images_used"] == 44
    assert [r.getMessage() for r in caplog.records] == [shortfall_message(rep)]
    # impostors only, all 924 wanted and more: every block of 16-image slices, once
    cfg = MiningConfig(band=(-1.0, 1.0), n_folds=2, n_genuine=0, n_impostor=600,
                       val_fold=False, max_image_uses=1000, on_shortfall="write",
                       device="cpu")
    imp = mine_pairs(emb, ident, ids, cfg, seed=8).report["impostor"]
    assert imp["slice_size"] == 16                      # acceptance 1: the smallest slice
    n_slices = -(-45 // 16)
    assert imp["blocks"] == n_slices * (n_slices + 1) // 2
