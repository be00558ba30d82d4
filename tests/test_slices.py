"""Slice discovery (issues 25, 33): enumeration and bounds, the dyadic cluster-robust test,
the family and FDR, findings (distinct effects on FNMR and FMR), the planted demo effects,
the CLI and the config checks. The nulls: tests/test_slices_null.py."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from facecast.analysis.filtering import AttributeFilter, filter_mask, parse_filters
from facecast.cli import main as cli_main
from facecast.config.check import ConfigError
from facecast.config.patterns import matches_any, select_columns
from facecast.slices.bootstrap import bootstrap_rates
from facecast.slices.discover import DEFAULTS, find_slices, global_threshold
from facecast.slices.predicates import build_predicates, pair_members
from facecast.slices.search import enumerate_slices, score, score_upper_bound
from facecast.slices.testing import Design, adjust

REPO = Path(__file__).resolve().parents[1]
DATA = Path(__file__).parent / "data" / "slices"


def planted(n_ids: int = 80, per_id: int = 5, seed: int = 0, effect: float = 0.25,
            n_imp: int = 4000) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Identities with two binary traits, a continuous per-image one and a noise column;
    genuine scores of identities with a = 1 and b = 1 are lower by ``effect``."""
    rng = np.random.default_rng(seed)
    ids = np.repeat(np.arange(n_ids), per_id)
    a = rng.integers(0, 2, n_ids)[ids]
    b = rng.integers(0, 2, n_ids)[ids]
    attrs = pd.DataFrame({"image_id": [f"i{k}" for k in range(len(ids))],
                          "identity": ids.astype(str), "status": "ok", "exclude": False,
                          "a": a.astype(float), "b": b.astype(float),
                          "c": rng.normal(size=len(ids)), "noise": rng.uniform(size=len(ids))})
    gen = np.array([(x, y, 1) for i in range(n_ids)
                    for x, y in itertools.combinations(np.flatnonzero(ids == i), 2)])
    imp_a = rng.integers(0, len(ids), n_imp)
    imp_b = rng.integers(0, len(ids), n_imp)
    keep = ids[imp_a] != ids[imp_b]
    imp = np.stack([imp_a[keep], imp_b[keep], np.zeros(keep.sum(), int)], 1)
    allp = np.vstack([gen, imp])
    label = allp[:, 2]
    s = np.where(label == 1, rng.normal(0.6, 0.1, len(allp)), rng.normal(0.2, 0.1, len(allp)))
    s[(a[allp[:, 0]] == 1) & (b[allp[:, 0]] == 1) & (label == 1)] -= effect
    pairs = pd.DataFrame({"image_a": attrs["image_id"].to_numpy()[allp[:, 0]],
                          "image_b": attrs["image_id"].to_numpy()[allp[:, 1]],
                          "identity_a": ids[allp[:, 0]].astype(str),
                          "identity_b": ids[allp[:, 1]].astype(str),
                          "label": label, "score": s})
    return pairs, attrs


def challenge(seed: int = 0, n_ids: int = 240, per_id: int = 4, n_imp: int = 40000
              ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The FairFace 2020 challenge's kind of FMR finding, planted: impostor pairs of two
    dark-skinned women, and of two images with eyeglasses, are falsely matched more
    often; age, per-image noise and a continuous trait carry nothing."""
    rng = np.random.default_rng(seed)
    ids = np.repeat(np.arange(n_ids), per_id)
    n_img = len(ids)
    female = rng.integers(0, 2, n_ids)[ids]
    dark = (rng.random(n_ids) < 0.4)[ids].astype(int)
    glasses = (rng.random(n_img) < 0.3).astype(int)
    attrs = pd.DataFrame({"image_id": [f"i{k}" for k in range(n_img)],
                          "identity": ids.astype(str), "status": "ok",
                          "female": female, "dark_skin": dark, "glasses": glasses,
                          "age": rng.uniform(18, 80, n_ids)[ids],
                          "noise": rng.normal(size=n_img)})
    gen = np.array([(x, y) for i in range(n_ids)
                    for x, y in itertools.combinations(np.flatnonzero(ids == i), 2)])
    a, b = rng.integers(0, n_img, n_imp), rng.integers(0, n_img, n_imp)
    keep = ids[a] != ids[b]
    imp = np.stack([a[keep], b[keep]], 1)
    ab = np.vstack([gen, imp])
    label = np.r_[np.ones(len(gen), int), np.zeros(len(imp), int)]
    s = np.where(label == 1, rng.normal(0.7, 0.1, len(ab)), rng.normal(0.2, 0.1, len(ab)))
    both = lambda v: (v[ab[:, 0]] == 1) & (v[ab[:, 1]] == 1)  # noqa: E731
    s[(label == 0) & both(female) & both(dark)] += 0.12
    s[(label == 0) & both(glasses)] += 0.08
    pairs = pd.DataFrame({"image_a": attrs["image_id"].to_numpy()[ab[:, 0]],
                          "image_b": attrs["image_id"].to_numpy()[ab[:, 1]],
                          "identity_a": ids[ab[:, 0]].astype(str),
                          "identity_b": ids[ab[:, 1]].astype(str), "label": label,
                          "score": s})
    return pairs, attrs


def test_column_patterns_one_rule() -> None:
    cols = ["a_1", "b_1", "a_2", "c"]
    assert select_columns(cols) == cols
    assert select_columns(cols, ["a_*"]) == ["a_1", "a_2"]
    assert select_columns(cols, ["a_2", "a_1"], order="patterns") == ["a_2", "a_1"]
    assert select_columns(cols, ["*_1", "a_*"], order="patterns") == ["a_1", "b_1", "a_2"]
    assert select_columns(cols, exclude=["*_1"]) == ["a_2", "c"]
    assert select_columns(cols, exclude=["nothing*"]) == cols  # exclude may match none
    with pytest.raises(KeyError, match=r"x\.columns: 'z\*' matches no attribute column\W*$"):
        select_columns(cols, ["z*"], key="x.columns")
    with pytest.raises(KeyError, match="available"):
        select_columns(cols, ["z*"], key="x.columns", show_available=True)
    assert matches_any("A_1", ["a_*"]) is False  # case-sensitive everywhere


def test_adjust_is_benjamini_hochberg_and_yekutieli_over_the_whole_family() -> None:
    p = np.array([0.01, 0.04, 0.03, 0.5])
    bh = np.array([0.04, 0.04 * 4 / 3, 0.04 * 4 / 3, 0.5])
    assert np.allclose(adjust(p, "bh"), bh)
    assert np.allclose(adjust(p, "by"), np.minimum(bh * (1 + 1 / 2 + 1 / 3 + 1 / 4), 1))
    # four more hypotheses untested (p = 1): m = 8 scales every q by 2
    assert np.allclose(adjust(p, "bh", n_tests=8), np.minimum(2 * bh, 1))


@pytest.mark.parametrize("pair", ["both", "either"])
def test_lattice_counts_match_brute_force_and_bounds_hold(pair: str) -> None:
    pairs, attrs = planted(n_ids=30, per_id=4, seed=3)
    pool = np.ones(len(attrs), bool)
    cols = ["a", "b", "c", "noise"]
    preds, masks = build_predicates(attrs, cols, pool, {"bins": 4})
    idx = pd.Index(attrs["image_id"])
    gen = pairs[pairs["label"] == 1]
    ia, ib = idx.get_indexer(gen["image_a"]), idx.get_indexer(gen["image_b"])
    err = gen["score"].to_numpy() < 0.5
    col = np.array([cols.index(p.column) for p in preds])
    lat = enumerate_slices(masks, col, ia, ib, err, max_depth=3, min_support=3, alpha=0.95,
                           pair=pair)
    a_side, b_side = masks[ia], masks[ib]
    for d, size, e in zip(lat.defs, lat.size, lat.errors, strict=True):
        use = [p for p in d if p >= 0]
        on_a, on_b = a_side[:, use].all(1), b_side[:, use].all(1)
        m = on_a & on_b if pair == "both" else on_a | on_b
        assert size == m.sum() and e == (m & err).sum()
        assert np.array_equal(m, pair_members(masks[:, use].all(1), ia, ib, pair))
    depth2 = lat.defs[lat.depth == 2]
    s1, e1 = lat.size[lat.depth == 1], lat.errors[lat.depth == 1]
    n, mean = len(err), err.mean()
    ub = score_upper_bound(np.minimum(s1[depth2[:, 0]], s1[depth2[:, 1]]),
                           np.minimum(e1[depth2[:, 0]], e1[depth2[:, 1]]), n, mean, 0.95, 3)
    sc = score(lat.errors[lat.depth == 2], lat.size[lat.depth == 2], n, mean, 0.95)
    ok = lat.size[lat.depth == 2] >= 3
    assert (ub[ok] >= sc[ok] - 1e-12).all()
    # the counts: every conjunction of predicates of different columns is evaluated or
    # pruned; pruned_supported only counts those whose predicates all reach the support
    per = np.bincount(col)
    total = sum(np.prod([per[c] for c in cc]) for k in (2, 3)
                for cc in itertools.combinations(range(len(cols)), k))
    assert lat.counts["evaluated"] - len(preds) + lat.counts["pruned"] == total
    assert 0 <= lat.counts["pruned_supported"] <= lat.counts["pruned"]


def test_dyadic_variance_counts_every_pair_of_pairs_sharing_a_person_once() -> None:
    """The test's variance: each pair's own term at its null expectation ``r (1 - r)``,
    plus the brute-force sum over pairs of distinct pairs that share an identity (CR1,
    never negative), for genuine and impostor pairs, with and without strata."""
    rng = np.random.default_rng(0)
    n, n_ids = 240, 20
    a = rng.integers(0, n_ids, n)
    b = np.where(rng.random(n) < 0.3, a, (a + rng.integers(1, n_ids, n)) % n_ids)
    err = rng.random(n) < 0.3
    member = rng.random(n) < 0.3
    design = Design(a.astype(str), b.astype(str), err)
    share = np.array([[bool({x, y} & {u, v}) for u, v in zip(a, b, strict=True)]
                      for x, y in zip(a, b, strict=True)])
    g = len(set(a[member]) | set(b[member]))
    for codes in (np.zeros(n, int), rng.integers(0, 3, n)):
        rate = np.array([err[codes == c].mean() for c in codes])
        pi = np.array([member[codes == c].mean() for c in codes])
        t = (member - pi) * (err - rate)
        cross = t @ share @ t - t @ t
        null_own = ((member - pi) ** 2 * rate * (1 - rate)).sum()
        want = t.sum() / np.sqrt(null_own + max(cross, 0) * g / (g - 1))
        got = design.test(design.members(member), design.strata(codes)).z[0]
        assert got == pytest.approx(want, rel=1e-9)


def test_korn_graubard_interval_and_streamed_bootstrap_agree_on_clustered_errors() -> None:
    rng = np.random.default_rng(1)
    n_ids, per = 60, 12
    ids = np.repeat(np.arange(n_ids), per)
    hard = rng.random(n_ids) < 0.3
    err = rng.random(len(ids)) < np.where(hard[ids], 0.6, 0.1)
    design = Design(ids.astype(str), ids.astype(str), err)
    res = design.test(np.ones(len(ids), bool))
    lo, hi = bootstrap_rates(design, [np.arange(len(ids))], 2000, seed=0)
    assert res.rate_lo[0] < err.mean() < res.rate_hi[0]
    assert lo[0] == pytest.approx(res.rate_lo[0], abs=0.03)
    assert hi[0] == pytest.approx(res.rate_hi[0], abs=0.03)
    # clustering widens the interval beyond the independent-pairs (binomial) one
    assert hi[0] - lo[0] > 1.5 * 2 * 1.96 * np.sqrt(err.mean() * (1 - err.mean()) / len(ids))


def test_threshold_falls_back_to_the_eer_where_the_impostors_cannot_resolve_the_fmr() -> None:
    rng = np.random.default_rng(0)
    y = np.r_[np.ones(300, bool), np.zeros(500, bool)]
    s = np.where(y, rng.normal(1, 1, 800), rng.normal(0, 1, 800))
    thr = global_threshold(s, y, {"threshold": {"policy": "fmr", "value": 1e-3}})
    assert thr["policy"] == "eer" and thr["requested"] == "fmr" and not thr["resolvable"]
    assert "needs >= 1000 impostor pairs" in thr["why"] and "EER" in thr["why"]
    assert abs(thr["fnmr"] - thr["fmr"]) < 0.01
    ok = global_threshold(s, y, {"threshold": {"policy": "fmr", "value": 1e-2}})
    assert ok["policy"] == "fmr" and ok["why"] == "" and ok["fmr"] <= 1e-2


def test_defaults_are_the_schema_defaults() -> None:
    schema = yaml.safe_load((REPO / "workflow/schemas/config.schema.yaml").read_text())
    props = schema["properties"]["slices"]["properties"]
    for key, value in DEFAULTS.items():
        if key == "pair":
            assert value == {k: v["default"] for k, v in props[key]["properties"].items()}
        else:
            assert props[key]["default"] == value, key


def test_planted_conjunction_is_finding_one_and_exports_as_filters() -> None:
    pairs, attrs = planted()
    cfg = {"threshold": {"policy": "eer"}, "n_boot": 200, "exclude": ["identity"],
           "error_types": ["fnmr"]}
    res = find_slices(pairs, attrs, cfg, seed=1)
    top = res.findings.iloc[0]
    assert set(top["columns"].split(" & ")) == {"a", "b"}
    assert "a = 1" in top["slice"] and "b = 1" in top["slice"]
    assert top["error_lo"] > top["rest_rate"] and top["q"] <= 0.05
    assert len(parse_filters(top["definition"], "x")) == 2
    t = res.table
    assert not t.loc[t["columns"] == "noise", "significant"].any()
    # every row is a slice of the lattice with its own support (counted here by brute
    # force) at least min_genuine; the family is S1 + C - U (slices.family)
    fam = BruteFamily(res, "fnmr", "either", min_support=32, max_depth=2)
    sizes = [fam.support(d) for d in t["pred_ids"]]
    np.testing.assert_array_equal(sizes, t["size"])
    assert min(sizes) >= 32 and len(t) <= fam.exact <= res.info["family"] <= fam.upper
    assert res.info["family"] == fam.upper - fam.evaluated_below(res, 32)
    # every significant slice is in a finding or says why not; members point back
    sig = t[t["significant"]]
    assert (sig["finding"].notna() | sig["note"].str.startswith("in no finding")).all()
    assert top["n_members"] == (t["finding"] == 1).sum() - 1


def step_up_rejections(p, m: int, level: float, method: str = "bh") -> np.ndarray:
    """Benjamini & Hochberg's (1995) step-up procedure as the paper states it, over ``m``
    hypotheses of which those beyond ``p`` have p = 1: reject the k smallest, k the
    largest with p_(k) <= k * level / m; Benjamini & Yekutieli (2001): the level divided
    by sum_{i <= m} 1 / i."""
    p = np.asarray(p, np.float64)
    if method == "by":
        level /= sum(1.0 / i for i in range(1, m + 1))
    ps = np.sort(p)
    k = np.flatnonzero(ps <= np.arange(1, len(ps) + 1) * level / m)
    return p <= ps[k[-1]] if len(k) else np.zeros(len(p), bool)


def assert_fdr_adjusted(p, q, m: int, method: str) -> None:
    """``q`` are the adjusted p-values of the step-up procedure over a family of ``m``:
    at every level between two places where either side's rejections can change (the
    q-values; the levels m * p_(k) / k at which the procedure's can) the rows with
    ``q <= level`` are exactly the procedure's rejections."""
    p, q = np.asarray(p, np.float64), np.asarray(q, np.float64)
    assert len(p) <= m
    scale = sum(1.0 / i for i in range(1, m + 1)) if method == "by" else 1.0
    ps = np.sort(p)
    cuts = np.unique(np.r_[q, ps * m * scale / np.arange(1, len(ps) + 1)])
    levels = np.r_[cuts[0] / 2, (cuts[:-1] + cuts[1:]) / 2]
    for level in levels[levels < 1]:
        np.testing.assert_array_equal(q <= level, step_up_rejections(p, m, level, method),
                                      err_msg=f"{method} at level {level}, family {m}")


def test_fdr_check_is_independent_and_can_fail() -> None:
    """The check above on hand-worked BH values, and it rejects a family of the wrong
    size (hypotheses pruned untested but not counted) and BH where BY was asked."""
    p = np.array([0.001, 0.02, 0.03, 0.5])
    assert_fdr_adjusted(p, [0.005, 0.05, 0.05, 0.625], 5, "bh")  # 5p_(k)/k, min from above
    with pytest.raises(AssertionError):
        assert_fdr_adjusted(p, adjust(p, "bh"), 5, "bh")          # m = 4: too small a family
    with pytest.raises(AssertionError):
        assert_fdr_adjusted(p, adjust(p, "bh", n_tests=5), 5, "by")
    assert_fdr_adjusted(p, adjust(p, "by", n_tests=5), 5, "by")


class BruteFamily:
    """One error type's lattice counted by brute force over every conjunction of up to
    ``max_depth`` predicates of different columns, on a search's predicates and pairs:
    ``exact`` slices whose own support reaches ``min_support``; ``upper`` the predicates
    with that support plus every conjunction of them (S1 + C in slices.family)."""

    def __init__(self, res, etype: str, pair: str, *, min_support: int, max_depth: int):
        self.masks, self.pair = res.space.masks, pair
        rel = res.scored.label == (etype == "fnmr")
        self.ia, self.ib = res.scored.ia[rel], res.scored.ib[rel]
        self.etype, self.max_depth = etype, max_depth
        col, n = res.space.col_of, self.masks.shape[1]
        ok = [k for k in range(n) if self.support([k]) >= min_support]
        self.exact = self.upper = len(ok)
        for depth in range(2, max_depth + 1):
            for combo in itertools.combinations(ok, depth):
                if len({int(col[k]) for k in combo}) == depth:
                    self.upper += 1
                    self.exact += self.support(combo) >= min_support

    def support(self, preds) -> int:
        """Relevant pairs in the slice: both / either image satisfies every predicate."""
        img = self.masks[:, [int(k) for k in preds]].all(1)
        inside = (img[self.ia] & img[self.ib]) if self.pair == "both" else (
            img[self.ia] | img[self.ib])
        return int(inside.sum())

    def evaluated_below(self, res, min_support: int) -> int:
        """U: conjunctions the search evaluated (its lattice, same settings) whose own
        support, counted here, is below the minimum."""
        rel = res.scored.label == (self.etype == "fnmr")
        lat = enumerate_slices(self.masks, res.space.col_of, self.ia, self.ib,
                               res.scored.error[rel], max_depth=self.max_depth,
                               min_support=min_support, alpha=DEFAULTS["alpha"],
                               pair=self.pair)
        deeper = lat.defs[lat.depth >= 2]
        return sum(self.support(d[d >= 0]) < min_support for d in deeper)


def test_family_size_depends_on_the_errors_through_the_pruning_only() -> None:
    """Pairs in a slice when both images are (many conjunctions fall below the support):
    the family lies strictly between the slices that reach the support and S1 + C, at
    S1 + C - U, all counted by brute force; with no error at the threshold the bounds
    prune every conjunction, U = 0 and the family is S1 + C."""
    import dataclasses

    from facecast.slices.discover import settings
    from facecast.slices.family import search_family

    cfg = {"threshold": {"policy": "eer"}, "n_boot": 20, "exclude": ["identity"],
           "error_types": ["fnmr"], "min_genuine": 10, "pair": "both"}
    pairs, attrs = planted(n_ids=30, per_id=4, seed=3)
    res = find_slices(pairs, attrs, cfg, seed=0)
    brute = BruteFamily(res, "fnmr", "both", min_support=10, max_depth=2)
    below = brute.evaluated_below(res, 10)
    assert brute.exact < res.info["family"] < brute.upper and below > 0
    assert res.info["family"] == brute.upper - below
    none = dataclasses.replace(res.scored, error=np.zeros_like(res.scored.error))
    assert search_family(none, res.space, "fnmr", settings(cfg)).counts["family"] == \
        brute.upper


def test_challenge_kind_fmr_findings_dark_skinned_women_and_eyeglasses() -> None:
    """Impostor pairs of two dark-skinned women and of two eyeglass images are falsely
    matched more often: the FMR search reports both, as separate findings, at one
    threshold at FMR 1e-2 (impostor pairs in a slice when both images are)."""
    pairs, attrs = challenge()
    cfg = {"threshold": {"policy": "fmr", "value": 1e-2}, "n_boot": 200,
           "error_types": ["fnmr", "fmr"]}
    res = find_slices(pairs, attrs, cfg, seed=0)
    assert res.info["pair"] == {"fnmr": "either", "fmr": "both"}
    f = res.findings[res.findings["error_type"] == "fmr"].set_index("finding")
    cols = [set(c.split(" & ")) for c in f["columns"]]
    assert {"female", "dark_skin"} in cols[:3], f["slice"].tolist()
    assert {"glasses"} in cols[:3], f["slice"].tolist()
    assert all(f["overlap_max"] < 0.5)
    for _, row in f.iterrows():
        assert row["error_lo"] > row["rest_rate"]
    assert not any("noise" in c or "age" in c for c in cols), f["slice"].tolist()
    # no planted FNMR effect: no FNMR finding
    assert not (res.findings["error_type"] == "fnmr").any()


def test_a_random_split_of_an_effect_is_represented_by_the_effect() -> None:
    """Children of one planted single-predicate effect that the search ranks first by
    chance (the effect within a random split) give way to the simpler parent."""
    pairs, attrs = planted(effect=0.0, seed=4)
    rng = np.random.default_rng(4)
    bad = attrs.groupby("identity")["a"].first()
    hit = (pairs["label"] == 1) & pairs["identity_a"].map(bad).eq(1).to_numpy()
    pairs.loc[hit, "score"] -= 0.3 * rng.random(hit.sum())
    res = find_slices(pairs, attrs, {"threshold": {"policy": "eer"}, "n_boot": 100,
                                     "error_types": ["fnmr"]}, seed=0)
    assert res.findings.iloc[0]["slice"] == "a = 1", res.findings["slice"].tolist()
    # the case the test is about: a random split of the effect ranks above it by score,
    # and every significant split of "a = 1" gives way to it (a member of its finding)
    t = res.table
    assert t.loc[t["slice"] == "a = 1", "rank"].item() > 1
    top = t.loc[t["rank"] == 1].iloc[0]
    assert top["slice"].startswith("a = 1 and "), top["slice"]
    splits = t["significant"] & t["slice"].str.startswith("a = 1 and ")
    assert splits.sum() >= 5 and (t.loc[splits, "finding"] == 1).all()


def _demo(model: str = "dlib") -> tuple[pd.DataFrame, pd.DataFrame]:
    return (pd.read_parquet(DATA / f"{model}_fair_pool.parquet"),
            pd.read_parquet(DATA / "attributes.parquet"))


#: the demo config's slices section (config.yaml)
DEMO_CFG = {"exclude": ["label_low_contrast_group"], "threshold": {"policy": "eer"},
            "n_boot": 200}


def test_demo_dlib_findings_are_the_planted_group_and_the_strong_blur() -> None:
    """dlib's demo scores, the demo config's search (both error types, the planted
    group's indicator excluded): among the top three FNMR findings, skin tone x sex (the
    low-contrast group: dark-skinned women) and the strong-blur share, separately."""
    pairs, attrs = _demo()
    res = find_slices(pairs, attrs, DEMO_CFG, seed=20231)
    f = res.findings[res.findings["error_type"] == "fnmr"].head(3)
    cols = [set(c.split(" & ")) for c in f["columns"]]
    group = [i for i, c in enumerate(cols)
             if c & {"label_skin_tone", "label_dark_skin"}
             and c & {"label_male", "label_noisy_male", "age_gender_male"}]
    blur = [i for i, c in enumerate(cols)
            if c & {"label_blur", "sharpness_laplacian", "blur_effect"}]
    assert group and blur and set(group).isdisjoint(blur), f["slice"].tolist()
    g = f.iloc[group[0]]
    assert "= 0" in g["slice"].split("male")[1][:4]  # women
    assert g["error_lo"] > g["rest_rate"] and g["q"] < 1e-3
    assert (f["overlap_max"] < 0.5).all()
    assert res.info["threshold"]["policy"] == "eer"


def test_cli_prints_the_findings_and_writes_every_output(tmp_path: Path,
                                                         capsys: pytest.CaptureFixture
                                                         ) -> None:
    pairs, attrs = planted(n_ids=40, per_id=4)
    pairs.drop(columns=["identity_a", "identity_b"]).to_parquet(tmp_path / "p.parquet")
    attrs.to_parquet(tmp_path / "a.parquet")
    rc = cli_main(["slices", "--pairs", str(tmp_path / "p.parquet"), "--attributes",
                   str(tmp_path / "a.parquet"), "--out", str(tmp_path / "out"),
                   "--policy", "eer", "--n-boot", "50", "--fdr", "0.1"])
    assert rc == 0
    out = tmp_path / "out"
    for name in ("slices.parquet", "slices.csv", "findings.parquet", "findings.csv",
                 "discovered.yaml", "search.json", "report.html", "slices.png",
                 "examples.png"):
        assert (out / name).stat().st_size > 0, name
    findings = pd.read_parquet(out / "findings.parquet")
    disc = yaml.safe_load((out / "discovered.yaml").read_text())
    assert len(disc["benchmarks"]) == len(findings) > 0
    for name, bench in disc["benchmarks"].items():
        assert name.startswith("slice_model_pairs_fnmr_") or name.startswith(
            "slice_model_pairs_fmr_")
        parse_filters(bench["filters"], name)
    printed = capsys.readouterr().out
    assert "Findings (distinct effects" in printed and "FNMR 1" in printed
    assert "One threshold on all" in printed
    search = json.loads((out / "search.json").read_text())
    assert search["error_types"] == ["fnmr", "fmr"] and search["findings"] == len(findings)
    html = (out / "report.html").read_text()
    assert html.index("findings: distinct effects") < html.index("top slices")
    table = pd.read_parquet(out / "slices.parquet")
    assert "finding" in table.columns and set(table["error_type"]) == {"fnmr", "fmr"}


def test_config_mistakes_name_the_key() -> None:
    from facecast.config.check import check_config
    from facecast.config.prepare import resolve_config

    cfg = yaml.safe_load((REPO / "config.yaml").read_text())
    cfg["slices"] = {"columns": ["no_such_column*"], "models": ["nope"]}
    resolve_config(cfg, str(REPO / "workflow/schemas/config.schema.yaml"))
    with pytest.raises(ConfigError) as exc:
        check_config(cfg)
    text = str(exc.value)
    assert "slices.columns: 'no_such_column*'" in text and "slices.models: 'nope'" in text


def test_predicates_select_what_their_exported_filters_select() -> None:
    _, attrs = planted(n_ids=20, per_id=4, seed=5)
    pool = np.ones(len(attrs), bool)
    pool[::7] = False  # images outside the pool never satisfy a predicate
    preds, masks = build_predicates(attrs, ["a", "c", "noise"], pool,
                                    {"bins": 4, "rank_ranges": True})
    assert len({p.text for p in preds}) == len(preds) and len(preds) == 2 + 9 + 9
    for k, p in enumerate(preds):
        want = filter_mask(attrs[p.column].to_numpy(), pool, AttributeFilter.from_config(p.filter))
        assert np.array_equal(masks[:, k], want), p.text


def test_fmr_only_depth_three_and_unresolvable_fmr_notes() -> None:
    pairs, attrs = planted(n_ids=40, per_id=4, seed=2)
    cfg = {"error_types": ["fmr"], "threshold": {"policy": "fmr", "value": 1e-2},
           "n_boot": 50, "max_depth": 3, "min_impostor": 20, "min_genuine": 5,
           "fdr_method": "by"}
    res = find_slices(pairs, attrs, cfg, seed=0)
    t = res.table
    assert set(t["error_type"]) == {"fmr"} and t["depth"].max() == 3
    assert_fdr_adjusted(t["p"], t["q"], res.info["family"], "by")
    small = t[t["tested"] & (t["n_impostor"] < 100)]
    assert len(small) > 0
    assert (~small["fmr_resolvable"]).all() and small["note"].str.contains("FMR n/a").all()
